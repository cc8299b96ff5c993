"""Report figures (matplotlib, Agg backend), drawn from report.json's rows (``report.linked``; row keys = CSV
column names).

* ``plot_tok_s``: the decode rate per configuration (``metrics.BASELINE_TOK_S``,
  the statistic of the verdicts that colour the bars) with its 95 % interval,
  and the baseline's as a line.
* ``plot_cycle_time``: engine-reported time per speculation cycle split into
  draft / verify compute / verify communication, with the client-measured
  cycle time as a marker.
* ``plot_accept_length``: decode rate against accept length; each
  configuration's constant-cycle-time curve ``tok/s = accept / cycle_s``
  meets the baseline line at its break-even accept length (marked ``x``).
* ``pareto``, ``break_even``: below; the parts of a step (acceptance, communication
  split, budget) are in ``report.plots_parts``.

A configuration whose outputs differ from the baseline's (``row["outputs_differ"]``)
is labelled ``OUTPUTS_DIFFER`` in red in every figure it appears in.

A figure is written only when it has something to draw: each function returns
None when it wrote its file, else why there was nothing to draw (and leaves no
file: an earlier render's is removed). The report lists the figures written and
says why the others are not there. A legend lists only what the figure draws,
and lies inside the figure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.contracts.acceptance import SIMULATE_ACC_LEN
from specsweep.contracts.vocabulary import Status, Verdict
from specsweep.report.markdown import OUTPUTS_DIFFER

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

VERDICT_COLORS = {
    Verdict.BASELINE: "#1f77b4",
    Verdict.FASTER: "#2ca02c",
    Verdict.SLOWER: "#d62728",
    Verdict.NO_DIFFERENCE: "#7f7f7f",
    Verdict.INSUFFICIENT: "#bcbd22",
    Verdict.NO_BASELINE: "#7f7f7f",
    Status.FAILED: "#ffffff",
}
BASELINE_LINE = "#000000"
#: Where each row keeps its decode rate's interval (``analysis.rows.rate_interval``).
RATE_CI = ("decode_rate_ci_low", "decode_rate_ci_high")
#: An interval end beyond this many times the largest estimate on a figure is cut at it (and
#: marked): a variance on one or two degrees of freedom gives intervals of 10^7 tok/s, which
#: would squash every bar to nothing.
CI_AXIS_FACTOR = 2.0
FLAG_COLOR = "#d62728"
PART_COLORS = {"draft": "#9467bd", "verify compute": "#ff7f0e", "verify communication": "#d62728"}


def _nothing(path: Path, why: str) -> str:
    """No figure: nothing to draw (``why``); a file of an earlier render must not stand for this one."""
    Path(path).unlink(missing_ok=True)
    return why


def _save(fig: Any, path: Path) -> None:
    """Save atomically (temp file beside ``path`` + rename) and close the figure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    os.replace(tmp, path)


def _legend_below(ax: Any, handles: list[Any], labels: list[str], ncol: int, gap_in: float = 0.6) -> None:
    """A legend under the x-axis label, ``gap_in`` inches below the axes whatever the figure's height
    (an offset in axes fractions grows with a tall figure into a blank page)."""
    axes_in = ax.figure.get_figheight() * 0.8
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -gap_in / axes_in), ncol=ncol,
              fontsize=8, frameon=False)


def _height(n: int) -> float:
    return max(3.0, 1.2 + 0.45 * n)


def _label(row: dict[str, Any]) -> str:
    """A row's name in a figure (``config``, or ``config @ point`` for a configuration with several
    points), with its status when not ok and the agreement flag when raised."""
    name = row.get("label") or row["config"]
    if row.get("outputs_differ"):
        return f"{name} ({OUTPUTS_DIFFER})"
    return name + (f" ({row['status']})" if row["status"] != Status.OK else "")


def _color_flagged(ax: Any, rows: list[dict[str, Any]]) -> None:
    for tick, row in zip(ax.get_yticklabels(), rows):
        if row.get("outputs_differ"):
            tick.set_color(FLAG_COLOR)
            tick.set_fontweight("bold")


def plot_tok_s(rows: list[dict[str, Any]], baseline: dict[str, Any] | None, path: Path) -> str | None:
    """Horizontal bars: the decode rate with its 95% interval; baseline as a dashed line (with several
    workload points, a dashed mark on each row at the baseline of that row's point)."""
    title = "Decode rate (geometric mean of launch medians, 95% interval)\nbars coloured by the decode verdict"
    if not any(r.get(BASELINE_TOK_S) is not None for r in rows):
        return _nothing(path, "no configuration has a decode rate" if rows else "no configurations")
    fig, ax = plt.subplots(figsize=(9, _height(len(rows)) + 0.6))
    y = np.arange(len(rows))[::-1]
    xmax = 0.0
    estimates = [r[BASELINE_TOK_S] for r in rows if r.get(BASELINE_TOK_S) is not None]
    if baseline is not None and baseline.get(BASELINE_TOK_S) is not None:
        estimates.append(baseline[BASELINE_TOK_S])
    cap = CI_AXIS_FACTOR * max(estimates)
    clipped = False
    for yi, row in zip(y, rows):
        tok = row.get(BASELINE_TOK_S)
        if tok is None:
            why = row.get("reason") or row["absent"].get(BASELINE_TOK_S, "no tok/s")
            ax.text(0, yi, f" no tok/s: {row['status']}: {why}",
                    va="center", ha="left", fontsize=9, color="#d62728")
            continue
        color = VERDICT_COLORS.get(row.get("verdict", ""), "#7f7f7f")
        hatch = "//" if row["status"] != Status.OK else None
        ax.barh(yi, tok, color=color, alpha=0.8, hatch=hatch, edgecolor="black", linewidth=0.5)
        lo, hi = row.get(RATE_CI[0]), row.get(RATE_CI[1])
        right = tok
        if lo is not None and hi is not None:
            if hi > cap:
                clipped = True
                hi = cap
                ax.plot([cap], [yi], ">", color="black", ms=6)
            ax.errorbar(tok, yi, xerr=[[tok - lo], [hi - tok]], fmt="none", ecolor="black", capsize=4)
            right = hi
        # The value at the end of its bar (inside it, above the interval's line), not at the interval's end.
        ax.text(tok, yi + 0.2, f"{tok:.1f} ", va="center", ha="right", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.5})
        if row["status"] == Status.FAILED:
            ax.text(right, yi, f"  (failed: {row.get('reason')})", va="center", ha="left", fontsize=8)
        xmax = max(xmax, right * (1.35 if row["status"] == Status.FAILED else 1.0))
    if len({r.get("point") for r in rows}) > 1:
        # Several workload points: each row against the baseline at its own point, not one line for all.
        marked = False
        for yi, row in zip(y, rows):
            base_tok = (row.get("base_row") or {}).get(BASELINE_TOK_S)
            if base_tok is not None and (row.get("base_row") or {}).get("status") == Status.OK:
                ax.plot([base_tok, base_tok], [yi - 0.45, yi + 0.45], color=BASELINE_LINE, ls="--", lw=1.2,
                        label=None if marked else
                        f"baseline ({baseline['config'] if baseline else row['base_row']['config']})"
                                                  " at the row's point")
                marked = True
                xmax = max(xmax, base_tok)
    elif baseline is not None and baseline.get(BASELINE_TOK_S) is not None:
        ax.axvline(baseline[BASELINE_TOK_S], color=BASELINE_LINE, ls="--", lw=1.2,
                   label=f"baseline ({baseline['config']}): {baseline[BASELINE_TOK_S]:.1f} tok/s")
        xmax = max(xmax, baseline[BASELINE_TOK_S])
    ax.set_yticks(y)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticklabels([_label(r) for r in rows])
    _color_flagged(ax, rows)
    ax.set_xlim(0, xmax * 1.12 if xmax > 0 else 1)
    ax.set_xlabel("decode tok/s (per request: tokens after the first / decode time)")
    ax.set_title(title)
    used = {r.get("verdict") for r in rows if r.get(BASELINE_TOK_S) is not None}
    legend = [(plt.Rectangle((0, 0), 1, 1, facecolor=c, alpha=0.8, edgecolor="black", linewidth=0.5), k)
              for k, c in VERDICT_COLORS.items() if k in used]
    hatched = sorted({str(r["status"]) for r in rows if r["status"] != Status.OK and r.get(BASELINE_TOK_S) is not None})
    if hatched:  # the statuses the hatched bars really have (a contaminated or fallback row is never ok)
        legend.append((plt.Rectangle((0, 0), 1, 1, facecolor="white", hatch="//", edgecolor="black"),
                       "hatched: status " + " / ".join(hatched)))
    if clipped:
        legend.append((plt.Line2D([], [], marker=">", color="black", ls="none"),
                       f"interval runs past {CI_AXIS_FACTOR:g}x the largest rate (too few launches)"))
    base_handles, base_labels = ax.get_legend_handles_labels()
    labels = base_labels + [k if k.startswith(("hatched", "interval")) else f"verdict: {k}" for _, k in legend]
    _legend_below(ax, base_handles + [h for h, _ in legend], labels, ncol=3)
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
    return None


def plot_cycle_time(rows: list[dict[str, Any]], path: Path) -> str | None:
    """Stacked bars of engine-reported ms per cycle; client-measured cycle time as a diamond."""
    title = "Time per speculation cycle (draft + one verify)"
    shown = [r for r in rows if r.get("cycle_time_ms") is not None or r.get("verify_ms") is not None]
    if not shown:
        return _nothing(path, "no configuration reported a cycle time (no speculation, or no spec_verify_ct / "
                              "engine timing)")
    fig, ax = plt.subplots(figsize=(9, _height(len(shown)) + 0.6))
    y = np.arange(len(shown))[::-1]
    xmax = 0.0
    for yi, row in zip(y, shown):
        parts = [("draft", row.get("draft_ms")), ("verify compute", row.get("verify_compute_ms")),
                 ("verify communication", row.get("verify_comm_ms"))]
        left = 0.0
        if all(v is not None for _, v in parts):
            for name, v in parts:
                ax.barh(yi, v, left=left, color=PART_COLORS[name], edgecolor="black", linewidth=0.5)
                if v > 0.06 * max(1e-9, row.get("cycle_time_ms") or sum(p[1] for p in parts)):
                    ax.text(left + v / 2, yi, f"{v:.1f}", ha="center", va="center", fontsize=8, color="white")
                left += v
        else:
            ax.text(0, yi - 0.3, "  no engine timing split", fontsize=8, va="center", color="#555555")
        cyc = row.get("cycle_time_ms")
        if cyc is not None:
            ax.plot(cyc, yi, marker="D", color="black", ms=7, ls="none")
            ax.text(cyc, yi, f"   {cyc:.1f} ms", ha="left", va="center", fontsize=8)
        xmax = max(xmax, left, cyc or 0.0)
    ax.set_yticks(y)
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.set_yticklabels([_label(r) for r in shown])
    _color_flagged(ax, shown)
    ax.set_xlim(0, xmax * 1.15 if xmax > 0 else 1)
    ax.set_xlabel("ms per cycle")
    handles, labels = [], []
    if any(all(r.get(k) is not None for k in ("draft_ms", "verify_compute_ms", "verify_comm_ms")) for r in shown):
        handles += [plt.Rectangle((0, 0), 1, 1, color=c) for c in PART_COLORS.values()]
        labels += [f"{k} (engine)" for k in PART_COLORS]
    if any(r.get("cycle_time_ms") is not None for r in shown):
        handles.append(plt.Line2D([], [], marker="D", color="black", ls="none"))
        labels.append("cycle time measured by client")
    _legend_below(ax, handles, labels, ncol=2)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
    return None


def plot_accept_length(rows: list[dict[str, Any]], baseline: dict[str, Any] | None, path: Path) -> str | None:
    """Decode tok/s vs accept length; break-even where each config's curve meets the baseline.

    One panel per workload point, each against the baseline at that point (``row["base_row"]``;
    ``baseline`` where a row names none), so that no point is judged by another point's baseline."""
    title = "Decode rate vs accept length (speculation pays above the baseline line)"
    pts = [r for r in rows if r.get("accept_length") is not None and r.get(BASELINE_TOK_S) is not None]
    if not pts:
        return _nothing(path, "no configuration reported an accept length")
    points = sorted({(r.get("point_index", 0), r.get("point")) for r in pts}, key=lambda p: (p[0], str(p[1])))
    fig, axes = plt.subplots(1, len(points), figsize=(max(9.0, 6.2 * len(points)), 5.5), squeeze=False)
    for ax, (_, point) in zip(axes[0], points):
        here = [r for r in pts if r.get("point") == point]
        base = next((r["base_row"] for r in here if r.get("base_row") is not None), baseline)
        base_ok = base if base is not None and base.get("status", Status.OK) == Status.OK else None
        _accept_length_panel(ax, here, base_ok, len(points) > 1)
        if len(points) > 1:
            ax.set_title(f"point {point}", fontsize=10)
    if len(points) > 1:
        fig.suptitle(title, fontsize=11)
    else:
        axes[0][0].set_title(title, fontsize=11)
    _save(fig, path)
    return None


def _accept_length_panel(ax: Any, pts: list[dict[str, Any]], baseline: dict[str, Any] | None, per_point: bool) -> None:
    cmap = plt.get_cmap("tab10")
    base_tok = baseline.get(BASELINE_TOK_S) if baseline else None
    xs = [r["accept_length"] for r in pts] + [r["break_even_accept_length"] for r in pts
                                              if r.get("break_even_accept_length") is not None]
    xmax = max(xs) * 1.25
    ymax = max([r[BASELINE_TOK_S] for r in pts] + [base_tok or 0]) * 1.25
    a = np.linspace(0, xmax, 200)
    # In a panel of one point the point is in the title, not in every label.
    name = (lambda r: _label({**r, "label": None})) if per_point else _label
    # Points that land on (nearly) the same spot get one label listing them all, not labels over each other.
    spots: dict[tuple[int, int], list[tuple[dict[str, Any], Any]]] = {}
    crossings: dict[int, list[tuple[float, Any]]] = {}
    for i, row in enumerate(pts):
        c = cmap(i % 10)
        ax.plot(row["accept_length"], row[BASELINE_TOK_S], "o", color=c, ms=9)
        spot = (round(row["accept_length"] / xmax * 40), round(row[BASELINE_TOK_S] / ymax * 40))
        spots.setdefault(spot, []).append((row, c))
        cyc = row.get("cycle_time_ms")
        if cyc:
            ax.plot(a, a / (cyc / 1e3), ls=":", color=c, lw=1)
        be = row.get("break_even_accept_length")
        if be is not None and base_tok is not None:
            ax.plot(be, base_tok, "x", color=c, ms=10, mew=2.5)
            crossings.setdefault(round(be / xmax * 40), []).append((be, c))
    for group in spots.values():
        first, c = group[0]
        flagged = any(row.get("outputs_differ") for row, _ in group)
        ax.annotate("\n".join(name(row) for row, _ in group), (first["accept_length"], first[BASELINE_TOK_S]),
                    textcoords="offset points", xytext=(6, 6), fontsize=8, va="bottom",
                    color=FLAG_COLOR if flagged else (c if len(group) == 1 else "black"))
    # The computed break-even of each configuration, as a number where a few fit (else the table has them).
    if sum(len(group) for group in crossings.values()) <= 4:
        for group in crossings.values():
            ax.annotate(" / ".join(f"{be:.2f}" for be, _ in group), (group[0][0], base_tok), textcoords="offset points",
                        xytext=(0, -16), ha="center", fontsize=8, color=group[0][1] if len(group) == 1 else "black")
    if base_tok is not None:
        ax.axhline(base_tok, color=BASELINE_LINE, ls="--", lw=1.2,
                   label=f"baseline ({baseline['config']}): {base_tok:.1f} tok/s")
        ax.axhspan(base_tok, ymax, color="#2ca02c", alpha=0.06)
        ax.text(xmax * 0.02, base_tok * 1.02, "speculation pays", fontsize=8, color="#2ca02c", va="bottom")
    if any(r.get("cycle_time_ms") for r in pts):
        ax.plot([], [], ls=":", color="black", label="accept / cycle time (dotted)")
    if crossings:
        ax.plot([], [], "x", color="black", mew=2.5, label="break-even = cycle time x baseline tok/s")
    ax.set_xlim(0, xmax)
    ax.set_ylim(0, ymax)
    ax.set_xlabel("accept length (completion tokens / verify)")
    ax.set_ylabel("decode rate, tok/s (geometric mean of launch medians)")
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    ax.grid(alpha=0.3)


def plot_break_even(groups: list[Any], path: Path) -> str | None:
    """Decode tok/s against accept length per group (e.g. backend), one panel per point.

    Each group: its points with the 95% CI of the median, joined; the
    baseline's median as a horizontal line (its CI as a band); the measured
    crossing as a vertical line with its bootstrap interval shaded; the
    computed break-even (mean over the group) as an ``x`` on the baseline line.
    """
    title = "Break-even: decode tok/s against accept length\n(speculation pays right of each crossing)"
    groups = [g for g in groups if g.rows]
    if not groups:
        return _nothing(path, "no configurations that differ only in accept length (an axis over "
                              f"{SIMULATE_ACC_LEN} draws this curve)")
    points = sorted({g.point for g in groups}, key=lambda p: min(r["point_index"] for g in groups
                                                                   if g.point == p for r in g.rows))
    # The legend goes under the panels, never over a curve's points.
    fig, axes = plt.subplots(1, len(points), figsize=(max(8.5, 6.2 * len(points)), 6.0), squeeze=False,
                             layout="constrained")
    cmap = plt.get_cmap("tab10")
    legend: dict[str, Any] = {}
    for ax, point in zip(axes[0], points):
        drawn_base = False
        for i, g in enumerate(g for g in groups if g.point == point):
            c = cmap(i % 10)
            xs = [r["accept_length"] for r in g.rows]
            ys = [r[BASELINE_TOK_S] for r in g.rows]
            lo = [r[BASELINE_TOK_S] - (r.get(RATE_CI[0]) or r[BASELINE_TOK_S]) for r in g.rows]
            hi = [(r.get(RATE_CI[1]) or r[BASELINE_TOK_S]) - r[BASELINE_TOK_S] for r in g.rows]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color=c, capsize=3, label=g.label)
            if g.base is not None and not drawn_base:
                b = g.base
                ax.axhline(b[BASELINE_TOK_S], color=BASELINE_LINE, ls="--", lw=1.2,
                           label=f"baseline {b['config']}: {b[BASELINE_TOK_S]:.1f} tok/s")
                # Its value on the panel: the legend has one baseline entry for every panel.
                ax.annotate(f"{b[BASELINE_TOK_S]:.1f} tok/s", (1.0, b[BASELINE_TOK_S]),
                            xycoords=("axes fraction", "data"), textcoords="offset points", xytext=(-4, 3),
                            ha="right", va="bottom", fontsize=7)
                if b.get(RATE_CI[0]) is not None:
                    ax.axhspan(b[RATE_CI[0]], b[RATE_CI[1]], color="#000000", alpha=0.08)
                drawn_base = True
            cr, iv = g.crossing or {}, g.interval or {}
            if cr.get("x") is not None:
                ax.axvline(cr["x"], color=c, ls=":", lw=1.5)
                lo_x = iv.get("low") if iv.get("low") is not None else min(xs)
                hi_x = iv.get("high") if iv.get("high") is not None else max(xs)
                ax.axvspan(lo_x, hi_x, color=c, alpha=0.10)
                ax.annotate(f"crossing {cr['x']:.2f}", (cr["x"], g.base[BASELINE_TOK_S]),
                            textcoords="offset points", xytext=(4, 8 + 12 * i), fontsize=8, color=c)
            if g.computed and g.base is not None:
                ax.plot(g.computed_mean, g.base[BASELINE_TOK_S], "x", color=c, ms=11, mew=2.5)
        here = [g for g in groups if g.point == point]
        if any((g.crossing or {}).get("x") is not None for g in here):
            ax.plot([], [], ls=":", color="black", label="measured crossing (band: 95% interval)")
        if any(g.computed and g.base is not None for g in here):
            ax.plot([], [], "x", color="black", mew=2.5, label="computed: cycle time x baseline tok/s")
        panel = [r[BASELINE_TOK_S] for g in groups if g.point == point for r in g.rows]
        panel += [g.base[BASELINE_TOK_S] for g in groups if g.point == point and g.base is not None]
        top = CI_AXIS_FACTOR * max(panel)
        if ax.get_ylim()[1] > top:
            # An interval past the cut is drawn to the panel's edge; the note says so.
            ax.set_ylim(0, top)
            ax.annotate(f"intervals cut at {CI_AXIS_FACTOR:g}x the largest rate (too few launches)",
                        (0.01, 0.99), xycoords="axes fraction", ha="left", va="top", fontsize=7)
        ax.set_xlabel("accept length (completion tokens / verify)")
        ax.set_ylabel("decode rate, tok/s (95% interval)")
        ax.set_title(f"point {point}", fontsize=10)
        ax.grid(alpha=0.3)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            # one entry per group and kind; each panel's baseline has its own value: one entry, no number
            key = "baseline" if label.startswith("baseline ") else label
            legend.setdefault(key, (handle, label.split(":")[0] if key == "baseline" else label))
    handles, labels = zip(*legend.values())
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    _save(fig, path)
    return None


def plot_pareto(rows: list[dict[str, Any]], baseline: str | None, path: Path) -> str | None:
    """tok/s per user (the decode rate the verdicts judge) against tok/s per GPU over every point of every
    configuration; the frontier drawn.

    A configuration's points are joined in point order; the Pareto frontier
    (no other point better in both) is the step line.
    """
    pts = [r for r in rows if r.get(BASELINE_TOK_S) is not None and r.get("tok_s_per_gpu") is not None]
    if not pts:
        return _nothing(path, "no configuration has both a decode rate and tok/s per GPU")
    n_points = len({r["point"] for r in pts})
    title = ("Throughput per user (decode rate) against throughput per GPU, "
             + (f"across {n_points} workload points" if n_points > 1 else f"at one workload point ({pts[0]['point']})"))
    fig, ax = plt.subplots(figsize=(9, 6))
    configs = list(dict.fromkeys(r["config"] for r in pts))
    cmap = plt.get_cmap("tab10" if len(configs) <= 10 else "tab20")
    for i, config in enumerate(configs):
        mine = sorted((r for r in pts if r["config"] == config), key=lambda r: r["point_index"])
        c = BASELINE_LINE if config == baseline else cmap(i % cmap.N)
        ax.plot([r[BASELINE_TOK_S] for r in mine], [r["tok_s_per_gpu"] for r in mine], "o-", color=c, ms=5,
                lw=2 if config == baseline else 1, label=config + (" (baseline)" if config == baseline else ""))
        for r in mine:
            if r["point"] != "default":
                ax.annotate(r["point"], (r[BASELINE_TOK_S], r["tok_s_per_gpu"]), textcoords="offset points",
                            xytext=(4, 3), fontsize=7, color=c)
    frontier = []
    for r in sorted(pts, key=lambda r: (-r[BASELINE_TOK_S], -r["tok_s_per_gpu"])):
        if not frontier or r["tok_s_per_gpu"] > frontier[-1]["tok_s_per_gpu"]:
            frontier.append(r)
    if len(frontier) > 1:  # a frontier of one point is no line: it is not drawn, nor listed
        ax.step([r[BASELINE_TOK_S] for r in frontier], [r["tok_s_per_gpu"] for r in frontier], where="post",
                color="#2ca02c", lw=2.5, alpha=0.5, label="Pareto frontier")
    unit = {r.get("device_kind") for r in pts}
    ax.set_xlabel("tok/s per user: decode rate (per request: tokens after the first / decode time)")
    ax.set_ylabel("tok/s per GPU (aggregate / GPUs)" if unit == {"gpu"}
                  else "tok/s per device (aggregate / GPUs, or TP ranks on CPU)")
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncol=2, framealpha=0.9)
    _save(fig, path)
    return None
