"""The cross-configuration report: results/summary.csv, results/report.md, plots.

The break-even accept length of a configuration is its cycle time x the
baseline's decode rate; speculation pays only when
``accept_length > cycle_time_s x baseline_tok_s``. The baseline's decode
rate (1 / TPOT, TTFT excluded) is used because the cycle time counts decode
only (``metrics.cycle_time_weighted_ms``).
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from pathlib import Path
from typing import Any

from specsweep.metrics import break_even_accept_length
from specsweep.plots import plot_accept_length, plot_cycle_time, plot_tok_s
from specsweep.io import write_text_atomic
from specsweep.stats import (
    BOOTSTRAP_RESAMPLES,
    CI_LEVEL,
    CI_METHOD,
    PERCENTILE_METHOD_NAME,
    VERDICT_METHOD,
    compare_to_baseline,
)

#: File names under ``plots_dir`` (the Snakefile declares these).
PLOT_FILES = {"tok_s": "tok_s.png", "cycle_time": "cycle_time.png", "accept_length": "accept_length.png"}

FORMULA = "accept_length > cycle_time_s x baseline_tok_s"

#: Metrics that exist only under speculation (not listed as absent for a non-speculative config).
SPEC_ONLY_METRICS = frozenset({
    "accept_length", "accept_length_per_request", "cycle_time_ms", "cycle_time_ms_per_request",
    "draft_ms_per_cycle", "verify_ms_per_cycle", "verify_comm_ms_per_cycle", "verify_compute_ms_per_cycle",
    "verify_comm_share", "allreduce_per_forward",
})

CSV_COLUMNS = (
    "config", "description", "status", "expect", "stage", "reason", "n_ok", "n_error", "n_incomplete",
    "tok_s_median", "tok_s_ci_low", "tok_s_ci_high", "decode_tok_s_median", "decode_tok_s_run", "aggregate_tok_s_median",
    "verdict", "ratio", "ratio_ci_low", "ratio_ci_high", "accept_length", "cycle_time_ms", "draft_ms", "verify_ms",
    "verify_compute_ms", "verify_comm_ms", "comm_share", "allreduce_per_forward",
    "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tpot_p50_ms",
    "break_even_accept_length", "speculation_pays", "warmup_converged",
)


def _get(metrics: dict[str, Any], name: str, field: str = "value") -> float | None:
    entry = metrics.get(name)
    return entry.get(field) if isinstance(entry, dict) else None


def _median(values: list[float] | None) -> float | None:
    return float(statistics.median(values)) if values else None


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    """Flatten one summary into the values the table and plots show (None = absent)."""
    m = summary.get("metrics") or {}
    counts = m.get("counts") or {}
    ci = (m.get("output_tok_s") or {}).get("median_ci")
    absent = m.get("absent") or {}
    return {
        "config": summary["config"],
        "description": summary.get("description", ""),
        "status": summary["status"],
        # `expect: failure` marks a known-failing case kept as a result (e.g. bare NCCL_ALGO=Tree).
        "expect": (summary.get("plan") or {}).get("expect", "ok"),
        "stage": summary.get("stage"),
        "reason": summary.get("reason"),
        "detail": summary.get("detail"),
        "log_tail": summary.get("log_tail"),
        "warnings": summary.get("warnings") or [],
        "spec": summary.get("speculative_algorithm"),
        "n_ok": counts.get("ok"),
        "n_error": counts.get("error"),
        "n_incomplete": counts.get("incomplete"),
        "tok_s": _get(m, "output_tok_s", "p50"),
        "tok_s_absent": absent.get("output_tok_s"),
        "tok_s_ci": [ci["low"], ci["high"]] if ci else None,
        "decode_tok_s": _get(m, "decode_tok_s", "p50"),
        "decode_tok_s_run": _get(m, "decode_tok_s_weighted"),
        "aggregate_tok_s": _median((m.get("aggregate_output_tok_s") or {}).get("per_repeat")),
        "samples": ((m.get("samples") or {}).get("output_tok_s") or {}).get("values") or [],
        "repeat_medians": (m.get("output_tok_s") or {}).get("per_repeat_median") or [],
        "accept_length": _get(m, "accept_length"),
        "cycle_ms": _get(m, "cycle_time_ms"),
        "draft_ms": _get(m, "draft_ms_per_cycle"),
        "verify_ms": _get(m, "verify_ms_per_cycle"),
        "verify_comm_ms": _get(m, "verify_comm_ms_per_cycle"),
        "verify_compute_ms": _get(m, "verify_compute_ms_per_cycle"),
        "comm_share": _get(m, "verify_comm_share"),
        "allreduce_per_forward": _get(m, "allreduce_per_forward"),
        "ttft_p50": _get(m, "ttft_ms", "p50"),
        "ttft_p99": _get(m, "ttft_ms", "p99"),
        "itl_p50": _get(m, "itl_ms", "p50"),
        "itl_p99": _get(m, "itl_ms", "p99"),
        "tpot_p50": _get(m, "tpot_ms", "p50"),
        "warmup_converged": (summary.get("warmup") or {}).get("converged"),
        "absent": absent,
        "seed": ((summary.get("plan") or {}).get("workload") or {}).get("seed", 0),
    }


def config_rows(
    summaries: list[dict[str, Any]], baseline: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One row per configuration (sorted by name, baseline first) with verdict and break-even.

    Returns ``(rows, baseline_row)``; ``baseline_row`` is None when no baseline
    is named or it is not among the summaries. A baseline that did not end
    ``ok`` gives no verdicts and no break-even (``no baseline``).
    """
    rows = sorted((_row(s) for s in summaries), key=lambda r: (r["config"] != baseline, r["config"]))
    base = next((r for r in rows if r["config"] == baseline), None)
    base_ok = base is not None and base["status"] == "ok"
    for r in rows:
        r["verdict"] = None
        if r is base:
            r["verdict_label"] = "baseline"
        elif r["status"] == "failed":
            r["verdict_label"] = "failed"
        elif not base_ok:
            r["verdict_label"] = "no baseline"
        else:
            v = compare_to_baseline(r["samples"], base["samples"], r["repeat_medians"], base["repeat_medians"],
                                    seed=int(r["seed"]))
            r["verdict"], r["verdict_label"] = v, v["verdict"]
        r["break_even"], r["pays"] = None, None
        if r["cycle_ms"] is None:
            r["break_even_why"] = "no cycle time" + (" (no speculation)" if not r["spec"] else "")
        elif not base_ok or base["decode_tok_s_run"] is None:
            r["break_even_why"] = "no baseline decode tok/s"
        else:
            r["break_even"] = break_even_accept_length(r["cycle_ms"], base["decode_tok_s_run"])
            if r["accept_length"] is not None:
                r["pays"] = r["accept_length"] > r["break_even"]
    return rows, base


def _f(v: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _verdict_cell(r: dict[str, Any]) -> str:
    v = r.get("verdict")
    if v is None or "ratio" not in v:
        return r["verdict_label"]
    lo, hi = v["ratio_ci"]
    return f"{v['verdict']} (x{v['ratio']:.3f} [{lo:.3f}, {hi:.3f}])"


def _markdown(rows: list[dict[str, Any]], base: dict[str, Any] | None, baseline: str | None, plots_rel: str) -> str:
    out = io.StringIO()
    w = out.write
    w("# specsweep report\n\n")
    if base is None:
        w(f"Baseline: **none** ({'not named in config.yaml' if baseline is None else f'{baseline!r} has no summary'}); "
          "no verdicts and no break-even.\n\n")
    else:
        w(f"Baseline: **{base['config']}** (status {base['status']}), median output {_f(base['tok_s'])} tok/s, "
          f"run decode rate {_f(base['decode_tok_s_run'])} tok/s.\n\n")
    w("## When speculation pays\n\n")
    w("Single-stream throughput of speculative decoding is `accept_length / cycle_time_s` (a cycle = the draft "
      "steps + one verify), so speculation pays only when\n\n")
    w(f"    {FORMULA}\n\n")
    w("Break-even accept length = cycle time x baseline tok/s (e.g. 0.030 s x 82 tok/s = 2.46). Here cycle time = "
      "decode time / spec_verify_ct measured by the client (decode time = last token chunk - first token chunk; "
      "the first token comes from prefill), and baseline tok/s = the baseline's run decode rate = "
      "sum(completion tokens - 1) / sum(decode time), because the cycle time counts decode only. Accept length, "
      "cycle time and decode rate are all run totals, so `pays?` agrees with comparing decode rates.\n\n")
    w("## Results\n\n")
    head = ["config", "status", "tok/s median [95% CI]", "verdict vs baseline (ratio [CI])", "accept length",
            "cycle ms", "verify ms", "comm share", "TTFT p50/p99 ms", "ITL p50/p99 ms", "break-even accept",
            "pays?", "ok/err/inc"]
    w("| " + " | ".join(head) + " |\n")
    w("|" + "---|" * len(head) + "\n")
    for r in rows:
        tok = _f(r["tok_s"])
        if r["tok_s"] is not None and r["tok_s_ci"]:
            tok += f" [{r['tok_s_ci'][0]:.1f}, {r['tok_s_ci'][1]:.1f}]"
        pays = "n/a" if r["pays"] is None else ("yes" if r["pays"] else "no")
        be = _f(r["break_even"], "{:.2f}") if r["break_even"] is not None else f"n/a ({r['break_even_why']})"
        cells = [
            f"**{r['config']}**" if r is base else r["config"], r["status"], tok, _verdict_cell(r),
            _f(r["accept_length"], "{:.2f}"), _f(r["cycle_ms"], "{:.2f}"), _f(r["verify_ms"], "{:.2f}"),
            _f(r["comm_share"] and r["comm_share"] * 100, "{:.0f}%") if r["comm_share"] is not None else "n/a",
            f"{_f(r['ttft_p50'])} / {_f(r['ttft_p99'])}", f"{_f(r['itl_p50'])} / {_f(r['itl_p99'])}",
            be, pays, f"{r['n_ok']}/{r['n_error']}/{r['n_incomplete']}",
        ]
        w("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |\n")
    w("\n`n/a` = the metric could not be computed (never a zero); reasons under *Absent metrics*. "
      "Only measured requests with status ok enter the metrics; ok/err/inc counts all measured requests.\n\n")
    w("## Methods\n\n")
    w("- tok/s: per-request output throughput = completion tokens (server-reported) / end-to-end latency; "
      "the median over all measured requests of all repeats. At concurrency > 1 see also "
      "`aggregate_tok_s_median` in summary.csv (median over repeats of total tokens / wall time).\n")
    w(f"- CI: {CI_METHOD}, {CI_LEVEL:.0%}, {BOOTSTRAP_RESAMPLES} resamples, seeded with the workload seed.\n")
    w(f"- Percentiles: {PERCENTILE_METHOD_NAME}.\n")
    w(f"- Verdict: {VERDICT_METHOD}.\n")
    w("- ITL = gap between consecutive chunks that carried tokens (several tokens per chunk under speculation); "
      "TPOT = decode time / (completion tokens - 1).\n")
    w("- accept length = sum(completion tokens) / sum(spec_verify_ct) over this run's measured requests "
      "(never a server-lifetime counter); verify ms and comm share are engine-reported (`timing`) per cycle.\n\n")

    described = [r for r in rows if r["description"]]
    if described:
        w("## Configurations\n\n")
        for r in described:
            w(f"- **{r['config']}**: {r['description']}\n")
        w("\n")
    problems = [r for r in rows if r["status"] != "ok"]
    w("## Failed and fallen-back configurations\n\n")
    if not problems:
        w("None.\n\n")
    for r in problems:
        expected = " (expected: a known-failing case)" if r["expect"] == "failure" and r["status"] == "failed" else ""
        w(f"### {r['config']}: {r['status']}{expected}\n\n")
        w(f"- stage: `{r['stage']}`\n- reason: `{r['reason']}`\n- detail: {r['detail']}\n\n")
        if r["log_tail"]:
            tail = r["log_tail"] if isinstance(r["log_tail"], str) else "\n".join(map(str, r["log_tail"]))
            w("```\n" + tail.rstrip().replace("```", "'''") + "\n```\n\n")
    for r in rows:
        if r["expect"] == "failure" and r["status"] != "failed":
            r["warnings"] = [*r["warnings"], "expected to fail (a known-failing case) but did not: re-check what changed"]
    warned = [r for r in rows if r["warnings"]]
    if warned:
        w("## Warnings\n\n")
        for r in warned:
            for msg in r["warnings"]:
                w(f"- {r['config']}: {msg}\n")
        w("\n")
    w("## Absent metrics\n\n")
    any_absent = False
    for r in rows:
        absent = {k: v for k, v in r["absent"].items() if r["spec"] or k not in SPEC_ONLY_METRICS}
        if r["status"] == "failed" or not absent:
            continue
        any_absent = True
        items = "; ".join(f"{k}: {v}" for k, v in sorted(absent.items()))
        w(f"- {r['config']}: {items}\n")
    if not any_absent:
        w("None.\n")
    w("\n(Speculation-only metrics are not listed for configurations without a speculative algorithm.)\n")
    w("\n## Plots\n\n")
    for name in PLOT_FILES.values():
        w(f"![{name}]({plots_rel}/{name})\n")
    return out.getvalue()


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    wr = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    wr.writeheader()
    for r in rows:
        v = r.get("verdict") or {}
        ci = r["tok_s_ci"] or [None, None]
        rci = v.get("ratio_ci") or [None, None]
        wr.writerow({
            "config": r["config"], "description": r["description"], "status": r["status"], "expect": r["expect"],
            "stage": r["stage"], "reason": r["reason"], "n_ok": r["n_ok"], "n_error": r["n_error"],
            "n_incomplete": r["n_incomplete"], "tok_s_median": r["tok_s"], "tok_s_ci_low": ci[0],
            "tok_s_ci_high": ci[1], "decode_tok_s_median": r["decode_tok_s"], "decode_tok_s_run": r["decode_tok_s_run"],
            "aggregate_tok_s_median": r["aggregate_tok_s"], "verdict": r["verdict_label"],
            "ratio": v.get("ratio"), "ratio_ci_low": rci[0], "ratio_ci_high": rci[1],
            "accept_length": r["accept_length"], "cycle_time_ms": r["cycle_ms"], "draft_ms": r["draft_ms"],
            "verify_ms": r["verify_ms"], "verify_compute_ms": r["verify_compute_ms"],
            "verify_comm_ms": r["verify_comm_ms"], "comm_share": r["comm_share"],
            "allreduce_per_forward": r["allreduce_per_forward"], "ttft_p50_ms": r["ttft_p50"],
            "ttft_p99_ms": r["ttft_p99"], "itl_p50_ms": r["itl_p50"], "itl_p99_ms": r["itl_p99"],
            "tpot_p50_ms": r["tpot_p50"], "break_even_accept_length": r["break_even"],
            "speculation_pays": r["pays"], "warmup_converged": r["warmup_converged"],
        })
    # csv writes None as an empty cell: absent stays absent, never 0.
    return out.getvalue()


def render_report(summaries: list[dict], baseline: str | None, csv_path: Path, md_path: Path, plots_dir: Path) -> None:
    """Write summary.csv, report.md and the PNGs named in ``PLOT_FILES`` under ``plots_dir``."""
    rows, base = config_rows(summaries, baseline)
    write_text_atomic(csv_path, _csv(rows))
    plots_dir = Path(plots_dir)
    plots_rel = Path(os.path.relpath(plots_dir, Path(md_path).parent)).as_posix()
    write_text_atomic(md_path, _markdown(rows, base, baseline, plots_rel))
    base_for_plots = base if base is not None and base["status"] == "ok" else None
    plot_tok_s(rows, base_for_plots, plots_dir / PLOT_FILES["tok_s"])
    plot_cycle_time(rows, plots_dir / PLOT_FILES["cycle_time"])
    plot_accept_length(rows, base_for_plots, plots_dir / PLOT_FILES["accept_length"])
