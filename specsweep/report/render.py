"""The cross-configuration report: results/summary.csv, results/report.md, plots.

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

import csv
import io
import os
from pathlib import Path
from typing import Any

from specsweep.analysis.blocks import (
    BLOCKED_METHOD,
    TREND_METHOD,
    cold_start,
    contrast,
    fit_point,
    rounds_of_plans,
    trend,
)
from specsweep.analysis.formulas import NOT_COMPARABLE, break_even_accept_length
from specsweep.analysis.launches import aa_control, point_sample, point_summaries
from specsweep.analysis.metrics import (
    BASELINE_TOK_S,
    METRIC_COLUMNS,
    METRICS,
    PRIMARY_VERDICT,
    SPEC_ONLY_METRICS,
    VERDICT_METRICS,
    column_value,
)
from specsweep.analysis.profiling import COMM_SHARE_TOLERANCE
from specsweep.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    CI_LEVEL,
    CI_METHOD,
    PERCENTILE_METHOD_NAME,
    POWER_METHOD,
    Noise,
    Sample,
    compare,
    estimate_interval,
    launches_needed,
)
from specsweep.contracts.acceptance import SIMULATE_ACC_LEN
from specsweep.contracts.vocabulary import COMPARED, Expect, Status, Verdict
from specsweep.files import canonical_json, write_text_atomic
from specsweep.records import DEFAULT_POINT
from specsweep.report.answer import (
    ANSWER_COLUMNS,
    annotate,
    backend_section,
    best_lines,
    budget_points,
    budget_section,
    model_section,
    own_baselines,
    verify_sizes,
)
from specsweep.report.export import write_exports
from specsweep.report.markdown import table_head, table_row
from specsweep.report.plots import (
    OUTPUTS_DIFFER,
    plot_accept_length,
    plot_acceptance,
    plot_break_even,
    plot_budget,
    plot_comm_split,
    plot_cycle_time,
    plot_pareto,
    plot_tok_s,
)
from specsweep.report.sweep import (
    best_of_grids,
    best_section,
    break_even_groups,
    break_even_table,
    concurrency_table,
    control_lines,
    design_lines,
    external_lines,
    launch_lines,
    launch_table,
    methods_lines,
    pairwise_section,
    row_label,
    warning_lines,
)

#: File names under ``plots_dir`` (the Snakefile declares these).
PLOT_FILES = {"tok_s": "tok_s.png", "cycle_time": "cycle_time.png", "accept_length": "accept_length.png",
              "break_even": "break_even.png", "pareto": "pareto.png", "acceptance": "acceptance.png",
              "comm_split": "comm_split.png", "budget": "budget.png"}

FORMULA = "accept_length > cycle_time_s x baseline_tok_s"

#: The output-agreement metrics (their absence is explained in their own section).
PAIRED_METRICS = frozenset(name for name, m in METRICS.items() if m.kind == "paired")
#: Columns that describe a configuration and its outcome (before the metric columns).
ID_COLUMNS = ("config", "point", "concurrency", "launches", "description", "status", "expect", "stage", "reason",
              "n_ok", "n_error", "n_incomplete")
#: Columns of the comparison with the baseline (after the metric columns); the
#: baseline is the baseline's row at the same workload point.
#: CSV prefix of each secondary verdict (after the primary one, which has the plain names).
SECONDARY = tuple((metric, label, lower, label.lower().replace("-", "_")) for metric, label, lower
                  in VERDICT_METRICS if metric != PRIMARY_VERDICT)
COMPARISON_COLUMNS = ("verdict", "ratio", "ratio_ci_low", "ratio_ci_high", "threshold", "p_value", "detectable",
                      "launches_needed", "launch_sd", "launch_df", "decode_rate_ci_low", "decode_rate_ci_high",
                      *(f"{prefix}_{k}" for *_, prefix in SECONDARY for k in ("verdict", "ratio", "threshold")),
                      "break_even_accept_length", "speculation_pays", "warmup_converged", "devices",
                      "tok_s_per_gpu", "baseline_tok_s", "baseline_tok_s_per_gpu")
#: summary.csv: one row per configuration; metric columns come from ``metrics.METRICS``.
CSV_COLUMNS = (*ID_COLUMNS, *(c.name for c in METRIC_COLUMNS), *COMPARISON_COLUMNS, *ANSWER_COLUMNS)


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
        # not in the plan: render_report_files sets it from the report params.
        "expect": summary.get("expect", Expect.OK),
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


def agreement_cell(r: dict[str, Any]) -> str:
    """The 'outputs vs baseline' cell: the match share, or why there is none."""
    a = r.get("agreement") or {}
    if r["verdict"] == Verdict.BASELINE:
        return Verdict.BASELINE
    if a.get("match_share") is not None:
        prefix = r.get("output_common_prefix")
        text = f"{a['match_share']:.0%} ({a['matching']}/{a['paired']})"
        if prefix is not None:
            text += f", prefix {prefix:.1f}"
        return f"**{OUTPUTS_DIFFER}**: {text}" if a.get("flagged") else text
    reason = a.get("reason") or r["absent"].get("output_match_share") or "n/a"
    if reason.startswith(NOT_COMPARABLE):
        return "not comparable (" + ("simulated acceptance" if "simulated" in reason else "sampling") + ")"
    return "n/a"


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
            r["verdict"] = Verdict.BASELINE
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
        if r["cycle_time_ms"] is None:
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
    """The primary verdict of row ``r`` against ``other`` (as against the baseline), for ``report.answer``."""
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


def _expected_failure_note(r: dict[str, Any]) -> str:
    """A known-failing case is expected only when its own failure signature matched (summary ``expected_failure``)."""
    ef = r.get("expected_failure")
    if r["expect"] != Expect.FAILURE or r["status"] != Status.FAILED or ef is None:
        return ""
    if ef.get("expected"):
        return f" (expected: the known failure, {ef['matched'][0]['signature']} in the log)"
    seen = ", ".join(f["signature"] for f in ef.get("seen") or []) or "none of the known failure lines"
    return (f" (SURPRISE failure: known-failing case, but its own signature ({', '.join(ef.get('wanted') or [])}) "
            f"is not in the log; seen: {seen})")


def _f(v: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f} %"


def comparison_text(v: dict[str, Any] | None, smallest_effect: float | None = None) -> str:
    """A verdict with the interval and the threshold it was judged by: ``faster (x1.595 [1.514, 1.682], +-5.3 %)``;
    a difference not called that the design could not have seen says what would (``smallest_effect``)."""
    if not v:
        return "n/a"
    if "ratio" not in v:
        return v["verdict"] + (f" ({v['note']})" if v.get("note") else "")
    lo, hi = v["ratio_ci"]
    text = f"{v['verdict']} (x{v['ratio']:.3f} [{lo:.3f}, {hi:.3f}], called beyond +-{v['threshold'] * 100:.1f} %"
    if v.get("family"):
        text += f", Holm over {v['family']}"
    text += ")"
    if v["verdict"] == Verdict.NO_DIFFERENCE and v.get("detectable") is not None:
        text += f"; sees >= {_pct(v['detectable'])} (80 % power)"
    return text


def _verdict_cell(r: dict[str, Any], smallest_effect: float | None = None) -> str:
    v = r.get("comparison")
    if v is None or "ratio" not in v:
        return r["verdict"] if v is None else comparison_text(v)
    text = comparison_text(v)
    if r.get("launches_needed") is not None and v["verdict"] == Verdict.NO_DIFFERENCE:
        text += f"; {r['launches_needed']} launches each would see {_pct(smallest_effect)}"
    return text


def _secondary_cell(r: dict[str, Any], metric: str, value: str) -> str:
    v = r["comparisons"].get(metric)
    if r["verdict"] == Verdict.BASELINE or v is None or "ratio" not in v:
        return value
    return f"{value}: {v['verdict']} (x{v['ratio']:.3f}, +-{v['threshold'] * 100:.1f} %)"


def _markdown(rows: list[dict[str, Any]], base: dict[str, Any] | None, baseline: str | None, plots_rel: str,
              head: str = "", tail: str = "", smallest_effect: float | None = None,
              figures: dict[str, str | None] | None = None) -> str:
    """report.md; ``head`` (A/A lines, launches, the break-even table) goes first, ``tail`` after the results;
    ``figures``: each figure of ``PLOT_FILES`` (by key) with why it was not drawn, None when it was."""
    out = io.StringIO()
    w = out.write
    w("# specsweep report\n\n")
    w(head)
    if base is None:
        w(f"Baseline: **none** ({'not named in config.yaml' if baseline is None else f'{baseline!r} has no summary'}); "
          "no verdicts and no break-even.\n\n")
    else:
        w(f"Baseline: **{base['config']}** (status {base['status']}): baseline tok/s = its decode rate, "
          f"{_f(base[BASELINE_TOK_S])} tok/s (defined under *Methods*); its end-to-end median "
          f"{_f(base['tok_s_median'])} tok/s (TTFT included) is judged on its own.\n\n")
    w("## When speculation pays\n\n")
    w("Single-stream throughput of speculative decoding is `accept_length / cycle_time_s` (a cycle = the draft "
      "steps + one verify), so speculation pays only when\n\n")
    w(f"    {FORMULA}\n\n")
    w("Break-even accept length = cycle time x baseline tok/s (e.g. 0.030 s x 82 tok/s = 2.46). Here cycle time = "
      "decode time / spec_verify_ct measured by the client (decode time = last token chunk - first token chunk; "
      "the first token comes from prefill), and baseline tok/s = the baseline's decode rate (the geometric mean "
      "over its launches of each launch's median per-request decode tok/s), TTFT excluded because the cycle time "
      "counts decode only. The same number is the baseline of the verdicts, of `pays?` and of every plot.\n\n")
    w("## Results\n\n")
    w("The verdict that answers \"does this configuration make decoding faster\" is on the decode rate (per request: "
      "tokens after the first / decode time): speculation and communication change decode, while prefill is the "
      "same work with or without them. End-to-end tok/s and TTFT are judged on their own, each against the "
      "baseline's, by the same method.\n\n")
    secondary = {label: metric for metric, label, _ in VERDICT_METRICS if metric != PRIMARY_VERDICT}
    head = ["config", "status", "decode tok/s [95% CI]", "decode verdict vs baseline (ratio [CI], threshold)",
            "cycle ms", "accept length", "break-even accept", "pays?", "end-to-end tok/s: verdict",
            "TTFT p50 / p99 ms: verdict", "verify ms", "comm share", "ITL p50/p99 ms", "outputs vs baseline",
            "ok/err/inc"]
    w(table_head(head))
    for r in rows:
        tok = _f(r[BASELINE_TOK_S])
        if r[BASELINE_TOK_S] is not None and r["decode_rate_ci_low"] is not None:
            tok += f" [{r['decode_rate_ci_low']:.1f}, {r['decode_rate_ci_high']:.1f}]"
        pays = "n/a" if r["speculation_pays"] is None else ("yes" if r["speculation_pays"] else "no")
        be = (_f(r["break_even_accept_length"], "{:.2f}") if r["break_even_accept_length"] is not None
              else f"n/a ({r['break_even_why']})")
        cells = [
            f"**{row_label(r)}**" if r["config"] == baseline else row_label(r), r["status"], tok,
            _verdict_cell(r, smallest_effect), _f(r["cycle_time_ms"], "{:.2f}"), _f(r["accept_length"], "{:.2f}"),
            be, pays, _secondary_cell(r, secondary.get("end-to-end", ""), _f(r["tok_s_median"])),
            _secondary_cell(r, secondary.get("TTFT", ""), f"{_f(r['ttft_p50_ms'])} / {_f(r['ttft_p99_ms'])}"),
            _f(r["verify_ms"], "{:.2f}"),
            _f(r["comm_share"] and r["comm_share"] * 100, "{:.0f}%") if r["comm_share"] is not None else "n/a",
            f"{_f(r['itl_p50_ms'])} / {_f(r['itl_p99_ms'])}", agreement_cell(r),
            f"{r['n_ok']}/{r['n_error']}/{r['n_incomplete']}",
        ]
        w(table_row(cells))
    w("\n`n/a` = the metric could not be computed (never a zero); reasons under *Absent metrics*. "
      "Only measured requests with status ok enter the metrics; ok/err/inc counts all measured requests. "
      "A configuration with several workload points has a row per point (`config @ point`), compared with the "
      "baseline at the same point. *threshold*: a ratio beyond 1 +- it is called (the half-width of the 95 % "
      "interval); *sees >= X*: the smallest difference this design detects with 80 % power.\n\n")
    w(tail)
    w("## Methods\n\n")
    w(f"- decode tok/s (the primary verdict's statistic and baseline tok/s): {METRICS[BASELINE_TOK_S].definition}; "
      f"per request {METRICS[PRIMARY_VERDICT].definition}.\n")
    w("- end-to-end tok/s: per-request output throughput = completion tokens (server-reported) / end-to-end "
      "latency (TTFT included), the median over all measured requests of all repeats (its CI: "
      f"{CI_METHOD}, {CI_LEVEL:.0%}, {BOOTSTRAP_RESAMPLES} resamples, seeded with the workload seed). At "
      "concurrency > 1 see also `aggregate_tok_s_median` in summary.csv (median over repeats of total tokens / "
      "wall time).\n")
    w(f"- Percentiles: {PERCENTILE_METHOD_NAME}.\n")
    w(f"- Verdict (decode, end-to-end and TTFT alike, each on its own samples): {BLOCKED_METHOD}.\n")
    w(f"- Drift over start time (decode rate): {TREND_METHOD}.\n")
    w(f"- Power: {POWER_METHOD}.\n")
    w("- ITL = gap between consecutive chunks that carried tokens (several tokens per chunk under speculation); "
      "TPOT = decode time / (completion tokens - 1).\n")
    w("- accept length = sum(completion tokens) / sum(spec_verify_ct) over this run's measured requests "
      "(never a server-lifetime counter); verify ms and comm share are engine-reported (`timing`) per cycle.\n")
    w(methods_lines() + "\n")

    _agreement_section(w, rows)
    _acceptance_section(w, rows)
    _profile_markdown(w, rows)
    described = list({r["config"]: r for r in rows if r["description"]}.values())
    if described:
        w("## Configurations\n\n")
        for r in described:
            w(f"- **{r['config']}**: {r['description']}\n")
        w("\n")
    problems = [r for r in rows if r["status"] != Status.OK]
    w("## Failed and fallen-back configurations\n\n")
    if not problems:
        w("None.\n\n")
    for r in problems:
        w(f"### {row_label(r)}: {r['status']}{_expected_failure_note(r)}\n\n")
        w(f"- stage: `{r['stage']}`\n- reason: `{r['reason']}`\n- detail: {r['detail']}\n\n")
        if r["log_tail"]:
            tail = r["log_tail"] if isinstance(r["log_tail"], str) else "\n".join(map(str, r["log_tail"]))
            w("```\n" + tail.rstrip().replace("```", "'''") + "\n```\n\n")
    for r in rows:
        if r["expect"] == Expect.FAILURE and r["status"] != Status.FAILED:
            r["warnings"] = [*r["warnings"],
                             "expected to fail (a known-failing case) but did not: re-check what changed"]
    warned = [r for r in rows if r["warnings"]]
    if warned:
        w("## Warnings\n\n")
        for line in warning_lines(warned):
            w(f"- {line}\n")
        w("\n")
    w("## Absent metrics\n\n")
    any_absent = False
    for r in rows:
        absent = {k: v for k, v in r["absent"].items()
                  if (r["spec"] or k not in SPEC_ONLY_METRICS) and k not in PAIRED_METRICS}
        if r["status"] == Status.FAILED or not absent:
            continue
        any_absent = True
        items = "; ".join(f"{k}: {v}" for k, v in sorted(absent.items()))
        w(f"- {row_label(r)}: {items}\n")
    if not any_absent:
        w("None.\n")
    w("\n(Speculation-only metrics are not listed for configurations without a speculative algorithm; "
      "output agreement has its own section.)\n")
    w("\n## Plots\n\n")
    for key, name in PLOT_FILES.items():
        if (figures or {}).get(key) is None:
            w(f"![{name}]({plots_rel}/{name})\n")
    missing = {PLOT_FILES[k]: why for k, why in (figures or {}).items() if why is not None}
    if missing:
        w("\nNot drawn (nothing to draw, so no file):\n\n")
        for name, why in missing.items():
            w(f"- {name}: {why}\n")
    return out.getvalue()


def _agreement_section(w: Any, rows: list[dict[str, Any]]) -> None:
    threshold = next((r["agreement"].get("threshold") for r in rows if r["agreement"].get("threshold") is not None),
                     None)
    w("## Output agreement with the baseline\n\n")
    w(f"Under greedy decoding neither speculation nor the communication setup may change the output. Each measured "
      f"request is paired with the baseline's request of the same prompt (same endpoint, prompt and output length, "
      f"so the same dataset, seed and lengths); *match* = {METRICS['output_match_share'].definition}; *prefix* = "
      f"{METRICS['output_common_prefix_tokens'].definition}. Below "
      f"{'the threshold' if threshold is None else f'{threshold:.0%}'} a configuration is marked "
      f"**{OUTPUTS_DIFFER}** and failed (reason `outputs_differ`): it may be fast, but it computes something "
      f"else. Simulated acceptance (`{SIMULATE_ACC_LEN}`) and sampling make outputs not comparable.\n\n")
    for r in rows:
        if r.get("verdict") == Verdict.BASELINE:
            continue
        a = r["agreement"]
        if a.get("match_share") is not None:
            flag = f" **{OUTPUTS_DIFFER}**" if a.get("flagged") else ""
            prefix = r.get("output_common_prefix")
            prefix_text = "" if prefix is None else f", mean common prefix {prefix:.1f} tokens"
            extra = f"; {a['unpaired']} requests had no partner" if a.get("unpaired") else ""
            w(f"- {row_label(r)}:{flag} {a['matching']} of {a['paired']} paired requests match "
              f"({a['match_share']:.0%}){prefix_text}{extra}\n")
        else:
            w(f"- {row_label(r)}: {a.get('reason') or r['absent'].get('output_match_share') or 'n/a'}\n")
    w("\n")


def _acceptance_section(w: Any, rows: list[dict[str, Any]]) -> None:
    spec = [r for r in rows if r["spec"] and r["status"] != Status.FAILED or r.get("accept_histogram")]
    if not spec:
        return
    w("## Acceptance per draft position\n\n")
    w(f"Histogram: {METRICS['accept_histogram'].definition}. Rate: {METRICS['accept_rate_by_position'].definition}. "
      "From the engine's per-request `spec_correct_drafts_histogram` (SGLang 0.5.23: `meta_info` on /generate, "
      "`sglext.spec_tokens_details` on the OpenAI endpoints).\n\n")
    w("| config | verify steps | accepted drafts 0, 1, 2, ... (share of verify steps) | rate by position 1, 2, ... |\n")
    w("|---|---|---|---|\n")
    for r in spec:
        h, rates = r.get("accept_histogram"), r.get("accept_rates")
        if h is None:
            why = r["absent"].get("accept_histogram", "n/a")
            w(f"| {row_label(r)} | n/a | n/a ({why}) | n/a |\n")
            continue
        total = sum(h)
        shares = ", ".join(f"{n / total:.0%}" for n in h) if total else "n/a"
        rate_text = ", ".join(f"{v:.2f}" for v in rates) if isinstance(rates, list) else "n/a"
        w(f"| {row_label(r)} | {int(total)} | {shares} | {rate_text} |\n")
    w("\n")


def _profile_markdown(w: Any, rows: list[dict[str, Any]]) -> None:
    """The verify-path profile: the trace's split beside the engine's and the micro-benchmark's prediction."""
    profiled = [r for r in rows if r.get("profile")]
    if not profiled:
        return
    w("## Verify-path profile\n\n")
    w("For configurations with `profile.enabled`: a PyTorch profiler trace of a few requests of the same workload, "
      "taken after the measured repeats (rank 0; verify forwards, decode forwards without speculation), and an "
      "all-reduce micro-benchmark at the verify's message size run before the server started, in the same "
      "environment (the reference engine times it between its model's layers, SGLang in a loop alone). `engine` = "
      "the engine's own timing of the same profiled requests, where it reports one; "
      "`bench x AR` = micro-benchmark latency x all-reduces per verify, its prediction of the verify's "
      "communication time: the gap to the trace's comm ms is what the micro-benchmark does not see (rank skew, "
      "interleaving with compute, for a loop alone). The all-reduce check compares the trace's count per verify "
      "with layers x 2 "
      "(+ SGLang's embedding all-reduce): 122 for Kimi-K2.5's 61 layers.\n\n")
    head = ["config", "stage", "verify ms", "comm ms", "compute ms", "idle ms", "comm share trace / engine",
            "all-reduces / verify (expected)", "implementation", "rank skew ms", "bench us x AR = ms", "profile s"]
    w(table_head(head))
    for r in profiled:
        p = r["profile"]
        agree = p.get("agreement") or {}
        share = _f(r["trace_comm_share"] and r["trace_comm_share"] * 100, "{:.0f}%") \
            if r["trace_comm_share"] is not None else "n/a"
        if agree.get("engine_comm_share") is not None:
            share += f" / {agree['engine_comm_share'] * 100:.0f}%" + ("" if agree["within_tolerance"] else " (!)")
        check = p.get("allreduce_check") or {}
        ar = _f(r["trace_allreduce_per_verify"], "{:.0f}")
        if check.get("expected") is not None:
            ar += f" ({check['expected']}{'' if check.get('matches') else ' (!)'})"
        bench = (p.get("bench") or {})
        bench_cell = (f"{bench['median_us']:.1f} x {r['trace_allreduce_per_verify']:.0f} = "
                      f"{r['allreduce_bench_ms_per_verify']:.2f}"
                      if r["allreduce_bench_ms_per_verify"] is not None else
                      f"n/a ({bench.get('absent', 'no count')})")
        stage = p.get("status") if "absent" not in p else f"{p.get('status')}: {p['absent']}"
        cells = [r["config"], stage, _f(r["trace_verify_ms"], "{:.2f}"), _f(r["trace_verify_comm_ms"], "{:.2f}"),
                 _f(r["trace_verify_compute_ms"], "{:.2f}"), _f(r["trace_verify_idle_ms"], "{:.2f}"), share, ar,
                 r["trace_allreduce_impl"] or "n/a", _f(r["trace_rank_skew_ms"], "{:.2f}"), bench_cell,
                 _f(r["profile_seconds"], "{:.1f}")]
        w(table_row(cells))
    w("\n(!) = outside the stated tolerance (comm share: +-"
      f"{COMM_SHARE_TOLERANCE:.2f} absolute), or a count other than expected; see the configuration's warnings. "
      "The trace's ms include the profiler's own overhead (on the CPU every operator is recorded), so compare "
      "shares, and the trace with the engine for the same profiled requests.\n\n")


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    wr = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    wr.writeheader()
    for r in rows:
        wr.writerow(r)
    # csv writes None as an empty cell: absent stays absent, never 0.
    return out.getvalue()


def explode_points(summaries: list[dict]) -> list[dict]:
    """Point summaries of every summary file (format 2: one per point; format 1: the file itself),
    each with its configuration's name, description and the point's index."""
    out = []
    for summary in summaries:
        for index, point in enumerate(point_summaries(summary)):
            point.setdefault("config", summary["config"])
            # each launch's start (and round) from the configuration's launch sections, for the model's blocks
            sections = {str(e["launch"]): e for e in summary.get("launches") or []}
            point["launches"] = [{**sections.get(str(e["launch"]), {}), **e} for e in point.get("launches") or []]
            point["description"] = summary.get("description", point.get("description", ""))
            point["point_index"] = index
            out.append(point)
    return out


def render_report(summaries: list[dict], baseline: str | None, csv_path: Path, md_path: Path, plots_dir: Path,
                  sweep: dict[str, Any] | None = None, best_dir: Path | None = None) -> None:
    """Write summary.csv, report.md, the PNGs named in ``PLOT_FILES`` that have data under ``plots_dir`` and,
    for every grid of ``sweep["grids"]``, its best-configuration files under ``best_dir``.

    ``summaries`` are summary.json files (formats 1 to 8); ``sweep`` holds the
    grids, the planned launch order, the positive control and the smallest
    effect to resolve (``workflow.inputs.report_params``).
    """
    sweep = sweep or {}
    grids = sweep.get("grids") or {}
    effect = sweep.get("smallest_effect")
    rows, base = config_rows(explode_points(summaries), baseline, effect,
                             rounds_of_plans((sweep.get("rounds") or {}).get("plans") or []))
    annotate(rows, base, own_baselines({r["config"]: r["plan"] for r in rows}, sweep.get("own_baselines")),
             compare_primary)
    write_text_atomic(csv_path, _csv(rows))
    plots_dir = Path(plots_dir)
    plots_rel = Path(os.path.relpath(plots_dir, Path(md_path).parent)).as_posix()
    groups = break_even_groups(rows, grids)
    winners = best_of_grids(rows, grids, compare_rows)
    files = write_exports(winners, best_dir, verify_sizes(rows)) if best_dir is not None else {}
    if best_dir is not None:
        rel = Path(os.path.relpath(best_dir, Path(md_path).parent)).as_posix()
        files = {g: {k: f"{rel}/{Path(v).name}" for k, v in f.items()} for g, f in files.items()}
    budget = budget_points(rows)
    head = (best_lines(rows, base, baseline, compare_primary)
            + control_lines(rows, baseline, bool(sweep.get("aa_control", True)), sweep.get("positive_control"), effect,
                            compare_rows)
            + design_lines(sweep.get("design"), sweep.get("rounds"))
            + external_lines(rows) + launch_lines(summaries, sweep.get("launch_order")) + break_even_table(groups))
    tail = (backend_section(rows, baseline) + model_section(rows)
            + budget_section(budget, f"{plots_rel}/{PLOT_FILES['budget']}") + concurrency_table(rows)
            + best_section(winners, files) + pairwise_section(rows, baseline, compare_rows)
            + launch_table(summaries, sweep.get("rounds")))
    base_for_plots = base if base is not None and base["status"] == Status.OK else None
    plots_dir.mkdir(parents=True, exist_ok=True)  # the rule's output, even when no figure has data
    figures = {
        "tok_s": plot_tok_s(rows, base_for_plots, plots_dir / PLOT_FILES["tok_s"]),
        "cycle_time": plot_cycle_time(rows, plots_dir / PLOT_FILES["cycle_time"]),
        "accept_length": plot_accept_length(rows, base_for_plots, plots_dir / PLOT_FILES["accept_length"]),
        "break_even": plot_break_even(groups, plots_dir / PLOT_FILES["break_even"]),
        "pareto": plot_pareto(rows, baseline, plots_dir / PLOT_FILES["pareto"]),
        "acceptance": plot_acceptance(rows, plots_dir / PLOT_FILES["acceptance"]),
        "comm_split": plot_comm_split(rows, plots_dir / PLOT_FILES["comm_split"]),
        "budget": plot_budget(budget, plots_dir / PLOT_FILES["budget"]),
    }
    write_text_atomic(md_path, _markdown(rows, base, baseline, plots_rel, head, tail, effect, figures))
