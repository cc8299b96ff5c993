"""report.md's tables after the answer, rendered from report.json: throughput against the workload
point, the best configuration of each grid, the pairwise verdicts and the launches as they ran."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.analysis.rows import row_label
from specsweep.contracts.vocabulary import Status, Verdict
from specsweep.report.linked import Linked
from specsweep.report.markdown import cpu_share
from specsweep.report.markdown import f as _f
from specsweep.report.markdown import pct as _pct

# -------------------------------------------------------------------- points


def concurrency_table(rows: Sequence[dict[str, Any]]) -> str:
    """tok/s per user and per GPU at every point, with the baseline at the same point (configs with >1 point)."""
    multi = {r["config"] for r in rows if r["point"] != "default"}
    shown = [r for r in rows if r["config"] in multi]
    if not shown:
        return ""
    out = io.StringIO()
    out.write("## Throughput against the workload point\n\n")
    out.write("decode tok/s per user = the decode rate (the verdicts' statistic); tok/s per GPU = aggregate output "
              "tok/s (median over repeats) / GPUs (on a CPU run: / TP ranks). The baseline's values are at the same "
              "point.\n\n")
    out.write("| config | point | concurrency | decode tok/s per user | baseline per user | tok/s per GPU "
              "| baseline per GPU "
              "| verdict vs baseline |\n|---|---|---|---|---|---|---|---|\n")
    for r in shown:
        out.write(f"| {r['config']} | {r['point']} | {r['concurrency']} | {_f(r[BASELINE_TOK_S])} | "
                  f"{_f(r['baseline_tok_s'])} | {_f(r['tok_s_per_gpu'])} | {_f(r['baseline_tok_s_per_gpu'])} | "
                  f"{r['verdict']} |\n")
    out.write("\nSee `plots/pareto.png` (tok/s per user against tok/s per GPU over the points).\n\n")
    return out.getvalue()


# ------------------------------------------------------------------ pairwise


def pairwise_section(pairwise: Sequence[Mapping[str, Any]], report: Linked) -> str:
    """Decode verdicts between the non-baseline configurations at each point (report.json's ``pairwise``),
    the pairs of a point judged as one family by Holm's method."""
    out = io.StringIO()
    for point in pairwise:
        if not out.tell():
            out.write("## Pairwise verdicts\n\nEach configuration against each other at the same point, on the "
                      "decode rate, by the same method as the verdicts against the baseline; the pairs of a point are "
                      "one family, Holm-corrected (so that one of many comparisons of identical setups is not called "
                      "by chance): each pair's interval and threshold are those of its Holm step.\n\n")
        for pair in point["pairs"]:
            a, b, v = report.row(pair["a"]), report.row(pair["b"]), pair["comparison"]
            cell = v["verdict"] if "ratio" not in v else (
                f"{v['verdict']} (x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}], called beyond "
                f"+-{_pct(v['threshold'])}, Holm p {v['p_holm']:.3f} over {v['family']} pairs)")
            out.write(f"- {row_label(a)} vs {row_label(b)}: {cell}\n")
    return out.getvalue() + ("\n" if out.tell() else "")


def best_section(winners: Sequence[Mapping[str, Any]], files: Mapping[str, Mapping[str, str]]) -> str:
    """The winner of each grid (report.json's ``grids``) and where its files are."""
    if not winners:
        return ""
    out = io.StringIO()
    out.write("## Best configuration of each grid\n\n")
    for w in winners:
        if w['winner'] is None:
            out.write(f"- **{w['grid']}**: no winner ({w['why_none']}).\n")
            continue
        settings = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in w['values'].items() if k not in w['compared_at'])
        runner = w['against'][0] if w['against'] else None
        if runner is None:
            lead = "the only member that ended ok"
        elif w['significant']:
            lead = (f"faster than every other member; the runner-up {runner['config']} by x{runner['ratio']:.3f} "
                    f"[{runner['ratio_ci'][0]:.3f}, {runner['ratio_ci'][1]:.3f}]")
        else:
            tied = [a["config"] for a in w['against'] if a["verdict"] != Verdict.FASTER]
            lead = (f"NOT significantly better than {', '.join(tied[:4])}{' ...' if len(tied) > 4 else ''} "
                    "(highest median only; apply with care)")
        if w['compared_at']:
            (acc_key, acc), = w['compared_at'].items()
            lead += (f", compared at the simulated accept length {acc_key.partition('.')[2]}={acc} (a what-if of "
                     "the sweep, not a "
                     f"setting); these settings are the fastest at {len(w['wins_at'] or [])} of the "
                     f"{len(w['accept_lengths'] or [])} accept lengths measured")
        paths = files.get(w['grid'], {})
        out.write(f"- **{w['grid']}** at point {w['point']}: **{w['winner']['config']}** ({settings}), "
                  f"{_f(w['winner'][BASELINE_TOK_S])} decode tok/s, {lead}; vs baseline: {w['baseline_verdict']}. "
                  f"Apply: `{paths.get('env', '?')}`; NCCL tuner: `{paths.get('tuner', '?')}`; "
                  f"evidence: `{paths.get('evidence', '?')}`.\n")
    return out.getvalue() + "\n"


def measured_cell(entry: Mapping[str, Any]) -> str:
    """How one launch was measured: alone (sequential), or side by side with the partners whose servers were up,
    its windows and the partners' CPU over them (the worst window in brackets)."""
    side = entry.get("side_by_side")
    if not side:
        return "alone"
    up = side.get("partners_up") or []
    partners = f"{len(up)} partner{'s' if len(up) != 1 else ''} up" if up else "no partner up"
    return (f"side by side, {partners}, {side.get('windows')} windows, partners' CPU "
            f"{cpu_share(side.get('partner_cpu_share'))} (worst window {cpu_share(side.get('partner_cpu_share_max'))})")


def launch_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """Every launch in the order it started (report.json's ``launches.entries``), with its round and its place
    in the round's seeded order; where a launch was measured side by side, a column says how each was."""
    if not entries:
        return ""
    side = any(e.get("side_by_side") for e in entries)
    out = io.StringIO()
    out.write("## Launches\n\nIn the order they started; *round / place*: the launch's round and its place in "
              "that round's seeded order; *host wait s*: the time the job waited for the host (its lock, or another "
              "specsweep server running) before its own work; *server s*: the rest of the job, start to end "
              "(*wall s*) less that wait.")
    if side:
        out.write(" *measured*: alone on the host, or side by side: how many of its round's other servers were up "
                  "during its windows, and the share of a core they used over its windows (the worst window in "
                  "brackets).")
    out.write("\n\n| # | config | launch | round / place | status | host wait s | ready s | server s | wall s |"
              + (" measured |" if side else "") + "\n|---|---|---|---|---|---|---|---|---|"
              + ("---|" if side else "") + "\n")
    for i, e in enumerate(entries, 1):
        name = f"{e['launch']} (A/A control)" if e.get("control") else e["launch"]
        status = e["status"] if e["status"] == Status.OK else f"{e['status']} ({e.get('stage')}: {e.get('reason')})"
        where = e.get("planned_place")
        cell = f"{where[0]} / {where[1]}" if where else "n/a"
        out.write(f"| {i} | {e['config']} | {name} | {cell} | {status} | {_f(e.get('host_wait_s'))} | "
                  f"{_f(e.get('ready_s'))} | {_f(e.get('server_s'))} | {_f(e.get('wall_s'))} |"
                  + (f" {measured_cell(e)} |" if side else "") + "\n")
    return out.getvalue() + "\n"
