"""All metrics of the table (``analysis.metrics.METRICS``) for one run or for the pooled launches of one
configuration at one point: which records enter, and each metric computed by its kind."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from specsweep.analysis.formulas import Absent, Value, aggregate_output_tok_s
from specsweep.analysis.metrics import METRICS
from specsweep.analysis.stats import (
    PERCENTILE_METHOD_NAME,
    bootstrap_median_ci,
    distribution,
    per_repeat_medians,
)
from specsweep.contracts.vocabulary import RequestStatus


def select_measured(records: Iterable[dict[str, Any]], run_id: str | Sequence[str] | None = None) -> dict[str, Any]:
    """Split records into those that enter the metrics and counts of the rest.

    Enter: ``phase == "measured"``, ``status == "ok"``, and ``run_id`` equal to
    the run being summarised (default: the run of the last measured record,
    i.e. the run that wrote the file), or one of several runs (a list: the
    launches of one configuration pooled). Requests of other runs (e.g. sent
    before this run) and warmup requests never enter.
    """
    records = list(records)
    measured = [r for r in records if r.get("phase") == "measured"]
    if run_id is None and measured:
        run_id = measured[-1].get("run_id")
    runs = {run_id} if run_id is None or isinstance(run_id, str) else set(run_id)
    this_run = [r for r in measured if r.get("run_id") in runs]
    counts = {
        "records": len(records),
        "warmup_excluded": sum(r.get("phase") == "warmup" for r in records),
        "other_run_excluded": len(measured) - len(this_run),
        "measured": len(this_run),
        "ok": sum(r["status"] == RequestStatus.OK for r in this_run),
        "error": sum(r["status"] == RequestStatus.ERROR for r in this_run),
        "incomplete": sum(r["status"] == RequestStatus.INCOMPLETE for r in this_run),
    }
    ok = [r for r in this_run if r["status"] == RequestStatus.OK]
    errors = list(dict.fromkeys(r.get("error") or r["status"] for r in this_run if r["status"] != RequestStatus.OK))[:5]
    return {"run_id": run_id, "ok": ok, "counts": counts, "errors": errors}


def _put(metrics: dict[str, Any], absent: dict[str, str], name: str, value: Value) -> None:
    if isinstance(value, Absent):
        absent[name] = value.reason
    else:
        metrics[name] = {"value": value, "unit": METRICS[name].unit, "definition": METRICS[name].definition}


def _values(records: Sequence[dict[str, Any]], fn: Any) -> tuple[list[float], list[int], list[str]]:
    vals, reps, reasons = [], [], []
    for r in records:
        v = fn(r)
        if isinstance(v, Absent):
            reasons.append(v.reason)
        else:
            vals.append(v)
            reps.append(r["repeat"])
    return vals, reps, reasons


def _aggregate_per_repeat(ok: Sequence[dict[str, Any]], repeats: Sequence[int]) -> list[float] | Absent:
    per_repeat: list[float] = []
    for rep in repeats:
        v = aggregate_output_tok_s([r for r in ok if r["repeat"] == rep])
        if isinstance(v, Absent):
            return Absent(f"repeat {rep}: {v.reason}")
        per_repeat.append(v)
    return per_repeat or Absent("no ok measured requests")


def compute_metrics(records: Iterable[dict[str, Any]], seed: int, run_id: str | Sequence[str] | None = None,
                    baseline: Sequence[dict[str, Any]] | Absent | None = None,
                    profile: dict[str, Any] | None = None) -> dict[str, Any]:
    """All metrics of ``METRICS`` for one run, from its raw records (see ``select_measured``)
    and, for kind ``profile``, from the summary's profile section (None: profiling off, not listed).

    Returns ``{"run_id", "counts", "errors", "percentile_method", <metric>:
    {...}, "absent": {metric: reason}, "samples": {...}}``. Distribution
    metrics hold ``n, p50, p90, p99, mean, min, max, unit, definition`` (with
    ``median_ci`` and ``per_repeat_median`` where the table asks for a CI);
    scalar metrics ``value, unit, definition``. ``baseline``: the baseline's
    ok measured records for the paired metrics (output agreement), or why
    there are none (``Absent``; ``None`` = no baseline).
    """
    sel = select_measured(records, run_id)
    ok: list[dict[str, Any]] = sel["ok"]
    m: dict[str, Any] = {
        "run_id": sel["run_id"],
        "counts": sel["counts"],
        "errors": sel["errors"],
        "percentile_method": PERCENTILE_METHOD_NAME,
        "repeats": sorted({r["repeat"] for r in ok}),
    }
    absent: dict[str, str] = {}
    m["counts"]["ok_without_completion_tokens"] = sum(r.get("completion_tokens") is None for r in ok)

    for metric in METRICS.values():
        if metric.kind == "per_request":
            vals, reps, reasons = _values(ok, metric.compute)
            if not vals:
                absent[metric.name] = reasons[0] if reasons else "no ok measured requests"
                continue
            d = distribution(vals, metric.unit)
            d["definition"] = metric.definition
            if reasons:
                d["absent_in"] = {"requests": len(reasons), "first_reason": reasons[0]}
            if metric.ci:
                d["median_ci"] = bootstrap_median_ci(vals, seed)
                d["per_repeat_median"] = per_repeat_medians(vals, reps)
                m.setdefault("samples", {})[metric.name] = {"values": vals, "repeat": reps}
            m[metric.name] = d
        elif metric.kind == "pooled":
            gaps = [g for r in ok for g in metric.compute(r)]
            if gaps:
                m[metric.name] = distribution(gaps, metric.unit) | {"definition": metric.definition}
            else:
                absent[metric.name] = "no request had two token chunks"
        elif metric.kind == "profile":
            if profile is not None:
                _put(m, absent, metric.name, metric.compute(profile))
        elif metric.kind == "per_repeat":
            per_repeat = _aggregate_per_repeat(ok, m["repeats"])
            if isinstance(per_repeat, Absent):
                absent[metric.name] = per_repeat.reason
            else:
                m[metric.name] = {"per_repeat": per_repeat, "unit": metric.unit, "definition": metric.definition}
        elif metric.kind == "paired":
            if baseline is None or isinstance(baseline, Absent):
                absent[metric.name] = baseline.reason if baseline is not None else "no baseline to compare with"
                continue
            got = metric.compute(ok, baseline)
            if isinstance(got, Absent):
                absent[metric.name] = got.reason
            else:
                m[metric.name] = {**got, "unit": metric.unit, "definition": metric.definition}
        else:
            _put(m, absent, metric.name, metric.compute(ok))
    m["absent"] = absent
    return m
