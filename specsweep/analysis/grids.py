"""Break-even curves and grid winners: what the report says about groups of configurations.

* Break-even curves (``break_even_groups``): rows at one point that differ
  only in ``SGLANG_SIMULATE_ACC_LEN``, one group per everything else (e.g. per
  communication backend); the measured crossing of the baseline
  (``analysis.curves``) next to the computed break-even (cycle time x
  baseline decode tok/s) of its members.
* Grids (``best_of_grids``): the winner of each grid with the evidence it won
  by (its decode verdict against every other member).

Both read the rows of ``analysis.rows.config_rows``; nothing is measured or
recomputed from records.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specsweep.analysis.curves import crossing, crossing_interval
from specsweep.analysis.metrics import BASELINE_TOK_S, PRIMARY_VERDICT
from specsweep.analysis.stats import Noise
from specsweep.contracts.vocabulary import Status, Verdict
from specsweep.files import canonical_json


def units(row: Mapping[str, Any], noise: Noise) -> int | None:
    """The launches (rounds, when ``noise.unit`` is ``round``) of a row's primary verdict sample."""
    sample = (row.get("verdict_samples") or {}).get(PRIMARY_VERDICT)
    return len(sample.groups(by_repeat=noise.unit == "round")) if sample is not None else None


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
    """The accept length the engine simulated (the plan's facts, through ``contracts.acceptance``; plan-time
    checks refuse one SGLang would clamp, so it is the one that ran); None: it did not."""
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
                xs, [r[BASELINE_TOK_S] for r in usable], [units(r, noise) or 1 for r in usable],
                group.base[BASELINE_TOK_S], units(group.base, noise) or 1, noise, seed=seed, **kwargs)
        groups.append(group)
    return sorted(groups, key=lambda g: (g.point, g.label))


# ------------------------------------------------------------------- grids


@dataclass
class GridWinner:
    """The best member of a grid at its first point (the highest decode rate), and what it won by.

    A grid that varies the simulated accept length (the setting its rows' facts name) varies a what-if, not a
    setting: its
    members are compared at the winner's accept length only (``compared_at``), and ``wins_at`` lists the
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


def best_of_grids(rows: Sequence[dict[str, Any]], grids: Mapping[str, Any], compare: Any,
                  race_winner: str | None = None) -> list[GridWinner]:
    """The winner of each grid (highest decode rate among its ok members at the grid's first point;
    with an accept-length axis, against the members at the winner's accept length: ``GridWinner``). After a
    race (``analysis.race``), its winner wins the grids it is a member of: the race judged it by the verdicts'
    model, while the decode rates of members dropped early come from fewer (and earlier) rounds."""
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
        win = next((r for r in ok if r["config"] == race_winner), None) or max(ok, key=lambda r: r[BASELINE_TOK_S])
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


# ------------------------------------------------------------------- as report.json holds them


def curve_record(group: CurveGroup) -> dict[str, Any]:
    """One break-even curve: its rows (``[config, point]``, by accept length), the baseline row, the measured
    crossing and its interval, and the computed break-even of each member and their mean."""
    return {"label": group.label, "point": group.point, "rows": [[r["config"], r["point"]] for r in group.rows],
            "base": None if group.base is None else [group.base["config"], group.base["point"]],
            "accept_lengths": [r["accept_length"] for r in group.rows], "crossing": group.crossing,
            "interval": group.interval, "computed": group.computed, "computed_mean": group.computed_mean}


def winner_record(w: GridWinner, sizes: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """One grid's winner with what applying it needs: its environment, flags and argv, its TP size and the
    verify's all-reduce sizes (``sizes``: bytes by configuration, for the NCCL tuner's byte range)."""
    row = w.winner
    winner = None
    if row is not None:
        plan = row.get("plan") or {}
        winner = {"config": row["config"], BASELINE_TOK_S: row.get(BASELINE_TOK_S),
                  "tok_s_median": row.get("tok_s_median"), "tok_s_ci": [row.get("tok_s_ci_low"),
                                                                        row.get("tok_s_ci_high")],
                  "env": plan.get("env"), "server_args": plan.get("server_args"), "argv": plan.get("argv"),
                  "tp_size": int((plan.get("facts") or {}).get("tp_size") or -1),
                  "verify_sizes": list(sizes.get(row["config"], ()))}
    return {"grid": w.grid, "point": w.point, "winner": winner, "why_none": w.why_none, "values": w.values,
            "significant": w.significant, "compared_at": w.compared_at, "wins_at": w.wins_at,
            "accept_lengths": w.accept_lengths, "against": w.against, "baseline_verdict": w.baseline_verdict}
