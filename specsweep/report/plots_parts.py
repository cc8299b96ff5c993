"""Report figures of the parts of a step (matplotlib, Agg backend), drawn from report.json:

* ``plot_acceptance``: one column per workload point, a colour per speculative
  configuration: the share of verify steps by accepted draft tokens and the
  acceptance rate by draft position.
* ``plot_comm_split``: per configuration the verify forward split into
  compute and communication as the engine reports it and as the profiler
  trace shows it (plus idle), with the micro-benchmark's prediction
  (latency x all-reduces per verify) as a marker.
* ``plot_budget``: per workload point, the accept length needed against the
  all-reduce latency per call (``analysis.costmodel``), each configuration at
  its micro-benchmark latency and in-server latency; at TP=1 communication
  absent.

The conventions of ``report.plots`` hold (a figure only when it has data, legends inside).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specsweep.analysis.costmodel import StepParts, accept_needed
from specsweep.report import plots
from specsweep.report.markdown import OUTPUTS_DIFFER
from specsweep.report.plots import FLAG_COLOR, _label, _legend_below, _nothing, np, plt


def _series_colors(names: list[str]) -> dict[str, Any]:
    """One distinct colour per name (tab10, tab20, then evenly spaced hues): no two series share one."""
    if len(names) <= 10:
        colors = [plt.get_cmap("tab10")(i) for i in range(len(names))]
    elif len(names) <= 20:
        colors = [plt.get_cmap("tab20")(i) for i in range(len(names))]
    else:
        colors = [plt.get_cmap("hsv")(i / len(names)) for i in range(len(names))]
    return dict(zip(names, colors))


def plot_acceptance(rows: list[dict[str, Any]], path: Path) -> str | None:
    """One column per workload point; top: share of verify steps by accepted draft tokens; bottom:
    acceptance rate by draft position. A colour per configuration, the same in every panel, and one
    legend of configurations under the panels."""
    title = "Acceptance per draft position"
    shown = [r for r in rows if r.get("accept_histogram")]
    if not shown:
        return _nothing(path, "no configuration reported an acceptance histogram (no speculation, or the engine "
                              "does not report spec_correct_drafts_histogram)")
    points = sorted({(r.get("point_index", 0), r.get("point")) for r in shown}, key=lambda p: (p[0], str(p[1])))
    configs = list(dict.fromkeys(r["config"] for r in shown))
    colors = _series_colors(configs)
    markers = {c: SERIES_MARKERS[i % len(SERIES_MARKERS)] for i, c in enumerate(configs)}
    flagged = {r["config"] for r in shown if r.get("outputs_differ")}
    # report.json's simulated_accept: the setting that fixed the accept length (e.g. SGLANG_SIMULATE_ACC_LEN)
    simulated = {r["config"]: r["simulated_accept"] for r in shown if r.get("simulated_accept")}
    if simulated:
        title += ("\nsimulated: " + ", ".join(sorted(set(simulated.values()))) + " fixed the acceptance"
                  + ("" if len(simulated) == len(configs) else " of the configurations marked (simulated)")
                  + ", not a draft model")
    fig, axes = plt.subplots(2, len(points), figsize=(max(8.0, 4.4 * len(points)), 7.0 + 0.18 * len(configs)),
                             squeeze=False, layout="constrained")
    bins = max(len(r["accept_histogram"]) for r in shown)
    for col, (_, point) in enumerate(points):
        top, bottom = axes[0][col], axes[1][col]
        here = [r for r in shown if r.get("point") == point]
        width = 0.8 / len(here)
        for i, row in enumerate(here):
            c = colors[row["config"]]
            h = row["accept_histogram"]
            total = sum(h) or 1.0
            top.bar(np.arange(len(h)) + (i - (len(here) - 1) / 2) * width, [n / total for n in h], width=width,
                    color=c, edgecolor=FLAG_COLOR if row.get("outputs_differ") else "black",
                    linewidth=1.5 if row.get("outputs_differ") else 0.4)
            rates = row.get("accept_rates") or []
            # Offset like the bars above and a marker of its own: equal rates (a simulated accept length gives
            # every configuration the same) stay visible side by side instead of hiding one another.
            bottom.plot(np.arange(1, len(rates) + 1) + (i - (len(here) - 1) / 2) * min(width, 0.12), rates,
                        marker=markers[row["config"]], ms=6, color=c, alpha=0.85)
        where = "" if point in (None, "default") else f"point {point}: "
        top.set_title(f"{where}accepted draft tokens per verify", fontsize=10)
        top.set_xticks(range(bins))
        top.set_xlabel("draft tokens accepted by one verify (bonus excluded)", fontsize=9)
        top.grid(axis="y", alpha=0.3)
        bottom.set_title(f"{where}acceptance rate by draft position", fontsize=10)
        bottom.set_xticks(range(1, max(2, bins)))
        bottom.set_ylim(-0.04, 1.05)  # a marker at 0 stays whole
        bottom.set_xlabel("draft position p", fontsize=9)
        bottom.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of verify steps")
    axes[1][0].set_ylabel("share of verify steps accepting position p")
    handles = [plt.Line2D([], [], color=colors[c], marker=markers[c], ls="-", ms=7) for c in configs]
    labels = [c + (f" ({OUTPUTS_DIFFER})" if c in flagged else "")
              + (" (simulated)" if c in simulated and len(simulated) < len(configs) else "") for c in configs]
    legend = fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8,
                        frameon=False)
    for text, config in zip(legend.get_texts(), configs):
        if config in flagged:
            text.set_color(FLAG_COLOR)
    fig.suptitle(title)
    plots._save(fig, path)  # through the module: one place saves every figure
    return None


TRACE_COLORS = {"compute": "#ff7f0e", "communication": "#d62728", "idle": "#c7c7c7"}
#: One marker per series of a line panel, so that series drawn on top of one another can be told apart.
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def _comm_split_bars(row: dict[str, Any]) -> list[tuple[str, list[tuple[str, float]]]]:
    """The bars of one row in plot_comm_split: (source, [(part, ms), ...]) for each source it has."""
    bars = []
    if row.get("verify_comm_ms") is not None and row.get("verify_compute_ms") is not None:
        bars.append(("engine", [("compute", row["verify_compute_ms"]), ("communication", row["verify_comm_ms"])]))
    agreement = (row.get("profile") or {}).get("agreement") or {}
    if agreement.get("engine_verify_ms") is not None:
        bars.append(("engine, profiled", [("compute", agreement["engine_verify_ms"] - agreement["engine_comm_ms"]),
                                          ("communication", agreement["engine_comm_ms"])]))
    if row.get("trace_verify_ms") is not None:
        bars.append(("trace", [("compute", row.get("trace_verify_compute_ms") or 0.0),
                               ("communication", row.get("trace_verify_comm_ms") or 0.0),
                               ("idle", row.get("trace_verify_idle_ms") or 0.0)]))
    return bars


def plot_comm_split(rows: list[dict[str, Any]], path: Path) -> str | None:
    """Per configuration, stacked bars of ms per verify: the engine's own ``timing`` of the measured repeats
    and of the profiled requests (the difference is the profiler's overhead), and the profiler trace
    (profiled requests, rank 0: compute / communication / idle); on the trace bar a marker at the
    micro-benchmark's all-reduce latency x the trace's all-reduces per verify."""
    shown = [r for r in rows if r.get("trace_verify_ms") is not None or
             (r.get("verify_comm_ms") is not None and r.get("verify_compute_ms") is not None)]
    if not shown:
        return _nothing(path, "no configuration has a verify split (engine timing absent and profiling off)")
    rows_bars = [(row, _comm_split_bars(row)) for row in reversed(shown)]
    drawn = {source for _, bars in rows_bars for source, _ in bars}
    # The title names only the sources drawn: without profiling there is no trace.
    sources = [name for name, has in (("engine timing", drawn - {"trace"}), ("profiler trace", "trace" in drawn))
               if has]
    title = ("Verify forward: communication vs compute (" + " and ".join(sources) + ")"
             + ("" if "trace" in drawn else "\nprofiling off: no profiler trace"))
    n_bars = sum(len(bars) for _, bars in rows_bars)
    fig, ax = plt.subplots(figsize=(9.5, max(3.0, 1.6 + 0.42 * n_bars + 0.2 * len(shown))))
    labels, ys = [], []
    y = 0.0
    xmax = 0.0
    for row, bars in rows_bars:
        agreement = (row.get("profile") or {}).get("agreement") or {}
        for source, parts in bars:
            left = 0.0
            for name, v in parts:
                ax.barh(y, v, left=left, height=0.8, color=TRACE_COLORS[name], edgecolor="black", linewidth=0.5,
                        hatch="//" if source == "trace" else None)
                left += v
            text = f" {left:.1f} ms"
            if source == "trace" and row.get("trace_comm_share") is not None:
                text += f", comm {row['trace_comm_share'] * 100:.0f}%"
                if row.get("trace_allreduce_per_verify") is not None:
                    text += f", {row['trace_allreduce_per_verify']:.0f} AR ({row.get('trace_allreduce_impl')})"
            elif source == "engine" and row.get("comm_share") is not None:
                text += f", comm {row['comm_share'] * 100:.0f}%"
            elif source == "engine, profiled":
                text += f", comm {agreement['engine_comm_share'] * 100:.0f}%"
            ax.text(left, y, text, va="center", ha="left", fontsize=7)
            bench = row.get("allreduce_bench_ms_per_verify")
            if source == "trace" and bench is not None:
                ax.plot(bench, y, marker="|", color="black", ms=16, mew=2.5, ls="none")
            xmax = max(xmax, left, bench or 0.0)
            labels.append(f"{_label(row)} ({source if source != 'engine' else 'engine, measured'})")
            ys.append(y)
            y += 1.0
        y += 0.5
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(0, xmax * 1.6 if xmax > 0 else 1)  # room for the text after each bar
    ax.set_xlabel("ms per verify forward (decode forward without speculation)")
    # Only what is drawn: idle and the hatching exist on trace bars only, the tick where a micro-benchmark ran.
    sources = {source for _, bars in rows_bars for source, _ in bars}
    parts = [p for p in TRACE_COLORS if p != "idle" or "trace" in sources]
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=TRACE_COLORS[p], edgecolor="black", linewidth=0.5)
               for p in parts]
    names = list(parts)
    if "trace" in sources:
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", hatch="//", edgecolor="black"))
        names.append("hatched: profiler trace (rank 0, profiled requests)")
    if any(r.get("allreduce_bench_ms_per_verify") is not None and r.get("trace_verify_ms") is not None
           for r in shown):
        handles.append(plt.Line2D([], [], marker="|", color="black", ms=12, mew=2.5, ls="none"))
        names.append("micro-benchmark latency x all-reduces per verify")
    _legend_below(ax, handles, names, ncol=2)
    ax.set_title(title, fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    plots._save(fig, path)  # through the module: one place saves every figure
    return None


def plot_budget(points: list[dict[str, Any]], path: Path) -> str | None:
    """The communication budget (report.json's ``budget``: ``analysis.answer.budget_records``): per workload
    point, the accept length needed to equal the baseline's decode rate against the all-reduce latency per call
    (one line per speculative configuration, from its cost model: ``B x (draft + verify compute + all-reduces x L)``),
    each configuration placed at its micro-benchmark latency and accept length (filled = above its line: pays)
    and, as an x, at the latency of the same call timed inside the server.
    Where no configuration all-reduces (TP=1) the figure says that communication is absent and shows the
    accept length needed beside the measured one."""
    title = "Communication budget: accept length needed vs all-reduce latency"
    if not points:
        return _nothing(path, "no speculative configuration with a cost model (it needs the engine's timing and, "
                              "with communication, the micro-benchmark: profile.enabled) and a baseline decode rate")
    fig, axes = plt.subplots(1, len(points), figsize=(6.5 * len(points), 4.8), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, pt in zip(axes[0], points):
        b = pt["baseline_tok_s"]
        rows = pt["rows"]
        if all(r["comm_absent"] for r in rows):
            names = [r["label"] for r in rows]
            y = np.arange(len(rows))
            ax.barh(y, [r["accept_needed"] for r in rows], height=0.4, color="#cccccc",
                    label="accept length needed")
            ax.set_ylim(-0.8, len(rows) - 0.2)
            ax.scatter([r["accept"] for r in rows], y, color="#2ca02c", zorder=3, label="measured accept length")
            ax.set_yticks(y, names, fontsize=8)
            ax.set_xlabel("accept length (tokens / verify)")
            where = "" if pt["point"] == "default" else f"{pt['point']}: "
            ax.set_title(f"{where}communication is absent (TP=1, no all-reduce)", fontsize=10)
            ax.text(0.98, 0.02, "no latency budget: the accept length needed\nis fixed by draft + verify compute",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=8)
            ax.legend(fontsize=8, loc="upper right")
            continue
        lats = [r["parts"]["latency_us"] for r in rows if not r["comm_absent"]] + \
            [r["in_server_us"] for r in rows if r.get("in_server_us")]
        budgets = [r["budget_us"] for r in rows if r["budget_us"] is not None and r["budget_us"] > 0]
        lo = max(min(lats + budgets) / 3, 0.1)
        hi = max(lats + budgets) * 3
        xs = np.geomspace(lo, hi, 200)
        for i, r in enumerate(rows):
            c = colors[i % len(colors)]
            p = StepParts(**r["parts"])  # the row's cost model, drawn as a line over latency
            need = [accept_needed(p, b, x) for x in xs]
            ax.plot(xs, need, color=c, lw=1.5, label=f"{r['label']}: needed")
            lat = p.latency_us
            pays = r["accept"] > r["accept_needed"]
            ax.scatter([lat], [r["accept"]], s=60, zorder=3, edgecolors=c,
                       facecolors=c if pays else "white", linewidths=1.5)
            ax.annotate(f"{r['backend']} ({lat:.1f} us, {r['accept']:.2f})", (lat, r["accept"]),
                        textcoords="offset points", xytext=(6, 4), fontsize=8, color=c)
            inside = r.get("in_server_us")
            if inside:  # the same call as the engine timed it inside the verify
                ax.scatter([inside], [r["accept"]], marker="x", s=50, color=c, zorder=3)
            if r["budget_us"] is not None and r["budget_us"] > 0:
                ax.axvline(r["budget_us"], color=c, ls=":", lw=1)
                ax.text(r["budget_us"], 0.97 - 0.12 * i, f" budget {r['budget_us']:.0f} us",
                        transform=ax.get_xaxis_transform(), fontsize=7, color=c, va="top", ha="left")
        ax.set_xscale("log")
        ax.set_xlabel("latency of one all-reduce at the verify's message size (us, log)")
        ax.set_ylabel("accept length needed to match the baseline")
        where = "" if pt["point"] == "default" else f"{pt['point']}: "
        ax.set_title(f"{where}baseline {pt['baseline']} at {b:.1f} tok/s", fontsize=10)
        ax.text(0.02, 0.98, "above a line: speculation pays\no = micro-benchmark latency (filled: pays)\n"
                "x = the same all-reduce timed in the server",
                transform=ax.transAxes, ha="left", va="top", fontsize=8)
        ax.legend(fontsize=7, loc="center left")
    fig.suptitle(title, fontsize=11)
    plots._save(fig, path)  # through the module: one place saves every figure
    return None
