"""The one table of metrics, ``METRICS``: every metric declared once.

Each entry holds its formula (a function of ``analysis.formulas``, whose docstring states formula and unit),
unit, definition, whether it needs speculation, whether it is required, and its report/CSV columns; the
summary (``analysis.compute``), the report, the CSV and the plots all read it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specsweep.analysis.formulas import (
    Value,
    accept_histogram,
    accept_length,
    accept_length_weighted,
    accept_rate_by_position,
    aggregate_output_tok_s,
    allreduce_per_forward,
    cycle_time_ms,
    cycle_time_weighted_ms,
    decode_rate,
    decode_tok_s,
    decode_tok_s_weighted,
    e2e_ms,
    itl_ms,
    output_common_prefix_tokens,
    output_match_share,
    output_tok_s,
    prompt_tokens,
    target_forward_comm_ms,
    target_forward_ms,
    timing_per_cycle_ms,
    tpot_ms,
    ttft_ms,
    verify_comm_share,
    verify_compute_per_cycle_ms,
)
from specsweep.analysis.profile_formulas import (
    allreduce_bench_ms_per_verify,
    allreduce_bench_us,
    profile_seconds,
    profile_target,
    trace_allreduce_impl,
    trace_rank_skew_ms,
)


def column_value(metrics: dict[str, Any], column: "Column") -> Any:
    """The value of one report/CSV column from a summary's ``metrics`` (None = absent)."""
    entry = metrics.get(column.metric)
    if not isinstance(entry, dict):
        return None
    if column.field == "ci_low" or column.field == "ci_high":
        ci = entry.get("median_ci")
        return ci[column.field[3:]] if ci else None
    if column.field == "median_of_repeats":
        values = entry.get("per_repeat")
        return float(statistics.median(values)) if values else None
    return entry.get(column.field)


# ------------------------------------------------------------- the table


@dataclass(frozen=True)
class Column:
    """A report/CSV column that shows one field of one metric."""

    name: str  # CSV column and report-row key
    metric: str
    field: str  # "value", "p50", "p99", "ci_low", "ci_high", "median_of_repeats"


@dataclass(frozen=True)
class Metric:
    """One metric: its formula, unit, definition and how every consumer treats it.

    ``kind``: ``per_request`` (a distribution over requests), ``pooled`` (a
    distribution over values pooled from all requests), ``per_repeat`` (one
    value per measured repeat), ``run`` (one value over all records; a list
    for the histograms), ``paired`` (one value from this run's and the
    baseline's records: ``compute(records, baseline_records)``) or
    ``profile`` (one value from the profiling stage's trace and micro-benchmark).
    ``spec_only``: exists only under speculation (not listed as absent
    otherwise). ``required``: ``"always"``, ``"speculation"`` or ``None``: a
    required metric that is absent fails the configuration (``missing_metric``).
    ``columns``: its report/CSV columns. ``verdict``: the label of the verdict
    the report gives on this metric against the baseline (``PRIMARY_VERDICT``
    first; per-request kind with ``ci``, so that its samples are kept);
    ``lower_is_better``: a time, so a smaller value is "faster".
    """

    name: str
    compute: Callable[..., Any]
    unit: str
    definition: str
    kind: str
    spec_only: bool = False
    required: str | None = None
    ci: bool = False
    columns: tuple[Column, ...] = ()
    verdict: str | None = None
    lower_is_better: bool = False


def _timing(key: str) -> Callable[[Sequence[dict[str, Any]]], Value]:
    return lambda records: timing_per_cycle_ms(records, key)


def _trace(key: str) -> Callable[[dict[str, Any]], Value]:
    return lambda section: profile_target(section, key)


def _metrics(*entries: Metric) -> dict[str, Metric]:
    return {e.name: e for e in entries}


METRICS: dict[str, Metric] = _metrics(
    Metric("output_tok_s", output_tok_s, "tok/s", "completion_tokens / e2e_s per request", "per_request",
           required="always", ci=True, verdict="end-to-end",
           columns=(Column("tok_s_median", "output_tok_s", "p50"), Column("tok_s_ci_low", "output_tok_s", "ci_low"),
                    Column("tok_s_ci_high", "output_tok_s", "ci_high"))),
    Metric("decode_tok_s", decode_tok_s, "tok/s", "(completion_tokens - 1) / decode_s per request", "per_request",
           ci=True, verdict="decode", columns=(Column("decode_tok_s_median", "decode_tok_s", "p50"),
                             Column("decode_tok_s_ci_low", "decode_tok_s", "ci_low"),
                             Column("decode_tok_s_ci_high", "decode_tok_s", "ci_high"))),
    Metric("ttft_ms", ttft_ms, "ms", "first token chunk - send", "per_request", ci=True, verdict="TTFT",
           lower_is_better=True,
           columns=(Column("ttft_p50_ms", "ttft_ms", "p50"), Column("ttft_p99_ms", "ttft_ms", "p99"))),
    Metric("tpot_ms", tpot_ms, "ms", "decode_ms / (completion_tokens - 1)", "per_request",
           columns=(Column("tpot_p50_ms", "tpot_ms", "p50"),)),
    Metric("e2e_ms", e2e_ms, "ms", "[DONE] - send", "per_request"),
    Metric("itl_ms", itl_ms, "ms", "gap between consecutive token chunks (pooled)", "pooled",
           columns=(Column("itl_p50_ms", "itl_ms", "p50"), Column("itl_p99_ms", "itl_ms", "p99"))),
    Metric("accept_length_per_request", accept_length, "tokens/verify", "completion_tokens / spec_verify_ct",
           "per_request", spec_only=True),
    Metric("cycle_time_ms_per_request", cycle_time_ms, "ms", "decode_ms / spec_verify_ct", "per_request",
           spec_only=True),
    Metric("aggregate_output_tok_s", aggregate_output_tok_s, "tok/s",
           "sum(completion_tokens) / (last end - first send) per repeat", "per_repeat",
           columns=(Column("aggregate_tok_s_median", "aggregate_output_tok_s", "median_of_repeats"),)),
    Metric("accept_length", accept_length_weighted, "tokens/verify", "sum(completion_tokens) / sum(spec_verify_ct)",
           "run", spec_only=True, required="speculation",
           columns=(Column("accept_length", "accept_length", "value"),)),
    Metric("cycle_time_ms", cycle_time_weighted_ms, "ms", "sum(decode_ms) / sum(spec_verify_ct)", "run",
           spec_only=True, required="speculation", columns=(Column("cycle_time_ms", "cycle_time_ms", "value"),)),
    Metric("decode_rate", decode_rate, "tok/s",
           "geometric mean over launches of each launch's median per-request decode tok/s "
           "((completion_tokens - 1) / decode_s); one launch: that median. The statistic of the verdicts, "
           "and the baseline tok/s of the break-even (cycle time x the baseline's decode rate)", "run",
           columns=(Column("decode_rate", "decode_rate", "value"),)),
    Metric("decode_tok_s_weighted", decode_tok_s_weighted, "tok/s", "sum(completion_tokens - 1) / sum(decode_s)",
           "run", columns=(Column("decode_tok_s_run", "decode_tok_s_weighted", "value"),)),
    Metric("draft_ms_per_cycle", _timing("draft_s"), "ms", "sum(timing.draft_s) / sum(spec_verify_ct) x 1e3", "run",
           spec_only=True, columns=(Column("draft_ms", "draft_ms_per_cycle", "value"),)),
    Metric("verify_ms_per_cycle", _timing("verify_s"), "ms", "sum(timing.verify_s) / sum(spec_verify_ct) x 1e3",
           "run", spec_only=True, columns=(Column("verify_ms", "verify_ms_per_cycle", "value"),)),
    Metric("verify_comm_ms_per_cycle", _timing("verify_comm_s"), "ms",
           "sum(timing.verify_comm_s) / sum(spec_verify_ct) x 1e3", "run", spec_only=True,
           columns=(Column("verify_comm_ms", "verify_comm_ms_per_cycle", "value"),)),
    Metric("verify_compute_ms_per_cycle", verify_compute_per_cycle_ms, "ms",
           "verify_ms_per_cycle - verify_comm_ms_per_cycle", "run", spec_only=True,
           columns=(Column("verify_compute_ms", "verify_compute_ms_per_cycle", "value"),)),
    Metric("verify_comm_share", verify_comm_share, "fraction", "sum(timing.verify_comm_s) / sum(timing.verify_s)",
           "run", spec_only=True, columns=(Column("comm_share", "verify_comm_share", "value"),)),
    Metric("target_forward_ms", target_forward_ms, "ms", "sum(timing.verify_s) / sum(timing.forward_ct) x 1e3",
           "run", columns=(Column("target_forward_ms", "target_forward_ms", "value"),)),
    Metric("target_forward_comm_ms", target_forward_comm_ms, "ms",
           "sum(timing.verify_comm_s) / sum(timing.forward_ct) x 1e3", "run",
           columns=(Column("target_forward_comm_ms", "target_forward_comm_ms", "value"),)),
    Metric("allreduce_per_forward", allreduce_per_forward, "count",
           "sum(timing.allreduce_ct) / sum(timing.forward_ct)", "run", spec_only=True,
           columns=(Column("allreduce_per_forward", "allreduce_per_forward", "value"),)),
    Metric("prompt_tokens", prompt_tokens, "tokens", "server-reported prompt_tokens per request", "per_request",
           columns=(Column("prompt_tokens_p50", "prompt_tokens", "p50"),)),
    Metric("accept_histogram", accept_histogram, "verify steps",
           "h[j] = verify steps that accepted exactly j draft tokens (bonus excluded), "
           "sum over requests of spec_correct_drafts_histogram", "run", spec_only=True),
    Metric("accept_rate_by_position", accept_rate_by_position, "fraction",
           "rate[p-1] = sum(h[p:]) / sum(h): share of verify steps that accepted draft position p", "run",
           spec_only=True, columns=(Column("accept_rate_by_position", "accept_rate_by_position", "value"),)),
    Metric("output_match_share", output_match_share, "fraction",
           "#(output_ids == baseline's for the same prompt_key) / #paired requests (greedy decoding)", "paired",
           columns=(Column("output_match_share", "output_match_share", "value"),)),
    Metric("output_common_prefix_tokens", output_common_prefix_tokens, "tokens",
           "mean over paired requests of the common prefix of output_ids and the baseline's", "paired",
           columns=(Column("output_common_prefix", "output_common_prefix_tokens", "value"),)),
    # --- from the profiler trace of the profiling stage (rank 0; target forward = verify, decode without speculation)
    Metric("trace_verify_ms", _trace("span_ms"), "ms",
           "profiler trace, rank 0: mean span of a verify forward (decode forward without speculation); on GPUs "
           "first kernel start to last kernel end, on the CPU its record_function range", "profile",
           columns=(Column("trace_verify_ms", "trace_verify_ms", "value"),)),
    Metric("trace_verify_comm_ms", _trace("comm_ms"), "ms",
           "profiler trace, rank 0: time per verify forward inside communication kernels (union; on the CPU "
           "inside the all-reduce ranges)", "profile",
           columns=(Column("trace_verify_comm_ms", "trace_verify_comm_ms", "value"),)),
    Metric("trace_verify_compute_ms", _trace("compute_ms"), "ms",
           "profiler trace, rank 0: time per verify forward in other GPU work not overlapping communication "
           "(on the CPU: profiled operators outside the all-reduces)", "profile",
           columns=(Column("trace_verify_compute_ms", "trace_verify_compute_ms", "value"),)),
    Metric("trace_verify_idle_ms", _trace("idle_ms"), "ms",
           "profiler trace, rank 0: span - busy per verify forward (GPU idle between kernels; on the CPU host "
           "time between operators)", "profile",
           columns=(Column("trace_verify_idle_ms", "trace_verify_idle_ms", "value"),)),
    Metric("trace_comm_share", _trace("comm_share"), "fraction",
           "profiler trace, rank 0: sum(comm) / sum(span) over verify forwards", "profile",
           columns=(Column("trace_comm_share", "trace_comm_share", "value"),)),
    Metric("trace_allreduce_per_verify", _trace("allreduce_per_forward"), "count",
           "profiler trace, rank 0: all-reduce calls per verify forward", "profile",
           columns=(Column("trace_allreduce_per_verify", "trace_allreduce_per_verify", "value"),)),
    Metric("trace_allreduce_impl", trace_allreduce_impl, "name",
           "profiler trace, rank 0: implementation of the verify forwards' all-reduce calls (kernel names)",
           "profile", columns=(Column("trace_allreduce_impl", "trace_allreduce_impl", "value"),)),
    Metric("trace_rank_skew_ms", trace_rank_skew_ms, "ms",
           "profiler trace, all ranks: wait for the slowest rank per verify forward", "profile",
           columns=(Column("trace_rank_skew_ms", "trace_rank_skew_ms", "value"),)),
    Metric("allreduce_bench_us", allreduce_bench_us, "us",
           "micro-benchmark before launch: median latency of one all-reduce at the verify's message size "
           "(profile.bench.timing: in_forward = between the model's layers, back_to_back = the loop alone)",
           "profile", columns=(Column("allreduce_bench_us", "allreduce_bench_us", "value"),)),
    Metric("allreduce_bench_ms_per_verify", allreduce_bench_ms_per_verify, "ms",
           "allreduce_bench_us x trace_allreduce_per_verify / 1e3", "profile",
           columns=(Column("allreduce_bench_ms_per_verify", "allreduce_bench_ms_per_verify", "value"),)),
    Metric("profile_seconds", profile_seconds, "s",
           "wall time of the profiling stage (start_profile .. all traces written)", "profile",
           columns=(Column("profile_seconds", "profile_seconds", "value"),)),
)

#: Every metric column of the report and CSV, in table order.
METRIC_COLUMNS: tuple[Column, ...] = tuple(c for m in METRICS.values() for c in m.columns)
#: The metric of the primary verdict (speculation and communication change decode, not prefill).
PRIMARY_VERDICT = "decode_tok_s"
#: Metrics with a verdict against the baseline, the primary first: (metric, label, lower_is_better).
VERDICT_METRICS: tuple[tuple[str, str, bool], ...] = tuple(sorted(
    ((m.name, m.verdict, m.lower_is_better) for m in METRICS.values() if m.verdict),
    key=lambda v: v[0] != PRIMARY_VERDICT))
#: The one "baseline tok/s": the baseline's ``decode_rate`` (break-even, pays?, every plot, the report).
BASELINE_TOK_S = "decode_rate"
#: Metrics that exist only under speculation (not listed as absent for a non-speculative config).
SPEC_ONLY_METRICS = frozenset(m.name for m in METRICS.values() if m.spec_only)


def required_metrics(speculative: bool) -> list[str]:
    """Metrics whose absence fails the configuration (``missing_metric``)."""
    return [m.name for m in METRICS.values()
            if m.required == "always" or (m.required == "speculation" and speculative)]
