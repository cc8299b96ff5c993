"""Raw per-request records (JSONL): the contract between serving and analysis.

One JSON object per line, one line per request, written by
``specsweep.serve.client`` and read back by ``specsweep.analysis``. Metrics are always computed from these files, never
from the client's memory, so that a result can be recomputed and audited.

Record fields (``RECORD_FORMAT_VERSION`` = 2):

==================  =====================  ===========================================
field               type                   meaning
==================  =====================  ===========================================
format_version      int                    record schema version
run_id              str                    one id per ``run_workload`` call (warmup and
                                           measured records of one run share it)
point               str                    the workload point of the launch this request
                                           belongs to (``default`` without points)
request_id          str                    unique within the run, e.g. ``m1-0007``
phase               "warmup"|"measured"    only ``measured`` enters the metrics
repeat              int | null             measured round index (null for warmup)
window              int | null             warmup window index by completion order
                                           (null for measured, and for warmup requests
                                           that completed after warmup had stopped)
index               int                    request index within its phase/repeat
endpoint            "generate"|"completions"
input_len           int                    prompt tokens requested (synthetic prompt)
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
e2e_latency_s       float | null           engine-reported end-to-end latency
timing              dict | null            engine timing: draft_s, verify_s,
                                           verify_comm_s, allreduce_ct, forward_ct
finish_reason       str | null
status              "ok"|"error"|"incomplete"
error               str | null             error text (status != ok)
==================  =====================  ===========================================

``perf_counter_ns`` values are only comparable within one process (one run);
on Linux they are CLOCK_MONOTONIC, so also across processes of one host.
"""

from __future__ import annotations

from typing import Any

# Format history of a record (one line of requests.jsonl / warmup.jsonl):
#   1  the fields of RECORD_FIELDS below, without point.
#   2  point: several workload points share one launch's files (plan.points).
RECORD_FORMAT_VERSION = 2

PHASES = ("warmup", "measured")
#: ``point`` of the records of a configuration that declares no workload points.
DEFAULT_POINT = "default"
STATUSES = ("ok", "error", "incomplete")

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
    "e2e_latency_s",
    "timing",
    "finish_reason",
    "status",
    "error",
)

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
