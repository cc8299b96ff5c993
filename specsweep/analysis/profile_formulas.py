"""The profile-kind metrics (``analysis.metrics.METRICS``, ``kind="profile"``), one small function each.

Computed from the summary's ``profile`` section (``analysis.profiling.profile_section``), not from
records: the profiling stage's trace of a few requests after the measured repeats, and the
micro-benchmark. Never listed as absent for a configuration with profiling off; absent
(``formulas.Absent``) with the stage's reason when it was on and gave nothing.
"""

from __future__ import annotations

from typing import Any

from specsweep.analysis.formulas import Absent, Value


def profile_target(section: dict[str, Any], key: str) -> Value:
    """One field of the profile section's target forward (``target``), or why the trace gives none."""
    if "absent" in section:
        return Absent(section["absent"])
    target = section.get("target")
    if target is None:
        return Absent("the trace has no verify or decode forward")
    value = target.get(key)
    return Absent(f"trace gives no {key}") if value is None else value


def trace_allreduce_impl(section: dict[str, Any]) -> Value | str:
    """All-reduce implementation(s) of the target forward's calls in the trace, by call count: ``nccl``,
    ``custom_allreduce``, ... (several joined with ``+``, most calls first; ``none`` = no all-reduce ran)."""
    if "absent" in section:
        return Absent(section["absent"])
    target = section.get("target")
    if target is None:
        return Absent("the trace has no verify or decode forward")
    return "+".join(target.get("allreduce_impl") or {}) or "none"


def trace_rank_skew_ms(section: dict[str, Any]) -> Value:
    """Wait for the slowest rank per target forward, ms: mean over ranks and matched forwards of
    ``sum over calls (latest start of the call on any rank - this rank's start)`` (``analysis.trace.rank_skew``)."""
    if "absent" in section:
        return Absent(section["absent"])
    skew = section.get("rank_skew") or {}
    return Absent(skew["absent"]) if "absent" in skew else skew["wait_ms_per_forward"]


def allreduce_bench_us(section: dict[str, Any]) -> Value:
    """Micro-benchmark median latency of one all-reduce at the verify's message size, us (rank 0's clock), as its
    ``timing`` says: between the model's layers (in_forward) or back to back (``serve/allreduce_bench.py``)."""
    bench = section.get("bench") or {}
    return Absent(bench["absent"]) if "absent" in bench else bench["median_us"]


def allreduce_bench_ms_per_verify(section: dict[str, Any]) -> Value:
    """Micro-benchmark latency x the trace's all-reduces per target forward, ms: the loop's prediction of the
    communication time of one verify, beside ``trace_verify_comm_ms``."""
    bench = section.get("bench") or {}
    if "absent" in bench:
        return Absent(bench["absent"])
    if "ms_per_forward" not in bench:
        return Absent(section.get("absent") or "no all-reduce count from the trace")
    return bench["ms_per_forward"]


def profile_seconds(section: dict[str, Any]) -> Value:
    """Wall time of the profiling stage (start_profile to every trace written), s; the micro-benchmark's own
    time is ``profile.bench.seconds``."""
    seconds = section.get("seconds")
    return Absent(f"profiling stage {section.get('status')}") if seconds is None else seconds
