"""The sweep parts of the report: A/A control, launches, break-even curves, points, grids.

Everything here reads the rows of ``report.render.config_rows`` (one per
configuration and workload point) and the summary files' launch sections;
nothing is measured or recomputed from records.

* The rule and the controls (``control_lines``): the report's first lines.
  The rule the verdicts use (the model at each point, ``analysis.blocks``:
  rounds as blocks, or the one-way pooled variance; the threshold and the
  smallest difference the design sees), a trend over start time or a slow
  first launch where one is named (``trend_lines``), the A/A control
  (the baseline launched again at the end of the sweep: it must not be
  called) and the positive control (a configuration with a known injected
  slowdown: it must be called slower than its twin).
* Launches (``launch_lines``, ``launch_table``): how many launches, how long,
  and whether they ran in the planned interleaved order (from ``started_at``).
* Break-even curves (``break_even_groups``): rows at one point that differ
  only in ``SGLANG_SIMULATE_ACC_LEN``, one group per everything else (e.g. per
  communication backend); the measured crossing of the baseline
  (``analysis.curves``) next to the computed break-even (cycle time x
  baseline decode tok/s) of its members.
* Points (``concurrency_table``): tok/s per user and per GPU against the
  point, with the baseline at the same point.
* Grids (``best_of_grids``): the winner of each grid with the evidence it won
  by (its decode verdict against every other member).
"""

from __future__ import annotations

import io
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specsweep.analysis.curves import CROSSING_METHOD, crossing, crossing_interval
from specsweep.analysis.metrics import BASELINE_TOK_S, PRIMARY_VERDICT
from specsweep.analysis.stats import Noise, called_beyond, detectable, holm_family, launches_needed
from specsweep.contracts.vocabulary import CALLED, Status, Verdict
from specsweep.files import canonical_json
from specsweep.records import DEFAULT_POINT, is_external

#: Pairwise verdicts are listed when a point has at most this many ok configurations besides the baseline.
PAIRWISE_MAX = 6


def _f(v: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f} %"


def row_label(row: Mapping[str, Any]) -> str:
    """``config`` or ``config @ point`` (a configuration with several points)."""
    return row["config"] if row["point"] == "default" else f"{row['config']} @ {row['point']}"


# ---------------------------------------------------------- the rule and the controls


def _units(row: Mapping[str, Any], noise: Noise) -> int | None:
    sample = (row.get("verdict_samples") or {}).get(PRIMARY_VERDICT)
    return len(sample.groups(by_repeat=noise.unit == "round")) if sample is not None else None


def _point_rows(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["point_index"]):
        by.setdefault(r["point"], []).append(r)
    return list(by.values())


def rule_line(members: Sequence[dict[str, Any]], baseline: str | None, smallest_effect: float | None) -> str:
    """The rule the verdicts at one point use, with the threshold and the smallest difference it sees."""
    noise: Noise = members[0]["noise"][PRIMARY_VERDICT]
    if noise.var is None:
        return ("no verdicts: nothing was replicated (one launch and one round per configuration), so there is no "
                "variance to judge a difference by")
    if noise.unit == "round":
        return (f"**no configuration was launched twice, so the launch effect is unknown: the verdicts judge by the "
                f"rounds within launches (SD {_pct(noise.sd)}, {noise.df} degrees of freedom), and a "
                "launch-to-launch difference would be called as a real one** (set `launches: 2` or more, or keep "
                "the A/A control)")
    base = next((r for r in members if r["config"] == baseline), None)
    fit = (members[0].get("blocks") or {}).get(PRIMARY_VERDICT)
    blocked = fit is not None and fit.blocked

    def units(r: Mapping[str, Any]) -> int | None:
        return fit.launches_of(r["config"]) if blocked else _units(r, noise)

    others = [u for u in (units(r) for r in members if r["config"] != baseline) if u]
    typical = int(statistics.median(others)) if others else 1
    base_units = (units(base) if base is not None else None) or typical
    beyond = called_beyond(noise, typical, base_units)
    sees = detectable(noise, typical, base_units)
    pooled = (f"the launch-to-launch variance left by the model with the round as a block ({fit.describe()}; the "
              "A/A control a level of its own)" if blocked else
              f"the launch-to-launch variance pooled over {noise.units} launches of {noise.sides} configurations "
              "(the A/A control's included" + (f"; one-way model: {fit.why})" if fit is not None else ")"))
    text = (f"{pooled} is an SD of {_pct(noise.sd)} ({noise.df} degrees of freedom): a "
            f"configuration of {typical} launch{'es' if typical > 1 else ''} against the baseline's {base_units} is "
            f"called beyond +-{_pct(beyond)}, and the smallest difference this design sees with 80 % power is "
            f"{_pct(sees)}")
    if smallest_effect:
        if sees is not None and sees <= smallest_effect:
            text += f"; the {_pct(smallest_effect)} asked for is resolved"
        else:
            need = launches_needed(noise, smallest_effect)
            share = (noise.request_var / noise.var) if noise.request_var is not None and noise.var else None
            text += (f"; to resolve the {_pct(smallest_effect)} asked for, {need} launches per configuration would "
                     "be needed" + (f" (request noise is {share:.0%} of the launch variance: more requests per "
                                    "launch cut only that part, more launches cut all of it)" if share is not None
                                    else ""))
    return text


def control_lines(rows: Sequence[dict[str, Any]], baseline: str | None, aa_planned: bool,
                  positive: Mapping[str, Any] | None, smallest_effect: float | None, compare: Any) -> str:
    """The report's first lines: the rule the verdicts use, what the A/A control found (it must not be
    called), and what the positive control found (it must be called slower than its twin)."""
    out = io.StringIO()
    points = _point_rows(rows)
    if not points:
        return ""
    many = len(points) > 1
    if many:
        out.write("**Verdicts are on the decode rate, called when the 95 % interval of the ratio excludes 1.**\n\n")
        for members in points:
            out.write(f"- At point {members[0]['point']}: {rule_line(members, baseline, smallest_effect)}.\n")
        out.write("\n")
    else:
        out.write("**Verdicts are on the decode rate, called when the 95 % interval of the ratio excludes 1:** "
                  f"{rule_line(points[0], baseline, smallest_effect)}.\n\n")
    out.write(trend_lines(points))
    out.write(aa_lines(rows, baseline, aa_planned))
    out.write(positive_lines(rows, positive, smallest_effect, compare))
    return out.getvalue()


def trend_lines(points: Sequence[Sequence[dict[str, Any]]]) -> str:
    """A trend of the decode rate over start time, and a first launch off the model, where named
    (``blocks.trend``, ``blocks.cold_start``; ``row["trend"]`` and ``row["cold_start"]``): empty otherwise."""
    lines = []
    for members in points:
        where = "" if len(points) == 1 else f" at point {members[0]['point']}"
        for key, label in (("trend", "Trend"), ("cold_start", "Cold start")):
            found = members[0].get(key) or {}
            if found.get("named"):
                lines.append(f"- {label}{where}: {found['text']}.\n")
    return "".join(lines) + ("\n" if lines else "")


def aa_lines(rows: Sequence[dict[str, Any]], baseline: str | None, aa_planned: bool) -> str:
    """The A/A control at every point: the baseline's control launch against its first launch."""
    base_rows = [r for r in rows if r["config"] == baseline]
    if baseline is None or not base_rows:
        return "A/A control: none (no baseline): no verdict is called.\n\n"
    if not any(r.get("aa") for r in base_rows):
        why = "disabled (aa_control: false)" if not aa_planned else "no control launch ended ok"
        return f"A/A control: {why}: the same configuration was not launched twice at the end of the sweep.\n\n"
    out = io.StringIO()
    # An external baseline is never relaunched: its control is a later round against the same server.
    external = is_external(base_rows[0].get("plan") or {})
    again = ("measured again at the end of the sweep, in a later round against the same running server (not "
             "relaunched)" if external else "launched again at the end of the sweep")
    twice = "measured twice" if external else "launched twice"
    for r in base_rows:
        where = "" if r["point"] == "default" else f" at point {r['point']}"
        aa = r.get("aa")
        if not aa:
            out.write(f"- A/A control{where}: no control launch ended ok.\n")
            continue
        comp = aa["comparison"]
        judged = (f"x{comp['ratio']:.3f} [{comp['ratio_ci'][0]:.3f}, {comp['ratio_ci'][1]:.3f}], called beyond "
                  f"+-{_pct(comp['threshold'])}" if "ratio" in comp else comp.get("note", "no interval"))
        if comp.get("model") == "blocked" and "ratio" in comp:
            judged += f"; judged against all of {baseline}'s launches, round effects removed"
        called = comp["verdict"] in CALLED
        verdict = (f"**CALLED {comp['verdict']}: the same configuration {twice} differed beyond the launch "
                   "variance this sweep measured (the machine drifted during the sweep, or launches differ more "
                   "than the model allows): read every verdict with care**" if called
                   else f"{comp['verdict']}, as it must be")
        sd = r["noise"][PRIMARY_VERDICT].sd
        if not called and sd is not None and abs(math.log1p(aa["drift"])) > sd:
            verdict += (" (its drift is larger than the pooled launch SD of "
                        f"{_pct(sd)}: the machine changed during the sweep, and every threshold is wide for it)")
        out.write(f"- A/A control{where}: {baseline} {again} (launch "
                  f"{aa['control']}) against its launch {aa['first']}: {_f(aa['launch_medians'][aa['first']])} vs "
                  f"{_f(aa['launch_medians'][aa['control']])} decode tok/s (drift {aa['drift'] * 100:+.1f} %): "
                  f"{verdict} ({judged}).\n")
    return out.getvalue() + "\n"


def external_lines(rows: Sequence[dict[str, Any]]) -> str:
    """What runtime external means for reading the results (empty when no configuration used it)."""
    urls = {r["config"]: (r.get("plan") or {}).get("url") for r in rows if is_external(r.get("plan") or {})}
    if not urls:
        return ""
    named = ", ".join(f"{c} ({u})" for c, u in sorted(urls.items()))
    return (f"External servers: {named} ran without this workflow, which attached to them (runtime external). "
            "Launch noise and the host lock do not apply to them: nothing was launched, so no launch-to-launch "
            "effect of their own exists to measure, and the one-server-per-host lock was not taken (nor the check "
            "that no other server ran on their host). Their launches are measurement rounds against the same "
            "running server, and an A/A control of such a baseline measures drift over the sweep, not a "
            "relaunch. What they run is what their /server_info said (each launch.json's server_info).\n\n")


def positive_lines(rows: Sequence[dict[str, Any]], positive: Mapping[str, Any] | None,
                   smallest_effect: float | None, compare: Any) -> str:
    """The positive control at every point: the slowed copy against its twin; it must be called slower."""
    if not positive:
        return ("Positive control: none (`positive_control` not set): whether the sweep sees a known effect is "
                "untested.\n\n")
    name, of, slowdown = positive["name"], positive["of"], float(positive["slowdown"])
    out = io.StringIO()
    for members in _point_rows(rows):
        by = {r["config"]: r for r in members}
        where = "" if members[0]["point"] == "default" else f" at point {members[0]['point']}"
        head = f"- Positive control{where}: {name} ({of} with every engine step slowed by {_pct(slowdown)})"
        control, twin = by.get(name), by.get(of)
        if control is None or twin is None or control["status"] != Status.OK or twin["status"] != Status.OK:
            bad = [f"{n}: {by[n]['status'] if n in by else 'no summary'}" for n in (name, of)
                   if n not in by or by[n]["status"] != Status.OK]
            out.write(f"{head}: not judged ({', '.join(bad)}).\n")
            continue
        v = compare(control, twin)
        if "ratio" not in v:
            out.write(f"{head}: {v['verdict']}.\n")
            continue
        judged = (f"x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}] against {of}, expected "
                  f"x{1 / (1 + slowdown):.3f}, called beyond +-{_pct(v['threshold'])}")
        if v["verdict"] == Verdict.SLOWER:
            out.write(f"{head}: called slower, as it must be ({judged}): this sweep sees a {_pct(slowdown)} "
                      "slowdown.\n")
        else:
            need = launches_needed(twin["noise"][PRIMARY_VERDICT], slowdown)  # |log ratio| = log(1 + slowdown)
            out.write(f"{head}: **NOT called slower ({v['verdict']}; {judged}): this sweep cannot see a "
                      f"{_pct(slowdown)} effect**" + (f"; {need} launches per configuration would (80 % power)"
                                                       if need else "") + ".\n")
    return out.getvalue() + "\n"


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_LAUNCH_PREFIX = re.compile(r"^launch (?P<launch>[a-z0-9]+): ")
_SLOT = "\x00"  # where a number was, in a warning's template


def warning_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The report's warnings, one line per kind: the same message with other numbers (e.g. the host's
    load during each launch) is one line, with the range of each number, how often it was seen and
    where (configuration, its points and launches); a message seen once stays as it is."""
    groups: dict[str, list[tuple[dict[str, Any], str | None, list[float], str]]] = {}
    for r in rows:
        for msg in r["warnings"]:
            m = _LAUNCH_PREFIX.match(msg)
            text = msg[m.end():] if m else msg
            groups.setdefault(_NUMBER.sub(_SLOT, text), []).append(
                (r, m["launch"] if m else None, [float(x) for x in _NUMBER.findall(text)], msg))
    out = []
    for template, seen in groups.items():
        if len(seen) == 1:
            r, _, _, msg = seen[0]
            out.append(f"{row_label(r)}: {msg}")
            continue
        values = iter(zip(*(nums for _, _, nums, _ in seen)))

        def span(_: re.Match) -> str:
            column = next(values)
            lo, hi = min(column), max(column)
            return _g(lo) if lo == hi else f"{_g(lo)}-{_g(hi)}"

        where: dict[str, list[str]] = {}
        for r, launch, _, _ in seen:
            place = " ".join(p for p in ("" if r["point"] == DEFAULT_POINT else r["point"],
                                         f"launch {launch}" if launch else "") if p)
            where.setdefault(r["config"], []).append(place)
        places = "; ".join(c + (f" ({', '.join(p for p in ps if p)})" if any(ps) else "") for c, ps in where.items())
        out.append(f"{len(seen)} x {re.sub(_SLOT, span, template)}: {places}")
    return out


def _g(value: float) -> str:
    return f"{value:g}"


# ------------------------------------------------------------------ launches


def launch_entries(files: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every launch of every summary file, with its configuration, sorted by start time."""
    out = [dict(entry, config=f["config"]) for f in files for entry in f.get("launches") or []]
    return sorted(out, key=lambda e: (e.get("started_at") is None, e.get("started_at") or 0.0))


def order_check(entries: Sequence[Mapping[str, Any]], planned: Sequence[Sequence[str]] | None) -> str:
    """Whether the launches ran in the planned order (a sentence)."""
    if not planned:
        return "planned order unknown"
    ran = [(e["config"], e["launch"]) for e in entries if e.get("started_at") is not None]
    planned_ran = [tuple(p) for p in planned if tuple(p) in set(ran)]
    if ran == planned_ran:
        return "in the planned interleaved order (round by round, each round in its seeded order)"
    first_bad = next(i for i, (a, b) in enumerate(zip(ran, planned_ran)) if a != b) if len(ran) == len(
        planned_ran) else 0
    return (f"NOT in the planned order from launch #{first_bad + 1} on (ran {ran[first_bad][0]}/{ran[first_bad][1]}, "
            f"planned {planned_ran[first_bad][0]}/{planned_ran[first_bad][1]}); launches of a configuration rerun "
            "alone run when Snakemake reaches them")


def launch_lines(files: Sequence[Mapping[str, Any]], planned: Sequence[Sequence[str]] | None) -> str:
    """Launch count and time: what replication cost on this machine."""
    entries = launch_entries(files)
    if not entries:
        return ""
    walls = [e["wall_s"] for e in entries if e.get("wall_s") is not None]
    readies = [e["ready_s"] for e in entries if e.get("ready_s") is not None]
    configs = {e["config"] for e in entries}
    starts = [e["started_at"] for e in entries if e.get("started_at") is not None]
    ends = [e["ended_at"] for e in entries if e.get("ended_at") is not None]
    span = f"; first start to last end {(max(ends) - min(starts)) / 60:.1f} min" if starts and ends else ""
    return (f"Launches: {len(entries)} server launches of {len(configs)} configurations, "
            f"{sum(walls) / 60:.1f} min of server time in all (median {_f(statistics.median(walls) if walls else None)}"
            f" s per launch, of which {_f(statistics.median(readies) if readies else None)} s until ready){span}; "
            f"ran {order_check(entries, planned)}.\n\n")


def launch_table(files: Sequence[Mapping[str, Any]], rounds: Mapping[str, Any] | None = None) -> str:
    """Every launch in the order it started, with its round and its place in the round's seeded order."""
    entries = launch_entries(files)
    if not entries:
        return ""
    place = {(c, lid): (plan["round"], k) for plan in (rounds or {}).get("plans") or []
             for k, (c, lid) in enumerate(plan["order"], 1)}
    out = io.StringIO()
    out.write("## Launches\n\nIn the order they started; *round / place*: the launch's round and its place in "
              "that round's seeded order.\n\n| # | config | launch | round / place | status | ready s | wall s |\n"
              "|---|---|---|---|---|---|---|\n")
    for i, e in enumerate(entries, 1):
        name = f"{e['launch']} (A/A control)" if e.get("control") else e["launch"]
        status = e["status"] if e["status"] == Status.OK else f"{e['status']} ({e.get('stage')}: {e.get('reason')})"
        where = place.get((e["config"], e["launch"]))
        cell = f"{where[0]} / {where[1]}" if where else "n/a"
        out.write(f"| {i} | {e['config']} | {name} | {cell} | {status} | {_f(e.get('ready_s'))} | "
                  f"{_f(e.get('wall_s'))} |\n")
    return out.getvalue() + "\n"


def burn_in_line(record: Mapping[str, Any] | None) -> str:
    """The burn-in before round 1: its units' decode rates, how long it took and whether it settled."""
    if not record:
        return "Burn-in: none recorded (off, or this report's round 1 ran in an earlier invocation without one)."
    rates = ", ".join(_f(u.get("decode_tok_s")) for u in record.get("units") or [])
    state = (f"steady (within {record['tolerance']:.0%} of the unit before)" if record.get("steady")
             else f"NOT steady after {len(record.get('units') or [])} units: the host kept changing")
    return (f"Burn-in: {len(record.get('units') or [])} unmeasured launches of {record.get('config')} in "
            f"{_f(record.get('wall_s'))} s, decode tok/s per unit {rates}: {state}; it enters no verdict.")


def design_lines(design: Mapping[str, Any] | None, rounds: Mapping[str, Any] | None) -> str:
    """How the launches were grouped and ordered, how many rounds ran and what ended them, the burn-in."""
    if not design:
        return ""
    judgements = (rounds or {}).get("judgements") or []
    last = judgements[-1] if judgements else None
    seed = (design.get("rounds") or {}).get("seed")
    out = [f"Design: **{design['design']}** ({design['why']}); launches in rounds, each round in a seeded random "
           f"order (rounds.seed {seed}), the round a block of the verdicts."]
    if last is not None:
        out.append(f"Rounds: {len(judgements)} ran; they ended by **{last.get('ended_by') or 'n/a'}**: "
                   f"{last.get('why')}.")
    first = judgements[0] if judgements else None
    out.append(burn_in_line(first.get("burn_in") if first else None))
    return "\n".join(f"- {line}" for line in out) + "\n\n"


# ------------------------------------------------------------ break-even curves


@dataclass
class CurveGroup:
    """Rows at one point differing only in accept length: one break-even curve."""

    label: str
    point: str
    rows: list[dict[str, Any]]
    base: dict[str, Any] | None
    crossing: dict[str, Any] | None = None
    interval: dict[str, Any] | None = None
    computed: list[float] = field(default_factory=list)

    @property
    def computed_mean(self) -> float | None:
        return statistics.fmean(self.computed) if self.computed else None


def _facts(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the engine said the row's plan settings mean (``contracts.plan.FACT_KEYS``)."""
    return (row.get("plan") or {}).get("facts") or {}


def _acc_value(row: Mapping[str, Any]) -> float | None:
    """The accept length the engine simulated (None: it did not)."""
    return _facts(row).get("simulated_accept_length")


def acc_setting(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The setting that fixes the simulated accept length (``env.<VAR>``, as a grid axis names it), by the rows'
    engines."""
    return next((s for r in rows if (s := _facts(r).get("simulated_accept_length_setting"))), None)


def _group_key(row: Mapping[str, Any]) -> str:
    plan = dict(row.get("plan") or {})
    section, _, key = (_facts(row).get("simulated_accept_length_setting") or "").partition(".")
    for gone in ("name", "points", "facts"):  # facts follow from the settings; the accept length is the x axis
        plan.pop(gone, None)
    if key:
        plan[section] = {k: v for k, v in (plan.get(section) or {}).items() if k != key}
    return canonical_json({"plan": plan, "workload": row.get("workload")})


def _grid_label(names: Sequence[str], grids: Mapping[str, Any], acc_key: str | None) -> str:
    for grid_name, grid in grids.items():
        members = grid["members"]
        if all(n in members for n in names):
            keys = [k for axis in grid["axes"] for k in axis["keys"] if k != acc_key]
            values = members[names[0]]
            if keys:
                return f"{grid_name} [" + ", ".join(f"{k.split('.', 1)[1]}={values[k]}" for k in keys) + "]"
            return grid_name
    return " / ".join(names)


def break_even_groups(rows: Sequence[dict[str, Any]], grids: Mapping[str, Any], seed: int = 0,
                      n_resamples: int | None = None) -> list[CurveGroup]:
    """Break-even curves: ok speculative rows grouped by everything but the accept length (>= 2 distinct values)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == Status.OK and r["spec"] and _acc_value(r) is not None and r["accept_length"] is not None:
            by.setdefault(_group_key(r), []).append(r)
    groups = []
    for members in by.values():
        if len({_acc_value(r) for r in members}) < 2:
            continue
        members = sorted(members, key=lambda r: r["accept_length"])
        base = members[0].get("base_row")
        group = CurveGroup(label=_grid_label([r["config"] for r in members], grids, acc_setting(members)),
                           point=members[0]["point"],
                           rows=members, base=base if base is not None and base["status"] == Status.OK else None)
        group.computed = [r["break_even_accept_length"] for r in members if r["break_even_accept_length"] is not None]
        usable = [r for r in members if r[BASELINE_TOK_S] is not None]
        if group.base is not None and group.base[BASELINE_TOK_S] is not None and len(usable) >= 2:
            xs = [r["accept_length"] for r in usable]
            group.crossing = crossing(xs, [r[BASELINE_TOK_S] for r in usable], group.base[BASELINE_TOK_S])
            kwargs = {} if n_resamples is None else {"n_resamples": n_resamples}
            noise = group.base["noise"][PRIMARY_VERDICT]
            group.interval = crossing_interval(
                xs, [r[BASELINE_TOK_S] for r in usable], [_units(r, noise) or 1 for r in usable],
                group.base[BASELINE_TOK_S], _units(group.base, noise) or 1, noise, seed=seed, **kwargs)
        groups.append(group)
    return sorted(groups, key=lambda g: (g.point, g.label))


def crossing_text(group: CurveGroup) -> str:
    """The measured crossing as a phrase: ``2.31 [2.10, 2.52]``, ``< 1.50``, ``> 3.00``."""
    c = group.crossing
    if c is None:
        return "n/a (no baseline decode tok/s)" if group.base is None else "n/a"
    xs = [r["accept_length"] for r in group.rows]
    if c["where"] == "below_range" and c.get("crossings", 0) == 0:
        return f"< {min(xs):.2f} (pays at every measured accept length)"
    if c["where"] == "above_range":
        return f"> {max(xs):.2f} (pays at none of them)"
    if c["where"] == "below_range":
        return (f"< {min(xs):.2f}, but NOT monotone: the curve passes the baseline {c['crossings']} times "
                "(read the points)")
    iv = group.interval or {}
    lo = f"< {min(xs):.2f}" if iv.get("low_open") else _f(iv.get("low"), "{:.2f}")
    hi = f"> {max(xs):.2f}" if iv.get("high_open") else _f(iv.get("high"), "{:.2f}")
    text = f"**{c['x']:.2f}** [{lo}, {hi}]"
    if c.get("crossings", 1) > 1:
        text += (f"; NOT monotone: the curve passes the baseline {c['crossings']} times, so it does not pay at "
                 "every accept length above X (read the points)")
    return text


def break_even_table(groups: Sequence[CurveGroup]) -> str:
    """The report's first table: above which accept length speculation pays, per backend and point."""
    if not groups:
        return ""
    out = io.StringIO()
    out.write("## On this setup, speculation pays above accept length X\n\n")
    out.write("| configurations (all but accept length equal) | point | measured crossing X [95% CI] "
              "| computed break-even (cycle time x baseline tok/s) | baseline tok/s (decode rate) "
              "| accept lengths measured |\n")
    out.write("|---|---|---|---|---|---|\n")
    for g in groups:
        comp = ("n/a" if not g.computed else f"{g.computed_mean:.2f} (range {min(g.computed):.2f}-"
                f"{max(g.computed):.2f} over {len(g.computed)} points)")
        base_tok = _f(g.base[BASELINE_TOK_S]) if g.base else "n/a"
        accs = ", ".join(f"{r['accept_length']:.2f}" for r in g.rows)
        out.write(f"| {g.label} | {g.point} | {crossing_text(g)} | {comp} | {base_tok} | {accs} |\n")
    out.write(f"\nMeasured crossing: {CROSSING_METHOD}; tok/s = the decode rate (the verdicts' statistic), of the "
              "configurations and of the baseline alike. The computed break-even is each configuration's cycle "
              "time x the baseline's decode rate at the same point; the two agree when the cycle time does not "
              "depend on the accept length. See `plots/break_even.png`.\n\n")
    return out.getvalue()


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


def pairwise_section(rows: Sequence[dict[str, Any]], baseline: str | None, compare: Any) -> str:
    """Decode verdicts between the non-baseline configurations at each point (small sweeps only), the
    pairs of a point judged as one family by Holm's method."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["config"] != baseline and r["status"] not in (Status.FAILED, Status.CONTAMINATED) and r["samples"]:
            by.setdefault(r["point"], []).append(r)
    out = io.StringIO()
    for _point, members in sorted(by.items()):
        if not 2 <= len(members) <= PAIRWISE_MAX:
            continue
        if not out.tell():
            out.write("## Pairwise verdicts\n\nEach configuration against each other at the same point, on the "
                      "decode rate, by the same method as the verdicts against the baseline; the pairs of a point are "
                      "one family, Holm-corrected (so that one of many comparisons of identical setups is not called "
                      "by chance): each pair's interval and threshold are those of its Holm step.\n\n")
        pairs = [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
        for (a, b), v in zip(pairs, holm_family([compare(a, b) for a, b in pairs])):
            cell = v["verdict"] if "ratio" not in v else (
                f"{v['verdict']} (x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}], called beyond "
                f"+-{_pct(v['threshold'])}, Holm p {v['p_holm']:.3f} over {v['family']} pairs)")
            out.write(f"- {row_label(a)} vs {row_label(b)}: {cell}\n")
    return out.getvalue() + ("\n" if out.tell() else "")


# ------------------------------------------------------------------- grids


@dataclass
class GridWinner:
    """The best member of a grid at its first point (the highest decode rate), and what it won by.

    A grid that varies the simulated accept length (the setting its rows' facts name) varies a what-if, not a
    setting: its members are compared at the winner's accept length only (``compared_at``), and ``wins_at`` lists the
    accept lengths at which the winner's other settings were the fastest."""

    grid: str
    point: str
    winner: dict[str, Any] | None
    values: dict[str, Any]
    against: list[dict[str, Any]]
    baseline_verdict: str | None
    why_none: str | None = None
    compared_at: dict[str, Any] = field(default_factory=dict)
    wins_at: list[Any] | None = None
    accept_lengths: list[Any] | None = None

    @property
    def significant(self) -> bool:
        return bool(self.against) and all(a["verdict"] == Verdict.FASTER for a in self.against)


def best_of_grids(rows: Sequence[dict[str, Any]], grids: Mapping[str, Any], compare: Any) -> list[GridWinner]:
    """The winner of each grid (highest decode rate among its ok members at the grid's first point;
    with an accept-length axis, against the members at the winner's accept length: ``GridWinner``)."""
    out = []
    for name, grid in sorted(grids.items()):
        values = grid["members"]
        members = [r for r in rows if r["config"] in values]
        first_point = min((r["point_index"] for r in members), default=0)
        at = [r for r in members if r["point_index"] == first_point]
        ok = [r for r in at if r["status"] == Status.OK and r[BASELINE_TOK_S] is not None]
        point = at[0]["point"] if at else "default"
        if not ok:
            out.append(GridWinner(name, point, None, {}, [], None, why_none="no member ended ok"))
            continue
        win = max(ok, key=lambda r: r[BASELINE_TOK_S])
        held, wins_at, accs = {}, None, None
        acc_key = acc_setting(ok)
        if acc_key is not None and any(acc_key in values[r["config"]] for r in ok):
            held = {acc_key: values[win["config"]].get(acc_key)}
            rest = {k: v for k, v in values[win["config"]].items() if k != acc_key}
            accs = sorted({values[r["config"]].get(acc_key) for r in ok}, key=lambda v: float(v or 0))
            wins_at = []
            for acc in accs:
                best = max((r for r in ok if values[r["config"]].get(acc_key) == acc), key=lambda r: r[BASELINE_TOK_S])
                if {k: v for k, v in values[best["config"]].items() if k != acc_key} == rest:
                    wins_at.append(acc)
            ok = [r for r in ok if values[r["config"]].get(acc_key) == held[acc_key]]
        against = []
        for other in sorted((r for r in ok if r is not win), key=lambda r: -r[BASELINE_TOK_S]):
            v = compare(win, other)
            against.append({"config": other["config"], BASELINE_TOK_S: other[BASELINE_TOK_S],
                            "tok_s_median": other["tok_s_median"], "verdict": v["verdict"], "ratio": v.get("ratio"),
                            "ratio_ci": v.get("ratio_ci"), "threshold": v.get("threshold"),
                            "launch_effect": v.get("launch_effect")})
        out.append(GridWinner(name, point, win, values[win["config"]], against, win.get("verdict"),
                              compared_at=held, wins_at=wins_at, accept_lengths=accs))
    return out


def best_section(winners: Sequence[GridWinner], files: Mapping[str, Mapping[str, str]]) -> str:
    if not winners:
        return ""
    out = io.StringIO()
    out.write("## Best configuration of each grid\n\n")
    for w in winners:
        if w.winner is None:
            out.write(f"- **{w.grid}**: no winner ({w.why_none}).\n")
            continue
        settings = ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in w.values.items() if k not in w.compared_at)
        runner = w.against[0] if w.against else None
        if runner is None:
            lead = "the only member that ended ok"
        elif w.significant:
            lead = (f"faster than every other member; the runner-up {runner['config']} by x{runner['ratio']:.3f} "
                    f"[{runner['ratio_ci'][0]:.3f}, {runner['ratio_ci'][1]:.3f}]")
        else:
            tied = [a["config"] for a in w.against if a["verdict"] != Verdict.FASTER]
            lead = (f"NOT significantly better than {', '.join(tied[:4])}{' ...' if len(tied) > 4 else ''} "
                    "(highest median only; apply with care)")
        if w.compared_at:
            (acc_key, acc), = w.compared_at.items()
            lead += (f", compared at the simulated accept length {acc_key.partition('.')[2]}={acc} (a what-if of "
                     "the sweep, not a "
                     f"setting); these settings are the fastest at {len(w.wins_at or [])} of the "
                     f"{len(w.accept_lengths or [])} accept lengths measured")
        paths = files.get(w.grid, {})
        out.write(f"- **{w.grid}** at point {w.point}: **{w.winner['config']}** ({settings}), "
                  f"{_f(w.winner[BASELINE_TOK_S])} decode tok/s, {lead}; vs baseline: {w.baseline_verdict}. "
                  f"Apply: `{paths.get('env', '?')}`; NCCL tuner: `{paths.get('tuner', '?')}`; "
                  f"evidence: `{paths.get('evidence', '?')}`.\n")
    return out.getvalue() + "\n"


def methods_lines() -> str:
    return ("- Launches: the unit of replication; each launch of a configuration is reduced to its median, a side "
            "of one launch still carries the launch variance the point's model measured over all its launches (with "
            "rounds as blocks: what is left once each round's shared speed is removed), so a configuration measured "
            "once is judged as noisily as the sweep's replicated launches showed.\n"
            f"- Break-even crossing: {CROSSING_METHOD}.\n")
