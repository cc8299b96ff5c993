"""The report's rows: one per configuration and workload point, with its verdicts and break-even.

The break-even accept length of a configuration is its cycle time x the
baseline's decode rate; speculation pays only when
``accept_length > cycle_time_s x baseline_tok_s``. Baseline tok/s is one
number everywhere (break-even, pays?, every plot, the report text): the
baseline's ``decode_rate`` (``metrics.BASELINE_TOK_S``: TTFT excluded, because
the cycle time counts decode only), the statistic the verdicts compare.

Verdicts: the primary one on the decode rate (``metrics.PRIMARY_VERDICT``),
the end-to-end tok/s and TTFT each judged on their own
(``metrics.VERDICT_METRICS``), all by ``blocks.contrast``: the model with the
round as a block over every configuration at the point (``blocks.fit_point``;
the one-way ``stats.pooled_noise`` / ``stats.compare`` where rounds cannot be
told apart). Each row carries its point's fits (``row["blocks"]``) and the
trend check of the primary one (``row["trend"]``, ``row["cold_start"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.blocks import BLOCKED_METHOD, cold_start, contrast, fit_point, trend
from specsweep.analysis.formulas import break_even_accept_length
from specsweep.analysis.launches import aa_control, point_sample
from specsweep.analysis.metrics import BASELINE_TOK_S, METRIC_COLUMNS, PRIMARY_VERDICT, VERDICT_METRICS, column_value
from specsweep.analysis.stats import Noise, Sample, compare, estimate_interval, launches_needed
from specsweep.contracts.summary import ConfigSummary
from specsweep.contracts.vocabulary import Expect, Status, Verdict
from specsweep.files import canonical_json
from specsweep.records import DEFAULT_POINT

#: When speculation pays (every report states it).
BREAK_EVEN_FORMULA = "accept_length > cycle_time_s x baseline_tok_s"
#: Statuses whose measurements enter the verdicts (and the pooled launch variance).
COMPARED = ("ok", "fallback")
#: CSV prefix of each secondary verdict (after the primary one, which has the plain names).
SECONDARY = tuple((metric, label, lower, label.lower().replace("-", "_")) for metric, label, lower
                  in VERDICT_METRICS if metric != PRIMARY_VERDICT)


def row_label(row: Mapping[str, Any]) -> str:
    """``config`` or ``config @ point`` (a configuration with several points)."""
    return row["config"] if row["point"] == "default" else f"{row['config']} @ {row['point']}"


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    """Flatten one point summary into the values the table, CSV and plots show (None = absent).

    Keys are the CSV column names (``CSV_COLUMNS``) plus what the markdown and
    plots need beside them (samples and their launches, log tail, warnings,
    absent reasons, the plan and workload of the point).
    """
    m = summary.get("metrics") or {}
    counts = m.get("counts") or {}
    plan = summary.get("plan") or {}
    workload = summary.get("workload") or plan.get("workload") or {}
    samples = (m.get("samples") or {})
    tok_sample = samples.get("output_tok_s") or {}
    verdict_samples = {metric: point_sample(summary, metric) for metric, _, _ in VERDICT_METRICS}
    launch_entries = summary.get("launches") or []
    row: dict[str, Any] = {
        "config": summary["config"],
        "point": summary.get("point", DEFAULT_POINT),
        "point_index": summary.get("point_index", 0),
        "concurrency": workload.get("concurrency"),
        "launches": len(launch_entries) or 1,
        "launch_entries": launch_entries,
        "plan": plan,
        "server": summary.get("server"),  # an external server's own account (summary.external_server)
        "workload": workload,
        "sample_launches": tok_sample.get("launch"),
        "summary": summary,
        "verdict_samples": verdict_samples,
        "description": summary.get("description", ""),
        "status": summary["status"],
        # `expect: failure` marks a known-failing case kept as a result (e.g. bare NCCL_ALGO=Tree); a label,
        # not in the plan nor the summary: explode_points sets it from the report params.
        "expect": summary.get("expect", "ok"),
        "stage": summary.get("stage"),
        "reason": summary.get("reason"),
        "n_ok": counts.get("ok"),
        "n_error": counts.get("error"),
        "n_incomplete": counts.get("incomplete"),
        "detail": summary.get("detail"),
        "log_tail": summary.get("log_tail"),
        "warnings": summary.get("warnings") or [],
        "spec": summary.get("speculative_algorithm"),
        "samples": ((m.get("samples") or {}).get("output_tok_s") or {}).get("values") or [],
        "repeat_medians": (m.get("output_tok_s") or {}).get("per_repeat_median") or [],
        "warmup_converged": (summary.get("warmup") or {}).get("converged"),
        "absent": m.get("absent") or {},
        "seed": ((summary.get("plan") or {}).get("workload") or {}).get("seed", 0),
        "profile": summary.get("profile"),
        "expected_failure": summary.get("expected_failure"),
    }
    for column in METRIC_COLUMNS:
        row[column.name] = column_value(m, column)
    row["label"] = row_label(row)
    agreement = summary.get("agreement") or {}
    row["agreement"] = agreement
    row["outputs_differ"] = bool(agreement.get("flagged"))
    row["accept_histogram"] = (m.get("accept_histogram") or {}).get("value")
    row["accept_rates"] = row["accept_rate_by_position"]
    if isinstance(row["accept_rates"], list):  # one CSV cell: the rates of positions 1, 2, ... separated by spaces
        row["accept_rate_by_position"] = " ".join(f"{v:.4f}" for v in row["accept_rates"])
    return row


def _point_key(r: dict[str, Any]) -> str:
    return canonical_json(r["workload"])


def config_rows(
    summaries: list[dict[str, Any]], baseline: str | None, smallest_effect: float | None = None,
    rounds: dict[tuple[str, str], int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One row per configuration (sorted by name, baseline first) with verdicts and break-even.

    Returns ``(rows, baseline_row)``; ``baseline_row`` is None when no baseline
    is named or it is not among the summaries. A baseline that did not end
    ``ok`` gives no verdicts and no break-even (``no baseline``). Every row
    carries its point's pooled launch variance per verdict metric
    (``row["noise"]``); ``smallest_effect``: the difference the user wants
    resolved, for the launches each row would need (``launches_needed``); ``rounds``: the round of each
    (configuration, launch id) where the rounds' plans say it (``blocks.rounds_of_plans``), for a launch
    entry without its own ``round``.
    """
    rows = sorted((_row(s) for s in summaries),
                  key=lambda r: (r["config"] != baseline, r["config"], r["point_index"], r["point"]))
    base_rows = {_point_key(r): r for r in rows if r["config"] == baseline}
    base = next((r for r in rows if r["config"] == baseline), None)
    by_point: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_point.setdefault(_point_key(r), []).append(r)
    for members in by_point.values():
        compared = [r for r in members if r["status"] in COMPARED]
        fits = {metric: fit_point({r["config"]: r["verdict_samples"][metric] for r in compared
                                   if r["verdict_samples"][metric] is not None},
                                  {r["config"]: _with_rounds(r, rounds or {}) for r in compared})
                for metric, _, _ in VERDICT_METRICS}
        noise = {metric: f.noise for metric, f in fits.items()}
        drift, cold = trend(fits[PRIMARY_VERDICT]), cold_start(fits[PRIMARY_VERDICT])
        for r in members:
            r["noise"], r["blocks"], r["trend"], r["cold_start"] = noise, fits, drift, cold
    for b in base_rows.values():
        b["aa"] = (aa_control(b["summary"], b["noise"][PRIMARY_VERDICT], fit=b["blocks"][PRIMARY_VERDICT])
                   if b["status"] == Status.OK else None)
    for r in rows:
        point_base = base_rows.get(_point_key(r))
        base_ok = point_base is not None and point_base["status"] == Status.OK
        r["base_row"] = point_base
        r["comparisons"] = {}
        if r["config"] == baseline:
            r["verdict"] = "baseline"
        elif r["status"] in (Status.FAILED, Status.CONTAMINATED):
            r["verdict"] = r["status"]  # a contaminated number is never compared
        elif base is not None and point_base is None:
            r["verdict"] = Verdict.NO_BASELINE_AT_POINT
        elif not base_ok:
            r["verdict"] = Verdict.NO_BASELINE
        else:
            r["comparisons"] = {metric: compare_rows(r, point_base, metric) for metric, _, _ in VERDICT_METRICS}
            r["verdict"] = r["comparisons"][PRIMARY_VERDICT]["verdict"]
        r["comparison"] = r["comparisons"].get(PRIMARY_VERDICT)
        v = r["comparison"] or {}
        r["ratio"] = v.get("ratio")
        r["ratio_ci_low"], r["ratio_ci_high"] = v.get("ratio_ci") or [None, None]
        r["threshold"], r["p_value"], r["detectable"] = v.get("threshold"), v.get("p_value"), v.get("detectable")
        noise = r["noise"][PRIMARY_VERDICT]
        r["launch_sd"], r["launch_df"] = noise.sd, noise.df
        r["launches_needed"] = (launches_needed(noise, smallest_effect)
                                if smallest_effect and v.get("detectable") is not None
                                and v["detectable"] > smallest_effect else None)
        r["decode_rate_ci_low"], r["decode_rate_ci_high"] = rate_interval(r, noise)
        for metric, _, _, prefix in SECONDARY:
            c = r["comparisons"].get(metric) or {}
            r[f"{prefix}_verdict"] = (c.get("verdict") if c
                                      else (r["verdict"] if r["verdict"] == Verdict.BASELINE else None))
            r[f"{prefix}_ratio"], r[f"{prefix}_threshold"] = c.get("ratio"), c.get("threshold")
        r["devices"], r["device_kind"] = devices_of(r["plan"], r.get("server"))
        r["tok_s_per_gpu"] = per_device(r["aggregate_tok_s_median"], r["devices"])
        r["baseline_tok_s"] = point_base[BASELINE_TOK_S] if base_ok else None
        r["baseline_tok_s_per_gpu"] = (per_device(point_base["aggregate_tok_s_median"],
                                                  devices_of(point_base["plan"], point_base.get("server"))[0])
                                       if base_ok else None)
        r["break_even_accept_length"], r["speculation_pays"] = None, None
        if r["config"] == baseline and r["spec"]:  # an external server's own word; a launched one is refused
            r["break_even_why"] = "the baseline itself runs speculation"
        elif r["cycle_time_ms"] is None:
            r["break_even_why"] = "no cycle time" + (" (no speculation)" if not r["spec"] else "")
        elif r["baseline_tok_s"] is None:
            r["break_even_why"] = "no baseline decode rate" + (" at this point" if point_base is None else "")
        else:
            r["break_even_accept_length"] = break_even_accept_length(r["cycle_time_ms"], r["baseline_tok_s"])
            if r["accept_length"] is not None:
                r["speculation_pays"] = r["accept_length"] > r["break_even_accept_length"]
    return rows, base


def _with_rounds(r: dict[str, Any], rounds: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """The row's launch entries, each with its round from ``rounds`` where the entry has none."""
    return [e if e.get("round") is not None else dict(e, round=rounds.get((r["config"], str(e["launch"]))))
            for e in r["launch_entries"]]


def compare_rows(r: dict[str, Any], other: dict[str, Any], metric: str = PRIMARY_VERDICT) -> dict[str, Any]:
    """The verdict of two rows at one point on ``metric`` (default the primary verdict's): ``blocks.contrast``
    under the point's model (``row["blocks"]``); a row outside it (not ``COMPARED``) by ``stats.compare``
    under the point's variance (``row["noise"]``)."""
    lower = next(lower for name, _, lower in VERDICT_METRICS if name == metric)
    a, b = r["verdict_samples"].get(metric), other["verdict_samples"].get(metric)
    if a is None or b is None:
        return {"verdict": Verdict.INSUFFICIENT, "method": BLOCKED_METHOD,
                "note": f"no {metric} samples on {'this side' if a is None else 'the other side'}"}
    fit = (r.get("blocks") or {}).get(metric)
    if fit is None or r["config"] not in fit.sides or other["config"] not in fit.sides:
        return compare(a, b, r["noise"][metric], lower_is_better=lower)
    return contrast(fit, r["config"], other["config"], lower_is_better=lower)


def rate_interval(r: dict[str, Any], noise: Noise) -> tuple[float | None, float | None]:
    """The row's decode rate with its 95 % interval under the pooled launch variance
    (``stats.estimate_interval``)."""
    sample: Sample | None = r["verdict_samples"].get(PRIMARY_VERDICT)
    rate = r.get(BASELINE_TOK_S)
    if sample is None or rate is None or noise.var is None:
        return None, None
    got = estimate_interval(rate, len(sample.groups(by_repeat=noise.unit == "round")), noise)
    return got if got is not None else (None, None)


def compare_primary(r: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The primary verdict of row ``r`` against ``other`` (as against the baseline), for ``analysis.answer``."""
    return compare_rows(r, other, PRIMARY_VERDICT)


def devices_of(plan: dict[str, Any], server: dict[str, Any] | None = None) -> tuple[int, str]:
    """What tok/s per GPU divides by: the plan's GPUs, or on a CPU run (gpus 0) its TP ranks; for an
    external server (``server``: what its /server_info said) its TP size."""
    if server is not None:
        return int(server.get("tp_size") or 1), "tp rank"
    gpus = int(plan.get("gpus") or 0)
    if gpus > 0:
        return gpus, "gpu"
    return int((plan.get("facts") or {}).get("tp_size") or 1), "cpu rank"


def per_device(aggregate_tok_s: float | None, devices: int) -> float | None:
    """tok/s per GPU (per device): aggregate output tok/s (median over repeats) / devices."""
    return None if aggregate_tok_s is None else aggregate_tok_s / devices


def explode_points(summaries: Sequence[ConfigSummary], descriptions: Mapping[str, str] | None = None,
                   expects: Mapping[str, str] | None = None) -> list[dict]:
    """What the rows are made from: each point of every summary as a mapping (``PointSummary.to_dict``), its
    launches joined with the configuration's launch sections (each launch's start, for the model's blocks),
    with the configuration's ``description`` and ``expect`` label (the report's params: they are not in the
    summary) and the point's index."""
    out = []
    for summary in summaries:
        sections = {e.launch: e.to_dict() for e in summary.launches}
        for index, point in enumerate(summary.points):
            row = point.to_dict()
            row["launches"] = [{**sections.get(e["launch"], {}), **e} for e in row["launches"]]
            row["description"] = (descriptions or {}).get(summary.config, "")
            row["expect"] = (expects or {}).get(summary.config, Expect.OK)
            row["point_index"] = index
            out.append(row)
    return out
