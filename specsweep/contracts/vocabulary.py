"""The words results are told in: statuses, stages, reasons, and the one failure type.

Each is a ``StrEnum`` whose values are the strings the files have always held:
a member *is* its string (``Status.OK == "ok"``; ``json.dumps``, f-strings and,
here, ``repr`` write ``ok``), so writing members changes no byte of plan.json,
outcome.json or summary.json, nor of a message that lists them, and reading code
may compare a loaded string with a member.

A comparison's outcome is a ``Verdict`` (faster, slower, ...), told in the
same way.

There are three status vocabularies, because three different things end:

* ``Status``: how a launch, a point or a configuration ended (outcome.json,
  summary.json, the report's rows);
* ``RequestStatus``: how one request ended (a raw record's ``status``);
* ``StageStatus``: how a profiling stage ended (profile.json, allreduce_bench.json).

A reason is a short machine word that says why a stage failed (``Reason``); the
detail beside it is a human sentence. Every stage that cannot produce its
result raises ``Failure(stage, reason, detail)``; the job records those three
fields as they are.
"""

from __future__ import annotations

from enum import StrEnum


class _Word(StrEnum):
    """A word of a file format: its repr is its string's, so a message listing members reads as before."""

    def __repr__(self) -> str:
        return repr(self.value)


class Status(_Word):
    """How a launch, a point or a configuration ended, best first (``STATUS_ORDER``)."""

    OK = "ok"
    FALLBACK = "fallback"  # measured, but the log shows the requested variant fell back
    CONTAMINATED = "contaminated"  # another specsweep server ran beside it: kept, never compared
    FAILED = "failed"


#: Best to worst: the status of several launches or points is the worst of theirs.
STATUS_ORDER = (Status.OK, Status.FALLBACK, Status.CONTAMINATED, Status.FAILED)
#: Statuses whose measurements enter the verdicts (and the pooled launch variance): a contaminated
#: number is never compared, a fallback one is (as what ran, not as the variant).
COMPARED = (Status.OK, Status.FALLBACK)


class Verdict(_Word):
    """What a comparison of one configuration with another says (``analysis.stats``: summary.csv's
    ``verdict`` columns, the report, the closing summary, the grids' winners); and what a report row
    says in its place where nothing was compared (a failed or contaminated row says its ``Status``)."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no significant difference"
    INSUFFICIENT = "insufficient samples"
    # a report row that is no comparison
    BASELINE = "baseline"  # the baseline's own row
    NO_BASELINE = "no baseline"  # the sweep names none, or the baseline's row is not ok
    NO_BASELINE_AT_POINT = "no baseline at this point"  # the baseline measured other points


#: What a comparison can say (``analysis.stats.compare``, ``holm_family``).
COMPARISON_VERDICTS = (Verdict.FASTER, Verdict.SLOWER, Verdict.NO_DIFFERENCE, Verdict.INSUFFICIENT)
#: The verdicts that call a difference (beyond the comparison's threshold).
CALLED = (Verdict.FASTER, Verdict.SLOWER)


class RequestStatus(_Word):
    """How one request ended (``records.new_record``)."""

    OK = "ok"
    ERROR = "error"
    INCOMPLETE = "incomplete"


class StageStatus(_Word):
    """How a profiling stage ended (``serve.profile``: the micro-benchmark, the profiler trace)."""

    OK = "ok"
    FAILED = "failed"
    OFF = "off"  # not asked for
    NOT_RUN = "not_run"  # the job ended before the stage
    SKIPPED = "skipped"  # asked for, but the engine has nothing to measure (its reason says why)
    MISSING = "missing"  # the summary found no file of the stage


class Stage(_Word):
    """Where in a configuration's life a failure happened (outcome.json and summary.json ``stage``)."""

    LAUNCH = "launch"
    READY = "ready"
    WARMUP = "warmup"
    BENCHMARK = "benchmark"
    SUMMARIZE = "summarize"
    # The profiling stages (their own files; ``serve.profile``).
    ALLREDUCE_BENCH = "allreduce_bench"
    PROFILE = "profile"


class Expect(_Word):
    """What a configuration's ``expect`` label says its run should end as: a known failure is a result."""

    OK = "ok"
    FAILURE = "failure"


class Reason(_Word):
    """Why a stage failed (outcome.json, summary.json, the profiling stages' files)."""

    # launch: before the server answered
    HOST_BUSY = "host_busy"
    GPUS_BUSY = "gpus_busy"
    VOLUME_MISSING = "volume_missing"
    IMAGE_UNAVAILABLE = "image_unavailable"
    PORT_IN_USE = "port_in_use"
    PROMPTS_UNAVAILABLE = "prompts_unavailable"
    READY_TIMEOUT = "ready_timeout"
    PROVENANCE_FAILED = "provenance_failed"
    BAD_SERVER_INFO = "bad_server_info"
    NO_SERVER_INFO = "no_server_info"  # an external server answers no info endpoint
    RDMA_MISSING = "rdma_missing"  # a configuration asks for RDMA devices the host lacks
    # any stage while the server should be running
    SERVER_EXITED = "server_exited"
    INTERRUPTED = "interrupted"
    # warmup, benchmark: what the client saw
    UNREACHABLE = "unreachable"
    ALL_REQUESTS_FAILED = "all_requests_failed"
    REPEAT_FAILED = "repeat_failed"
    OTHER_SERVER = "other_server"  # with status contaminated
    PARTNER_BUSY = "partner_busy"  # contaminated: a side-by-side round's other servers used CPU in its windows
    # summarize: what the records show
    POINT_NOT_MEASURED = "point_not_measured"
    INVALID_RECORDS = "invalid_records"
    NO_SUCCESSFUL_REQUESTS = "no_successful_requests"
    MISSING_METRIC = "missing_metric"
    OUTPUTS_DIFFER = "outputs_differ"
    VARIANT_FALLBACK = "variant_fallback"  # with status fallback
    # the profiling stages
    BENCH_TIMEOUT = "bench_timeout"
    BENCH_FAILED = "bench_failed"
    BENCH_OUTPUT = "bench_output"
    BENCH_WRONG_SUM = "bench_wrong_sum"
    TRACES_MISSING = "traces_missing"
    START_PROFILE_FAILED = "start_profile_failed"
    STOP_PROFILE_FAILED = "stop_profile_failed"


class Failure(RuntimeError):
    """A stage could not produce its result: ``stage`` (``Stage``), ``reason`` (``Reason``), ``detail``
    (a human sentence with what was seen). The one exception type a stage raises for a result that is a
    failure; ``except Failure`` catches every kind (``serve``'s ``LaunchError``, ``BenchmarkError`` and
    ``ProfileError`` are its names by where it is raised)."""

    def __init__(self, stage: str, reason: str, detail: str) -> None:
        super().__init__(f"{stage}: {reason}: {detail}")
        self.stage = stage
        self.reason = reason
        self.detail = detail
