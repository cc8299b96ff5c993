"""How far the sweep's verdicts can be trusted: the rule they use, the controls, the launches, the pairs.

Everything here reads the rows of ``analysis.rows.config_rows`` (one per
configuration and workload point) and the summary files' launch sections;
nothing is measured or recomputed from records.

* The rule (``rule_records``): per point, the launch variance pooled there, the
  threshold a typical configuration is called beyond, the smallest difference
  the design sees (80 % power) and, for the ``smallest_effect`` asked for, the
  launches per configuration that would resolve it.
* The A/A control (``aa_record``): the baseline launched again at the end of
  the sweep against its first launch (``analysis.launches.aa_control``): it
  must not be called.
* The positive control (``positive_record``): a configuration with a known
  injected slowdown against its twin: it must be called slower.
* Launches (``launches_record``): every launch in the order it ran (from
  ``started_at``), what it cost, whether the order was the planned one (a
  side-by-side round's launches, which start together, by their first
  measuring window), and what side-by-side measurement did.
* Pairwise verdicts (``pairwise_records``): the configurations of a point
  against each other, one Holm family per point (small sweeps only).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specsweep.analysis.grids import units
from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.stats import Noise, called_beyond, detectable, holm_family, launches_needed
from specsweep.contracts.summary import ConfigSummary
from specsweep.contracts.vocabulary import CALLED, Status, Verdict
from specsweep.records import is_external

#: Pairwise verdicts are listed when a point has at most this many ok configurations besides the baseline.
PAIRWISE_MAX = 6


def point_rows(rows: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows of each workload point, the points in their plan order."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["point_index"]):
        by.setdefault(r["point"], []).append(r)
    return list(by.values())


# ---------------------------------------------------------- the rule


def rule_record(members: Sequence[dict[str, Any]], baseline: str | None,
                smallest_effect: float | None) -> dict[str, Any]:
    """The rule the verdicts at one point use: ``noise`` (``Noise.as_dict``: the variance left by the point's
    model, its unit and degrees of freedom), ``model`` (``blocked``: the round a block (``describe``), else the
    one-way model and ``why``), the trend and cold-start checks (``blocks.trend``, ``blocks.cold_start``), and
    with launches replicated the typical configuration's launches against the baseline's, the threshold it is
    called beyond, the smallest difference seen with 80 % power and, for ``smallest_effect``, whether it is
    resolved or how many launches would resolve it."""
    noise: Noise = members[0]["noise"][PRIMARY_VERDICT]
    fit = (members[0].get("blocks") or {}).get(PRIMARY_VERDICT)
    blocked = fit is not None and fit.blocked
    out: dict[str, Any] = {
        "point": members[0]["point"], "metric": PRIMARY_VERDICT, "noise": noise.as_dict(),
        "model": None if fit is None else {"blocked": blocked, "describe": fit.describe() if blocked else None,
                                           "why": fit.why},
        "trend": members[0].get("trend"), "cold_start": members[0].get("cold_start")}
    if noise.var is None or noise.unit == "round":
        return out

    def launches(r: Mapping[str, Any]) -> int | None:
        return fit.launches_of(r["config"]) if blocked else units(r, noise)

    base = next((r for r in members if r["config"] == baseline), None)
    others = [u for u in (launches(r) for r in members if r["config"] != baseline) if u]
    typical = int(statistics.median(others)) if others else 1
    base_units = (launches(base) if base is not None else None) or typical
    sees = detectable(noise, typical, base_units)
    out.update(units=typical, baseline_units=base_units, called_beyond=called_beyond(noise, typical, base_units),
               detectable=sees, smallest_effect=smallest_effect, resolved=None, launches_needed=None,
               request_share=None)
    if smallest_effect:
        out["resolved"] = sees is not None and sees <= smallest_effect
        if not out["resolved"]:
            out["launches_needed"] = launches_needed(noise, smallest_effect)
            out["request_share"] = ((noise.request_var / noise.var) if noise.request_var is not None and noise.var
                                    else None)
    return out


def rule_records(rows: Sequence[dict[str, Any]], baseline: str | None,
                 smallest_effect: float | None) -> list[dict[str, Any]]:
    return [rule_record(members, baseline, smallest_effect) for members in point_rows(rows)]


# ---------------------------------------------------------- the controls


def aa_record(rows: Sequence[dict[str, Any]], baseline: str | None, aa_planned: bool) -> dict[str, Any]:
    """The A/A control at every point: ``analysis.launches.aa_control`` of the baseline's row (None: no control
    launch ended ok), whether its drift exceeds the pooled launch SD, and whether the baseline was external
    (then its control is a later round against the same server, not a relaunch)."""
    base_rows = [r for r in rows if r["config"] == baseline]
    out: dict[str, Any] = {"planned": aa_planned, "baseline": baseline if base_rows else None,
                           "external": bool(base_rows) and is_external(base_rows[0].get("plan") or {}), "points": []}
    for r in base_rows:
        aa = r.get("aa")
        point: dict[str, Any] = {"point": r["point"], "result": aa}
        if aa:
            comp = aa["comparison"]
            sd = r["noise"][PRIMARY_VERDICT].sd
            point["called"] = comp["verdict"] in CALLED
            point["launch_sd"] = sd
            point["drift_beyond_sd"] = sd is not None and abs(math.log1p(aa["drift"])) > sd
        out["points"].append(point)
    return out


def positive_record(rows: Sequence[dict[str, Any]], positive: Mapping[str, Any] | None,
                    compare: Callable[[dict, dict], dict]) -> dict[str, Any] | None:
    """The positive control at every point: the slowed copy against its twin (``compare``: the primary
    verdict); it must be called slower. Not judged where either side has no ok row. None when not set."""
    if not positive:
        return None
    name, of, slowdown = positive["name"], positive["of"], float(positive["slowdown"])
    out: dict[str, Any] = {"name": name, "of": of, "slowdown": slowdown, "points": []}
    for members in point_rows(rows):
        by = {r["config"]: r for r in members}
        point: dict[str, Any] = {"point": members[0]["point"]}
        control, twin = by.get(name), by.get(of)
        if control is None or twin is None or control["status"] != Status.OK or twin["status"] != Status.OK:
            point["not_judged"] = [{"config": n, "status": by[n]["status"] if n in by else None} for n in (name, of)
                                   if n not in by or by[n]["status"] != Status.OK]
            out["points"].append(point)
            continue
        v = compare(control, twin)
        point.update(comparison=v, expected_ratio=1 / (1 + slowdown), called=v["verdict"] == Verdict.SLOWER,
                     launches_needed=None)
        if "ratio" in v and v["verdict"] != Verdict.SLOWER:
            point["launches_needed"] = launches_needed(twin["noise"][PRIMARY_VERDICT], slowdown)
        out["points"].append(point)
    return out


def external_record(rows: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """The configurations measured against an external server (runtime external), with its URL."""
    return {r["config"]: (r.get("plan") or {}).get("url") for r in rows if is_external(r.get("plan") or {})}


# ------------------------------------------------------------------ launches


def launch_entries(files: Sequence[ConfigSummary]) -> list[dict[str, Any]]:
    """Every launch of every summary file, with its configuration, sorted by start time."""
    out = [dict(entry.to_dict(), config=f.config) for f in files for entry in f.launches]
    return sorted(out, key=lambda e: (e.get("started_at") is None, e.get("started_at") or 0.0))


def measured_order(entries: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[str, str]], bool]:
    """The launches in the order they were measured, and whether a side-by-side round is among them.

    A launch measured alone (sequential) is measured from its start (``started_at``). The launches of a
    side-by-side round all start together, at once, so their start times say nothing of the planned order:
    they are measured in turn, in the round's order, and the first window of each (the launch section's
    ``side_by_side.first_window_ns``, one clock for the host's processes) says in which order the turns
    began. Such a round sits in the sequence where its first launch started; a launch of it that never
    measured (no window) is left out, as a launch that never started is."""
    started = [e for e in entries if e.get("started_at") is not None]
    side = [e for e in started if e.get("side_by_side") and e.get("planned_place")]
    round_start: dict[Any, float] = {}
    for e in side:
        r = e["planned_place"][0]
        round_start[r] = min(round_start.get(r, e["started_at"]), e["started_at"])
    side_ids = {id(e) for e in side}

    def key(e: Mapping[str, Any]) -> tuple[float, int, int]:
        if id(e) in side_ids:
            return round_start[e["planned_place"][0]], 1, int(e["side_by_side"]["first_window_ns"])
        return float(e["started_at"]), 0, 0

    ran = sorted((e for e in started if id(e) not in side_ids or e["side_by_side"].get("first_window_ns")
                  is not None), key=key)
    return [(e["config"], e["launch"]) for e in ran], bool(side)


def order_check(entries: Sequence[Mapping[str, Any]], planned: Sequence[Sequence[str]] | None) -> dict[str, Any]:
    """Whether the launches were measured in the planned order: ``{"planned": bool, "in_order": bool|None,
    "by": "start" | "start and first window", "first_bad": index, "ran": [config, launch], "expected":
    [config, launch]}`` (the first launch out of order). ``by``: what was compared, each launch's start, or for
    a side-by-side round's launches, which start together, their first measuring window (``measured_order``)."""
    if not planned:
        return {"planned": False, "in_order": None}
    ran, side = measured_order(entries)
    by = "start and first window" if side else "start"
    planned_ran = [tuple(p) for p in planned if tuple(p) in set(ran)]
    if ran == planned_ran:
        return {"planned": True, "in_order": True, "by": by}
    first_bad = next(i for i, (a, b) in enumerate(zip(ran, planned_ran)) if a != b) if len(ran) == len(
        planned_ran) else 0
    return {"planned": True, "in_order": False, "by": by, "first_bad": first_bad, "ran": list(ran[first_bad]),
            "expected": list(planned_ran[first_bad])}


def side_by_side_record(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What side-by-side measurement did over the sweep (None: no launch was measured side by side):
    ``launches`` measured so of ``of``, their ``windows``, ``alone`` (``[config, launch]`` of those with no
    partner's server up, e.g. one configuration rerun by itself), and the partners' CPU share (cores): the
    highest over one launch's windows (``partner_cpu_share_max``, the share that marks a launch
    ``contaminated`` at ``limit``, and ``worst``, that launch) and in any single window (``worst_window``);
    ``busiest_limit``: one partner's share that marks a launch ``contaminated`` (None in records before it)."""
    side = [e for e in entries if e.get("side_by_side")]
    if not side:
        return None
    shares = [e for e in side if e["side_by_side"].get("partner_cpu_share") is not None]
    worst = max(shares, key=lambda e: e["side_by_side"]["partner_cpu_share"], default=None)
    windows = [e["side_by_side"]["partner_cpu_share_max"] for e in side
               if e["side_by_side"].get("partner_cpu_share_max") is not None]
    limits = {e["side_by_side"].get("partner_cpu_share_limit") for e in side} - {None}
    each = {e["side_by_side"].get("partner_cpu_share_busiest_limit") for e in side} - {None}
    return {"launches": len(side), "of": len(entries),
            "windows": sum(e["side_by_side"].get("windows") or 0 for e in side),
            "alone": [[e["config"], e["launch"]] for e in side if not e["side_by_side"].get("partners_up")],
            "partner_cpu_share_max": None if worst is None else worst["side_by_side"]["partner_cpu_share"],
            "worst": None if worst is None else [worst["config"], worst["launch"]],
            "worst_window": max(windows) if windows else None,
            "limit": max(limits) if limits else None,
            "busiest_limit": max(each) if each else None}


def launches_record(files: Sequence[ConfigSummary], planned: Sequence[Sequence[str]] | None,
                    round_plans: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Every launch as it ran (the Launches table), each with its round and its place in that round's seeded
    order (``planned_place``, from the rounds' plans; None where no plan names it), what replication cost (the
    servers' own time, ``server_s``, apart from the waits for the host, ``host_wait_s``), whether the order
    was the planned one (``order_check``) and what side-by-side measurement did (``side_by_side_record``)."""
    place = {(c, lid): [plan["round"], k] for plan in round_plans for k, (c, lid) in enumerate(plan["order"], 1)}
    entries = [dict(e, planned_place=place.get((e["config"], e["launch"]))) for e in launch_entries(files)]
    walls = [e["wall_s"] for e in entries if e.get("wall_s") is not None]
    served = [e["server_s"] for e in entries if e.get("server_s") is not None]
    waits = [e["host_wait_s"] for e in entries if e.get("host_wait_s") is not None]
    readies = [e["ready_s"] for e in entries if e.get("ready_s") is not None]
    starts = [e["started_at"] for e in entries if e.get("started_at") is not None]
    ends = [e["ended_at"] for e in entries if e.get("ended_at") is not None]
    return {"entries": entries, "configurations": len({e["config"] for e in entries}),
            "server_s": sum(served) if served else None, "host_wait_s": sum(waits) if waits else None,
            "median_server_s": statistics.median(served) if served else None,
            "median_wall_s": statistics.median(walls) if walls else None,
            "median_ready_s": statistics.median(readies) if readies else None,
            "span_s": (max(ends) - min(starts)) if starts and ends else None, "order": order_check(entries, planned),
            "side_by_side": side_by_side_record(entries)}


# ------------------------------------------------------------------ pairwise


def pairwise_records(rows: Sequence[dict[str, Any]], baseline: str | None,
                     compare: Callable[[dict, dict], dict]) -> list[dict[str, Any]]:
    """Decode verdicts between the non-baseline configurations at each point (2 to ``PAIRWISE_MAX`` of them),
    the pairs of a point judged as one family by Holm's method (``stats.holm_family``)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["config"] != baseline and r["status"] not in (Status.FAILED, Status.CONTAMINATED) and r["samples"]:
            by.setdefault(r["point"], []).append(r)
    out = []
    for point, members in sorted(by.items()):
        if not 2 <= len(members) <= PAIRWISE_MAX:
            continue
        pairs = [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
        out.append({"point": point, "pairs": [
            {"a": [a["config"], a["point"]], "b": [b["config"], b["point"]], "comparison": v}
            for (a, b), v in zip(pairs, holm_family([compare(a, b) for a, b in pairs]))]})
    return out
