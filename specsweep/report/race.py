"""The race's answer (report.json's ``race``, ``analysis.race``) as report.md's section and its figure.

Nothing is computed here: the winner, the verdicts, the history, the rounds' standings and the launches
are report.json's.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.analysis.race import DROPPED, FAILED, LEADING, RACING, SCREENED, TIED, WON, ratio_to_best
from specsweep.report.linked import Context, Linked
from specsweep.report.markdown import f, table_head, table_row

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from specsweep.report import plots  # noqa: E402
from specsweep.report.plots import _nothing  # noqa: E402

OUTCOME_COLORS = {WON: "#2ca02c", LEADING: "#2ca02c", TIED: "#1f77b4", RACING: "#7f7f7f", DROPPED: "#d62728",
                  FAILED: "#000000", SCREENED: "#ff7f0e"}


def _pct(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:g} %"


def _interval(entry: Mapping[str, Any] | None) -> str:
    """best / it with its Holm-step interval, ``x1.412 [1.301, 1.533]``."""
    if not entry or entry.get("ratio") is None:
        return "n/a"
    lo, hi = entry.get("ratio_ci") or (None, None)
    return f"x{entry['ratio']:.3f} [{f(lo, '{:.3f}')}, {f(hi, '{:.3f}')}]"


def _headline(race: Mapping[str, Any]) -> str:
    winner = race["winner"]
    last = race["rounds"][-1]["round"] if race["rounds"] else "?"
    if winner is None:
        return f"No winner: {race['why']}.\n\n"
    if race["tied_with"]:
        return (f"**Tie** after round {last}: **{winner}** and {', '.join(race['tied_with'])} are within "
                f"{_pct(race['smallest_effect'])} of each other: one answer, any of them ({race['why']}).\n\n")
    if race["decided"]:
        return f"**Winner: {winner}** ({race['why']}).\n\n"
    return (f"**No winner yet**: the race ended by **{race['ended_by']}** after round {last} with "
            f"{', '.join(race['rounds'][-1]['survivors'])} still racing; the best so far is **{winner}** "
            f"({race['why']}). Run again with a larger budget (rounds.max_launches, rounds.max_minutes), it "
            "continues where it stopped; nothing measured is run again.\n\n")


def screen_lines(screen: Mapping[str, Any] | None) -> str:
    """The screen before the race: the margin, what was set aside, each prediction (or why nothing was)."""
    if not screen:
        return ""
    out = io.StringIO()
    settings = ", ".join(f"`{s}`" for s in screen["settings"])
    if screen["validated"]:
        aside = ", ".join(screen["set_aside"]) or "none"
        out.write(f"Screened by the cost model before any launch (communication setting: {settings}): "
                  f"**set aside: {aside}**. Margin: the model's error on this host is {_pct(screen['margin'])} "
                  f"(the largest |residual| of {len(screen['error_from'])} measured configurations), so a "
                  f"configuration predicted more than {screen['threshold'] * 100:.1f} % slower than the predicted "
                  f"best ({screen['best']}) was set aside.\n\n")
    else:
        out.write(f"Screened by the cost model (communication setting: {settings}): **nothing set aside**: "
                  f"{screen['why']}.\n\n")
    out.write(table_head(["configuration", "predicted from", "all-reduce us", "predicted step ms",
                          "predicted tok/s", "slower than the predicted best", "screen"]))
    for p in screen["predictions"]:
        out.write(table_row([p["config"], p["measured_from"] or "none", f(p["latency_us"], "{:.1f}"),
                             f(p["predicted_ms"], "{:.2f}"), f(p["predicted_tok_s"], "{:.1f}"),
                             "" if p["slower_by"] is None else f"{p['slower_by'] * 100:+.1f} %",
                             "set aside" if p["set_aside"] else (p["why"] or "kept")]))
    out.write("\n")
    return out.getvalue()


def check_lines(check: list[Mapping[str, Any]] | None, winner: str | None) -> str:
    """The screen's check run (``screen.check``): each set-aside configuration's prediction against its launch."""
    if not check:
        return ""
    launched = [c for c in check if c["launches"]]
    out = io.StringIO()
    if not launched:
        out.write("Screen check: none of the set-aside configurations was launched (`screen.check: false`), so "
                  "whether they really were slower is not known.\n\n")
        return out.getvalue()
    slower = [c for c in launched if c["really_slower"]]
    out.write(f"Screen check (`screen.check`): every set-aside configuration launched once anyway, outside the race: "
              f"**{len(slower)} of {len(check)} really slower than the winner ({winner})** by their measured "
              "decode rate (one launch each: a point estimate). Off by: (measured - predicted) / measured, "
              "measured the way the model predicts (tokens per step / the measured step).\n\n")
    out.write(table_head(["configuration", "launches", "predicted tok/s", "measured tok/s", "off by",
                          "decode tok/s", f"slower than {winner}", "really slower?", f"verdict of {winner}"]))
    for c in check:
        really = {True: "yes", False: "**no**", None: "n/a"}[c["really_slower"]]
        out.write(table_row([c["config"], str(c["launches"]), f(c["predicted_tok_s"], "{:.1f}"),
                             f(c["measured_tok_s"], "{:.1f}"),
                             "n/a" if c["off_by"] is None else f"{c['off_by'] * 100:+.1f} %",
                             f(c["decode_rate"], "{:.1f}"),
                             "n/a" if c["slower_by"] is None else f"{c['slower_by'] * 100:+.1f} %",
                             really + (f" ({c['why']})" if c["why"] else ""), c["verdict"] or "none"]))
    out.write("\n")
    return out.getvalue()


def cost_lines(cost: Mapping[str, Any]) -> str:
    """The launches the race spent against the full design's (every configuration, the set-aside ones included),
    and the check run's apart."""
    checked = cost.get("checked") or {}
    check = (f" (and {cost['check_spent']} more launching the {len(checked)} set-aside configurations to check "
             "the screen, not the race's)" if checked else "")
    if not cost["full_design"]:
        return f"Launches: **{cost['spent']}** spent{check}; the full design's cannot be given ({cost['why']}).\n\n"
    aside = cost.get("screened_out") or []
    configs = len(cost["per_configuration"]) + len(aside)
    return (f"Launches: **{cost['spent']}** spent{check}, against **{cost['full_design']}** for the full design "
            f"(every one of the {configs} configurations"
            + (f", the {len(aside)} screened out included," if aside else "")
            + f" in {cost['full_design'] // max(1, configs)} launches: "
            f"{cost['launches_needed']} see {_pct(cost['smallest_effect'])} with 80 % power at this run's launch "
            f"variance), {cost['spent'] / cost['full_design'] * 100:.0f} % of it.\n\n")


def race_section(ctx: Context) -> str:
    """## Race: the answer, what it cost against the full design, each configuration's history."""
    race = ctx.report.data.get("race")
    if not race:
        return ""
    out = io.StringIO()
    out.write(f"## Race (at point {race['point']})\n\n")
    out.write(_headline(race))
    out.write(screen_lines(race.get("screen")))
    out.write(check_lines(race.get("screen_check"), race["winner"]))
    out.write(cost_lines(race["launches"]))
    against = {a["config"]: a for a in race["against"]}
    out.write(table_head(["configuration", "race", "decode tok/s", "winner / it (Holm 95 %)",
                          f"verdict of {race['winner']}"]))
    for h in race["history"]:
        row = ctx.report.by_key.get((h["config"], race["point"])) or {}
        when = f" in round {h['round']}" if h["outcome"] in (DROPPED, FAILED) and h["round"] else ""
        a = against.get(h["config"])
        verdict = "(winner)" if h["config"] == race["winner"] else (a["verdict"] if a else "not compared")
        if h["outcome"] == SCREENED:
            when = f" (predicted {h['verdict']['slower_by'] * 100:+.1f} %)"
            verdict = f"{verdict} (the screen's check)" if row else "never launched"
        out.write(table_row([h["config"], h["outcome"] + when, f(row.get(BASELINE_TOK_S)),
                             "" if h["config"] == race["winner"] else _interval(a), verdict]))
    figure = ctx.figures.get("race", "not drawn")
    if figure is None:
        out.write(f"\n![race]({ctx.plots_rel}/{ctx.plot_files['race']})\n")
    out.write(f"\nMethod: {race['method']}.\n\n")
    if race.get("screen"):
        out.write(f"Screen: {race['screen']['method']}.\n\n")
    return out.getvalue()


def _label_ends(ax: Any, labels: list[tuple[float, float, str, str]]) -> None:
    """Each line's name beside its last point, moved apart vertically where names ending in the same round would
    overlap (at least 3.2 % of the y-range apart), with a thin leader line to the point when moved."""
    lo, hi = ax.get_ylim()
    gap = 0.032 * (hi - lo)
    shift = 0.012 * (ax.get_xlim()[1] - ax.get_xlim()[0])  # the name's distance right of its point
    by_round: dict[int, list[tuple[float, float, str, str]]] = {}
    for x, y, name, color in labels:
        by_round.setdefault(round(x), []).append((x, y, name, color))
    lowest = lo
    for group in by_round.values():
        placed: list[float] = []
        for x, y, name, color in sorted(group, key=lambda g: -g[1]):  # top down
            at = min(y, placed[-1] - gap) if placed else y
            placed.append(at)
            lowest = min(lowest, at - gap)
            ax.annotate(name, (x, y), xytext=(x + shift, at), textcoords="data", fontsize=8, va="center",
                        color=color, arrowprops={"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.6}
                        if abs(at - y) > gap / 4 else None)
    ax.set_ylim(lowest, hi)  # room for names moved below the lowest point


def plot_race(report: Linked, path: Path) -> str | None:
    """Each configuration's decode rate relative to the best of each round (1 / ``ratio``, with its Holm-step
    interval, cut at 1.5, in the rounds whose judgement drops) against the round; a dropped configuration's line
    ends with an x in the round it was dropped; the tie band [1 / (1 + e), 1] shaded. A round with no best (nothing
    comparable yet) has no points; a planned round before the last one has points only: its judgement drops
    nothing, and its intervals (one launch a configuration, no round blocks yet) would span the figure."""
    race = report.data.get("race")
    if not race or not race["rounds"]:
        return _nothing(path, "no race ran (rounds.mode: sweep)")
    outcome = {h["config"]: h["outcome"] for h in race["history"]}
    fig, ax = plt.subplots(figsize=(10, 4.8))
    xs = [s["round"] for s in race["rounds"]]
    effect = race["smallest_effect"] or 0.0
    ax.axhspan(1 / (1 + effect), 1.0, color="#1f77b4", alpha=0.12,
               label=f"within {_pct(effect)} of the best\n(survivors all in it: a tie)")
    ax.axhline(1.0, color="black", lw=0.8)
    lowest, highest = 1.0, 1.0
    labels: list[tuple[float, float, str, str]] = []  # (x, y, name, color) of each line's end
    for k, config in enumerate(sorted(outcome)):
        pts, los, his = [], [], []
        for s in race["rounds"]:
            if config == s["best"]:
                pts.append((s["round"], 1.0))
                continue
            entry = next((a for a in s["against"] if a["config"] == config), None)
            if entry is None:
                continue
            r, ci = ratio_to_best(entry)
            if r is None:
                continue
            pts.append((s["round"], r))
            if ci and s.get("dropping", True):  # a planned round before the last one judges nothing: point only
                los.append((s["round"], r - ci[0]))
                his.append((s["round"], ci[1] - r))
                highest = max(highest, ci[1])
        if not pts:
            continue
        color = OUTCOME_COLORS.get(outcome[config], "#7f7f7f")
        dx = (k - len(outcome) / 2) * 0.03  # side by side, so intervals do not hide each other
        ax.plot([p[0] + dx for p in pts], [p[1] for p in pts], "-o", color=color, ms=4,
                lw=2.2 if outcome[config] in (WON, LEADING) else 1.0, alpha=0.9)
        if los:
            lo = dict(los)
            hi = dict(his)
            rx = [p for p in pts if p[0] in lo]
            ax.errorbar([p[0] + dx for p in rx], [p[1] for p in rx], yerr=[[lo[p[0]] for p in rx],
                        [hi[p[0]] for p in rx]], fmt="none", ecolor=color, alpha=0.5, capsize=2)
        last = pts[-1]
        lowest = min(lowest, min(p[1] for p in pts))
        if outcome[config] == DROPPED:
            ax.plot([last[0] + dx], [last[1]], "x", color=color, ms=10, mew=2)
        labels.append((last[0] + dx, last[1], config, color))
    keys = [(f"{WON} / {LEADING}", OUTCOME_COLORS[WON]), (TIED, OUTCOME_COLORS[TIED]),
            (f"{DROPPED} (x: the round)", OUTCOME_COLORS[DROPPED]), (RACING, OUTCOME_COLORS[RACING])]
    if FAILED in outcome.values():  # a launch that failed: out of the race, drawn up to its last comparison
        keys.append((FAILED, OUTCOME_COLORS[FAILED]))
    for name, color in keys:
        ax.plot([], [], "-o", color=color, label=name, ms=4)
    ax.set_xticks(xs)
    ax.set_xlim(min(xs) - 0.4, max(xs) + 0.9)
    ax.set_ylim(max(0.0, lowest - 0.08), min(highest, 1.5) + 0.04)
    _label_ends(ax, labels)
    ax.set_xlabel("round (judged after it)")
    ax.set_ylabel("decode rate / the round's best")
    ax.set_title(f"Race: {race['winner']} {'won' if race['decided'] else 'leads'} "
                 f"({race['ended_by']}); {race['launches']['spent']} launches"
                 + (f" of {race['launches']['full_design']} for the full design"
                    if race["launches"]["full_design"] else ""), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    plots._save(fig, path)  # through the module: one place saves every figure (and tests keep them)
    return None
