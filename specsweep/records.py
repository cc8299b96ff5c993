"""Raw per-request records (JSONL): the contract between serving and analysis.

One JSON object per line, one line per request, written by
``specsweep.serve.client`` and read back by ``specsweep.analysis``. Metrics are always computed from these files, never
from the client's memory, so that a result can be recomputed and audited.

Record fields (``RECORD_FORMAT_VERSION`` = 3):

==================  =====================  ===========================================
field               type                   meaning
==================  =====================  ===========================================
format_version      int                    record schema version
run_id              str                    the server job's run id (``new_run_id``): every
                                           file of one job (one launch) carries it (see below)
point               str                    the workload point of the launch this request
                                           belongs to (``default`` without points)
request_id          str                    unique within the run, e.g. ``m1-0007``
phase               "warmup"|"measured"|   only ``measured`` enters the metrics;
                    "profile"              ``profile``: sent while the engine's profiler
                                           recorded (results/<config>/launch-<launch>/profile/requests.jsonl)
repeat              int | null             measured round index (null for warmup)
window              int | null             warmup window index by completion order
                                           (null for measured, and for warmup requests
                                           that completed after warmup had stopped)
index               int                    request index within its phase/repeat
endpoint            str                    a name of the endpoint registry
                                           (``contracts.endpoints.ENDPOINTS``: generate,
                                           completions, chat)
prompt_key          str                    pairing key of the prompt as sent (sha256 of the
                                           endpoint, the prompt and output_len): requests of
                                           two runs with the same key got the same prompt
input_len           int | null             intended prompt tokens: the prompt's length by
                                           the tokenizer that selected it (chat: template
                                           included); null when not token-accurate (random
                                           words sent as text)
output_len          int                    max_new_tokens sent (ignore_eos is true)
scheduled_ns        int | null             intended send time in request-rate mode
send_ns             int                    ``time.perf_counter_ns()`` just before the POST
chunk_ns            list[int]              arrival time of every SSE data chunk
chunk_tokens        list[int | null]       new tokens in that chunk (null: unknown, e.g.
                                           an OpenAI text delta; 0: no new token)
end_ns              int | null             stream terminator (``[DONE]``) or failure time
http_status         int | null
prompt_tokens       int | null             from the server (meta_info / usage)
completion_tokens   int | null             from the server's final meta_info / usage,
                                           never counted from chunks
spec_verify_ct      int | null             verify forwards this request took part in
spec_accept_length  float | null           engine-reported (completion / verify)
spec_correct_drafts_histogram  list[int] | null  [j] = verify steps that accepted exactly j
                                           draft tokens (bonus excluded), engine-reported
                                           (SGLang's name; its list grows as runs are seen)
output_ids          list[int] | null       the generated token ids, as the server returned
                                           them (null when the endpoint returned none)
e2e_latency_s       float | null           engine-reported end-to-end latency
timing              dict | null            engine timing: draft_s, verify_s,
                                           verify_comm_s, allreduce_ct, forward_ct
finish_reason       str | null
status              "ok"|"error"|"incomplete"
error               str | null             error text (status != ok)
==================  =====================  ===========================================

``perf_counter_ns`` values are only comparable within one process (one run);
on Linux they are CLOCK_MONOTONIC, so also across processes of one host.

One run, one id. A server job draws one run id and writes it into every file
it leaves: ``launch.json`` and ``outcome.json`` (key ``run_id``), the first
line of ``server.log`` (``run_header``) and every record. Files of different
runs (an orphaned job that finished after its rerun started, a copy from
elsewhere) must never be summarised together: ``check_one_run`` says which
file belongs to which run.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from specsweep.contracts.vocabulary import RequestStatus

# Format history of a record (one line of requests.jsonl / warmup.jsonl):
#   1  the fields of RECORD_FIELDS below.
#   2  + prompt_key, output_ids, spec_correct_drafts_histogram; endpoint "chat";
#      input_len is the intended length of the prompt really sent (null = unknown).
#   3  + point: several workload points share one launch's files (plan.points);
#      phase may also be "profile" (requests of the profiling stage).
RECORD_FORMAT_VERSION = 3

PHASES = ("warmup", "measured", "profile")
#: ``point`` of the records of a configuration that declares no workload points.
DEFAULT_POINT = "default"
#: How a request ended (``contracts.vocabulary.RequestStatus``).
STATUSES = tuple(RequestStatus)

#: Every record carries exactly these keys.
RECORD_FIELDS = (
    "format_version",
    "run_id",
    "point",
    "request_id",
    "phase",
    "repeat",
    "window",
    "index",
    "endpoint",
    "prompt_key",
    "input_len",
    "output_len",
    "scheduled_ns",
    "send_ns",
    "chunk_ns",
    "chunk_tokens",
    "end_ns",
    "http_status",
    "prompt_tokens",
    "completion_tokens",
    "spec_verify_ct",
    "spec_accept_length",
    "spec_correct_drafts_histogram",
    "output_ids",
    "e2e_latency_s",
    "timing",
    "finish_reason",
    "status",
    "error",
)

#: Time stamps of a record (``*_ns``) are ``time.perf_counter_ns`` integers: this many a second.
NS_PER_S = 1e9

#: Keys of the engine's per-request ``timing`` dict.
TIMING_FIELDS = ("draft_s", "verify_s", "verify_comm_s", "allreduce_ct", "forward_ct")


def validate_record(record: dict[str, Any]) -> list[str]:
    """Return schema problems of one record ([] = valid)."""
    problems = [f"missing field {k!r}" for k in RECORD_FIELDS if k not in record]
    if record.get("phase") not in PHASES:
        problems.append(f"phase {record.get('phase')!r} not in {PHASES}")
    if record.get("status") not in STATUSES:
        problems.append(f"status {record.get('status')!r} not in {STATUSES}")
    chunks, toks = record.get("chunk_ns"), record.get("chunk_tokens")
    if isinstance(chunks, list) and isinstance(toks, list) and len(chunks) != len(toks):
        problems.append("chunk_ns and chunk_tokens differ in length")
    return problems


def new_record(**fields: Any) -> dict[str, Any]:
    """A schema-complete record: every field of ``RECORD_FIELDS``, defaults ``None``/empty.

    Unknown keys are refused so that a typo cannot create a silent new field.
    """
    unknown = set(fields) - set(RECORD_FIELDS)
    if unknown:
        raise KeyError(f"unknown record fields: {sorted(unknown)}")
    rec: dict[str, Any] = {k: None for k in RECORD_FIELDS}
    rec.update(format_version=RECORD_FORMAT_VERSION, chunk_ns=[], chunk_tokens=[])
    rec.update(fields)
    return rec


#: First line of every ``server.log`` a server job writes (before the server's own output).
RUN_HEADER_FORMAT = "# specsweep run_id={run_id} config={config}\n"
_RUN_HEADER = re.compile(r"^# specsweep run_id=(?P<run_id>[0-9a-f]+) ")


def new_run_id() -> str:
    """A fresh run id (12 hex digits, as in request ids)."""
    return uuid.uuid4().hex[:12]


def run_header(run_id: str, config: str) -> str:
    """The ``server.log`` header line of one run."""
    return RUN_HEADER_FORMAT.format(run_id=run_id, config=config)


def run_id_of_log(text: str) -> str | None:
    """The run id in a ``server.log`` header, or None when the log has none."""
    match = _RUN_HEADER.match(text)
    return match["run_id"] if match else None


class MixedRunsError(ValueError):
    """The files of one configuration were written by more than one run (or say no run)."""


def check_one_run(ids: dict[str, Any]) -> str:
    """The one run id that every file carries; ``MixedRunsError`` naming each file's run otherwise.

    ``ids`` maps a file name to its run id (a str, or None when the file
    carries none), or, for a record file, to the set of run ids of its
    records (an empty set for an empty file: nothing to contradict).
    """
    seen: dict[str, set[str]] = {}
    missing = []
    for name, value in ids.items():
        values = set(value) if isinstance(value, (set, frozenset, list, tuple)) else {value}
        if None in values or "" in values:
            missing.append(name)
        for run_id in values - {None, ""}:
            seen.setdefault(run_id, set()).add(name)
    if len(seen) == 1 and not missing:
        return next(iter(seen))
    parts = [f"run {run_id}: {', '.join(sorted(names))}" for run_id, names in sorted(seen.items())]
    if missing:
        parts.append(f"no run id: {', '.join(sorted(missing))}")
    kind = "files of two different runs" if len(seen) > 1 else "files without one common run id"
    raise MixedRunsError(f"{kind} ({'; '.join(parts)})")


#: The runtime of a server this workflow does not start (``runtime: external``): a job attaches to
#: the running server at the plan's ``url``, with no launch, teardown or host lock; what the server
#: runs is read from its info endpoint (``launch.json`` ``server_info``), not from the plan.
EXTERNAL_RUNTIME = "external"


def is_external(plan: dict[str, Any]) -> bool:
    """Whether a plan measures a server that was already running (``EXTERNAL_RUNTIME``)."""
    return plan.get("runtime") == EXTERNAL_RUNTIME
