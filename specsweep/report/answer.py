"""The answer's sections of report.md, rendered from report.json: does speculation pay on each backend
(against its own counterpart without speculation), the cost model beside the measurement, and the
all-reduce latency at which speculation pays (``analysis.answer`` computes them)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.costmodel import RESIDUAL_LARGE, RESIDUAL_PARTS
from specsweep.analysis.rows import row_label
from specsweep.contracts.vocabulary import CALLED, Verdict
from specsweep.report.markdown import table_head, table_row
from specsweep.report.markdown import verdict_text as _verdict


def backend_section(rows: Sequence[dict[str, Any]], baseline: str | None) -> str:
    """Per backend: speculation against its own baseline, next to the comparison with the global one."""
    spec = [r for r in rows if r.get("spec") and r.get("own_pair")]
    if not spec:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Does speculation pay on each backend?\n\n")
    w("Each speculative configuration against its own counterpart without speculation (the same server and "
      "all-reduce, speculation off: named with `own_baseline`, or found as the one plan that differs only in "
      f"speculation settings), next to the comparison with the global baseline `{baseline}`. A faster all-reduce "
      "speeds up decoding without speculation too, so the two can disagree. Same verdict method and noise floor "
      "as the results table.\n\n")
    w("| config | own baseline | speculation vs own baseline | vs global baseline | own baseline vs global |\n")
    w("|---|---|---|---|---|\n")
    for r in spec:
        pair = r["own_pair"]
        own = r.get("own_row")
        if "why" in pair:
            own_cell, vs_own, own_vs = f"none ({pair['why']})", "n/a", "n/a"
        else:
            own_cell = f"{pair['name']} ({pair['how']})"
            vs_own = (_verdict(r["own_comparison"], "n/a") if own is not None
                      else "n/a (no row at this point)")
            if r["own_comparison"] and r["own_verdict"] in CALLED:
                vs_own = f"{'pays' if r['own_verdict'] == Verdict.FASTER else 'does not pay'}: {vs_own}"
            own_vs = _verdict((own or {}).get("comparison"), (own or {}).get("verdict", "n/a"))
        cells = [row_label(r), own_cell, vs_own, _verdict(r.get("comparison"), r.get("verdict", "n/a")), own_vs]
        w(table_row(cells))
    w("\n")
    return out.getvalue()


def _allreduce_cell(parts: Mapping[str, Any], timing: Mapping[str, Any]) -> str:
    """``20 x 61.8 (in_forward; back to back 7.5)``: all-reduces x the latency, how it was timed, the loop's figure."""
    loop = timing["back_to_back_us"]
    return (f"{parts['allreduces']:.0f} x {parts['latency_us']:.1f} ({timing['timing']}"
            + ("" if loop is None else f"; back to back {loop:.1f}") + ")")


def model_section(rows: Sequence[dict[str, Any]]) -> str:
    """The cost model beside the measurement, with the residual and the part it misses."""
    modelled = [r for r in rows if r.get("model")]
    if not modelled:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Cost model against the measurement\n\n")
    w("Predicted step = draft steps + verify compute + all-reduces per verify x the micro-benchmark's latency at "
      "the verify's message size (without speculation: decode compute + all-reduces per step x the latency at its "
      "size). Draft, compute and the all-reduce count are the engine's own timing; the latency is the "
      "micro-benchmark run before the server started, timed as the cell says: `in_forward` between the layers of "
      "the configuration's own model (the reference engine), `back_to_back` in a loop alone (SGLang). "
      "Measured = the client's cycle time (decode time / verify "
      "steps; without speculation 1 / the run decode rate). Predicted tok/s = accept length / predicted step; "
      "speedups are against the global baseline's predicted and measured decode rates. The residual "
      "(measured - predicted) splits into time outside the engine's phases and communication the "
      f"micro-benchmark does not see; beyond {RESIDUAL_LARGE:.0%} the last column names the larger part.\n\n")
    head = ["config", "draft + compute ms", "all-reduces x us", "predicted ms", "measured ms", "residual",
            "predicted tok/s", "measured tok/s (tokens / step)", "speedup predicted / measured",
            "what the model misses"]
    w(table_head(head))
    for r in modelled:
        m = r["model"]
        if "absent" in m:
            w(f"| {row_label(r)} | n/a ({m['absent']}) |" + " |" * (len(head) - 2) + "\n")
            continue
        p, res = m["parts"], m["residual"]
        ar = "none (TP=1: communication absent)" if m["comm_absent"] else _allreduce_cell(p, m["timing"])
        part = m["missed_part"]
        misses = "within the model" if part is None else (
            f"{RESIDUAL_PARTS[part]}: {res[part]:+.2f} ms")
        skew = m["trace_rank_skew_ms"]
        if part == "comm_missed_ms" and skew is not None:
            misses += f"; the profiler trace's wait for the slower rank: {skew:.2f} ms per forward"
        if m.get("note"):
            misses += f" ({m['note']})"
        sp = r.get("model_predicted_speedup")
        ms = r.get("measured_speedup")
        cells = [row_label(r), f"{p['fixed_ms']:.2f}", ar, f"{m['predicted_ms']:.2f}", f"{m['measured_ms']:.2f}",
                 f"{res['residual_ms']:+.2f} ms ({res['residual_share']:+.1%})", f"{r['model_predicted_tok_s']:.1f}",
                 f"{r['model_measured_tok_s']:.1f}",
                 f"{'n/a' if sp is None else f'x{sp:.2f}'} / {'n/a' if ms is None else f'x{ms:.2f}'}", misses]
        w(table_row(cells))
    parts = [f"{row_label(r)}: outside {r['model']['residual']['outside_ms']:+.2f}, comm missed "
             f"{r['model']['residual']['comm_missed_ms']:+.2f}" for r in modelled if "residual" in r["model"]]
    w("\n" + (f"Residual parts of every modelled row (ms): {'; '.join(parts)}.\n\n" if parts else "\n"))
    return out.getvalue()


def budget_section(points: Sequence[dict[str, Any]], plot_rel: str | None = None) -> str:
    """The communication budget per workload point, in words and a table."""
    if not points:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Communication budget: the all-reduce latency at which speculation pays\n\n")
    w("From the cost model: speculation beats the baseline's measured decode rate B when "
      "`accept_length / (draft + verify compute + all-reduces x latency) > B`, so at the measured accept length "
      "it pays while one all-reduce (at the verify's message size) takes less than "
      "`(accept_length / B - draft - verify compute) / all-reduces`. The accept length needed at a latency L is "
      "`B x (draft + verify compute + all-reduces x L)`. Against its own counterpart on the same link both sides pay "
      "L (the baseline on every token, speculation once per accepted run), so there speculation can gain as the "
      "link slows. The draft's own all-reduces (one draft layer: 2 a step) stay in its measured time; only the "
      "target forward's are priced at L.\n\n")
    for pt in points:
        w(f"**{pt['point']}** (baseline `{pt['baseline']}`, decode {pt['baseline_tok_s']:.1f} tok/s)\n\n")
        if all(r["comm_absent"] for r in pt["rows"]):
            w("Communication is absent here (TP=1: no all-reduce), so there is no latency budget: the accept "
              "length needed is fixed by draft + verify compute alone.\n\n")
        head = ["config", "accept length", "budget: one all-reduce below (us)",
                "measured latency us: micro-benchmark / in the server",
                *[f"accept needed at {x['backend']} ({x['latency_us']:.1f} us)" for x in pt["latencies"]],
                "against its own baseline"]
        w(table_head(head))
        for r in pt["rows"]:
            p = r["parts"]
            if r["comm_absent"]:
                budget = f"no all-reduce (accept needed {r['accept_needed']:.2f})"
            elif r["budget_us"] is None:
                # analysis.answer.annotate sets no budget for a row without a baseline decode rate of its own
                # (e.g. a workload the baseline did not run), or with no all-reduce to price.
                budget = "n/a (no baseline decode rate for this row)"
            elif r["budget_us"] < 0:
                budget = "none: draft + verify compute alone exceed accept / B"
            else:
                budget = f"{r['budget_us']:.1f}"
            needed = [f"{x:.2f}" for x in r["accept_needed_at"]]
            own_text = "n/a" if r["own_crossover"] is None else _crossover_text(r["own_crossover"])
            inside_cell = "n/a" if r["in_server_us"] is None else f"{r['in_server_us']:.1f}"
            cells = [r["label"], f"{r['accept']:.2f}", budget,
                     "n/a (none)" if r["comm_absent"] else f"{p['latency_us']:.1f} / {inside_cell}", *needed, own_text]
            w(table_row(cells))
        w("\n")
        for r in pt["rows"]:
            if not r["comm_absent"] and r["budget_us"] is not None and r["budget_us"] >= 0:
                lat, inside = r["parts"]["latency_us"], r["in_server_us"]
                line = (f"- `{r['label']}`: speculation pays here when an all-reduce of the verify's size takes less "
                        f"than {r['budget_us']:.1f} us (the micro-benchmark measured {lat:.1f} us: "
                        f"{'within' if lat < r['budget_us'] else 'over'} the budget")
                if inside is not None:
                    line += (f"; in the server one took {inside:.1f} us, "
                             f"{'within' if inside < r['budget_us'] else 'over'} it")
                line += ")."
                if abs(r["residual"]["residual_share"]) > RESIDUAL_LARGE:
                    line += (f" The model misses {r['residual']['residual_share']:+.0%} of this cycle (see the cost "
                             "model above): the budget holds for the micro-benchmark's latency only as far as the "
                             "model does.")
                w(line + "\n")
        w("\n")
    if plot_rel:
        w(f"![budget]({plot_rel})\n\n")
    return out.getvalue()


def _crossover_text(cross: Mapping[str, Any]) -> str:
    if cross.get("no_communication"):
        return ("pays" if cross["pays"] == "always" else "does not pay") + " (no communication)"
    if cross["pays"] in ("always", "never"):
        return "pays at any latency" if cross["pays"] == "always" else "pays at no latency"
    side = "more" if cross["pays"] == "above" else "less"
    return f"pays when one all-reduce takes {side} than {cross['latency_us']:.1f} us"
