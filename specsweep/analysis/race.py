"""A race: the fastest of many configurations in fewer launches than measuring each to the end.

With ``rounds.mode: race`` the rounds after the planned ones hold only the
survivors. After each round (``workflow.rounds.judge_round``) the verdicts'
own model (``analysis.blocks``, the round a block, over every configuration
measured at the point, the dropped ones included) judges the survivors
(``standings``):

* the **best** is the survivor with the highest estimate (its ratio to the
  others under the model);
* each other survivor is compared with the best (``blocks.contrast``, the
  report's primary verdict), the comparisons of the round one family judged
  by Holm's method (``stats.holm_family``, as the pairwise table);
* one the family calls slower than the best is **dropped**; one whose
  Holm-step interval of best / it lies within [1 / (1 + e), 1 + e]
  (``e`` = ``smallest_effect``) **ties** with the best.

The race ends (``workflow.rounds.decide``) when one survivor is left, when
every other survivor ties with the best (the tie is reported as one answer),
or when the budget is spent. The planned rounds (``launches``) run for every
configuration; drops start with the judgement of the last planned round. With
``launches: 1`` that is round 1, which the blocked model cannot judge alone: the
baseline's further launches in it (``rounds.first_round_baseline``: ``1b``,
``1c``, ...) give the one-way model a launch variance to judge it by.

The answer (``race_record``, report.json's ``race``) is read from the final
rows, with the same model: the winner (the best of the last survivors), its
verdict against every other configuration (one Holm family), each
configuration's history from the rounds' judgements (dropped in round k,
tied, won, still racing when the budget ended it, failed; screened out when
the cost model set it aside before any launch, ``analysis.screen``), and the launches
spent against what the full design would spend: every configuration
measured in the launches that resolve ``smallest_effect`` at this run's
launch variance (``stats.launches_needed_in``, 80 % power, at the level of the
best against each other configuration: ``family_level``), the t quantiles at
the degrees of freedom that design itself would have (``full_design_df``),
not at this run's fewer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.blocks import BlockFit, contrast
from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.screen import check_record
from specsweep.analysis.stats import MIN_SAMPLES, POWER, VERDICT_LEVEL, holm_family, launches_needed_in
from specsweep.contracts.layout import CONTROL
from specsweep.contracts.rounds import RACE_ANSWERED, TIE
from specsweep.contracts.vocabulary import Status, Verdict

# Format history of report.json's ``race`` and of a judgement's ``race`` (results/rounds/round-<r>/judgement.json):
#   1  standings: round, best, dropping, survivors (after the drops), dropped, tied, model, failed, unmeasured,
#      against (each: config, verdict of the best against it, ratio = best / it, ratio_ci, p_value, p_holm,
#      threshold, model, dropped, tied); the report's race: winner, tied_with, decided (one left or a tie;
#      else the winner is the best so far), ended_by, why, point, smallest_effect, against, history (each:
#      config, outcome, round, verdict), rounds (the standings), launches {spent, per_configuration,
#      launches_needed, level, full_design, why, smallest_effect}, method.
#   2  the report's race: screen (``analysis.screen.screen``'s record, or null without screening); history's
#      outcome ``screened out`` (with the prediction as ``verdict``); launches.screened_out (configurations never
#      launched because the screen set them aside: the full design counts them, ``spent`` does not).
#   3  the report's race: screen_check (``analysis.screen.check_record``: each set-aside configuration's prediction
#      against its launch of the screen's check run, ``screen.check``; null without screening); launches.screened_out
#      every configuration the screen set aside, launched to check it or not; launches.checked ({config: launches}
#      of the check run) and check_spent: never in ``spent`` or ``per_configuration`` (report.json 3).

#: How a configuration's race ended (``race_record``'s ``history``).
WON = "won"
TIED = "tied"
DROPPED = "dropped"
RACING = "still racing"
SCREENED = "screened out"  # set aside by the cost model before any launch (``analysis.screen``)
LEADING = "best so far"  # the best when the budget ended the race with others still racing
FAILED = "failed"

RACE_METHOD = (
    "after each round from the last planned one on, the survivors are judged by the verdicts' model (the "
    "round a block, over every configuration measured at the first workload point): the best is the survivor "
    "with the highest estimate; each other survivor's decode rate is compared with the best's, the round's "
    "comparisons one Holm family; one called slower than the best is dropped, one whose Holm-step interval of "
    "best / it lies within [1 / (1 + e), 1 + e] (e = smallest_effect) ties with the best. The race ends when one "
    "is left, every other survivor ties with the best, or the budget (rounds.max_launches, rounds.max_minutes) "
    "is spent. Round 1 alone (launches: 1) is judged by the one-way model, its launch variance from the "
    "baseline's launches of round 1 (rounds.first_round_baseline). The full design it is set against: every "
    "configuration in the launches that see e with "
    f"{POWER:.0%} power at this run's launch variance (the verdicts' power calculation at the level of the best "
    "against each other configuration, Bonferroni over those comparisons, the t quantiles at that design's own "
    "degrees of freedom, (C - 1)(n - 1) for C configurations in n rounds), plus the A/A control"
)


def first_point(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of the first workload point (the race is judged there, as a grid's winner is)."""
    if not rows:
        return []
    first = min(r["point_index"] for r in rows)
    return [r for r in rows if r["point_index"] == first]


def _fit(rows: Sequence[Mapping[str, Any]]) -> BlockFit | None:
    return next(((r.get("blocks") or {}).get(PRIMARY_VERDICT) for r in rows
                 if (r.get("blocks") or {}).get(PRIMARY_VERDICT) is not None), None)


def _tied(comparison: Mapping[str, Any], effect: float) -> bool:
    ci = comparison.get("ratio_ci")
    return bool(ci) and ci[0] >= 1 / (1 + effect) and ci[1] <= 1 + effect


def _entry(config: str, c: Mapping[str, Any], effect: float) -> dict[str, Any]:
    return {"config": config, "verdict": c.get("verdict"), "ratio": c.get("ratio"), "ratio_ci": c.get("ratio_ci"),
            "p_value": c.get("p_value"), "p_holm": c.get("p_holm"), "threshold": c.get("threshold"),
            "model": c.get("model"), "dropped": c.get("verdict") == Verdict.FASTER, "tied": _tied(c, effect)}


def best_of(fit: BlockFit, candidates: Sequence[str], min_samples: int = MIN_SAMPLES) -> str | None:
    """The candidate with the highest estimate under ``fit`` (each one's ratio to the first candidate; one
    the model cannot compare is never the best). None without candidates, or when none of them can be
    compared with the first (too few requests, nothing replicated yet)."""
    if not candidates:
        return None
    ref = candidates[0]
    ratios = {ref: 1.0}
    for name in candidates[1:]:
        got = contrast(fit, name, ref, min_samples=min_samples).get("ratio")
        if got is not None:
            ratios[name] = got
    if len(candidates) > 1 and len(ratios) == 1:
        return None
    return max(ratios, key=lambda n: (ratios[n], n == ref))


def against_best(fit: BlockFit, best: str, others: Sequence[str], effect: float,
                 min_samples: int = MIN_SAMPLES) -> list[dict[str, Any]]:
    """``best`` against each of ``others`` (``blocks.contrast``), judged as one Holm family."""
    judged = holm_family([contrast(fit, best, other, level=VERDICT_LEVEL, min_samples=min_samples)
                          for other in others])
    return [_entry(other, c, effect) for other, c in zip(others, judged)]


def standings(fit: BlockFit, survivors: Sequence[str], effect: float, round_no: int, dropping: bool = True,
              min_samples: int = MIN_SAMPLES) -> dict[str, Any]:
    """The survivors after round ``round_no`` under ``fit`` (module docstring): the best, each other one
    against it, who is dropped (only with ``dropping``: the planned rounds drop no one), and whether every
    one left ties with the best."""
    candidates = [s for s in survivors if s in fit.levels or s in fit.sides]
    unmeasured = [s for s in survivors if s not in candidates]
    best = best_of(fit, candidates, min_samples)
    against = against_best(fit, best, [s for s in candidates if s != best], effect, min_samples) if best else []
    if not dropping:
        for a in against:
            a["dropped"] = False
    dropped = [a["config"] for a in against if a["dropped"]]
    left = [s for s in survivors if s not in dropped]
    return {"round": round_no, "best": best, "dropping": dropping, "survivors": left, "dropped": dropped,
            "tied": (bool(against) and not unmeasured and len(left) > 1
                     and all(a["tied"] or a["dropped"] for a in against)),
            "model": fit.model, "against": against, "unmeasured": unmeasured}


def judge_rows(rows: Sequence[Mapping[str, Any]], survivors: Sequence[str], effect: float, round_no: int,
               dropping: bool = True) -> dict[str, Any]:
    """``standings`` at the first point of the report's rows (``analysis.rows.config_rows``); a survivor whose
    row failed or was measured beside another server leaves the race (``failed``)."""
    at = {r["config"]: r for r in first_point(rows)}
    failed = [s for s in survivors if s in at and at[s]["status"] in (Status.FAILED, Status.CONTAMINATED)]
    fit = _fit(list(at.values()))
    racing = [s for s in survivors if s not in failed]
    if fit is None:
        out = {"round": round_no, "best": None, "dropping": dropping, "survivors": racing, "dropped": [],
               "tied": False, "model": None, "against": [], "unmeasured": racing}
    else:
        out = standings(fit, racing, effect, round_no, dropping)
    out["failed"] = failed
    return out


# ------------------------------------------------------------------ the answer (report.json's race)


def _launches(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {r["config"]: len(r.get("launch_entries") or []) for r in rows}


def family_level(configurations: int) -> float:
    """The confidence level of one comparison of the full design's: the best against each of the others at
    the race's error rate, Bonferroni over those ``configurations - 1`` comparisons (Holm's first step)."""
    return 1 - (1 - VERDICT_LEVEL) / max(1, configurations - 1)


def full_design_df(configurations: int, launches: int) -> int:
    """The residual degrees of freedom of the full design under the verdicts' blocked model: ``configurations``
    in ``launches`` rounds (C n launches, rank C + n - 1) and the A/A control (one launch, a level of its own:
    no degree of freedom): (C - 1)(n - 1)."""
    return (configurations - 1) * (launches - 1)


def cost_record(rows: Sequence[Mapping[str, Any]], effect: float | None, aa_planned: bool,
                planned: int | None, screened_out: Sequence[str] = ()) -> dict[str, Any]:
    """Launches the race spent (every launch at the first point of a configuration that raced, the A/A control's
    included) against the full design: every configuration of the grid, each one the screen set aside
    (``screened_out``) included, in ``max(planned, launches needed)`` launches, plus the A/A control. A set-aside
    configuration launched by the screen's check run (``screen.check``) is ``checked``: its launches are the
    check's, not the race's (``spent`` leaves them out)."""
    at = first_point(rows)
    launched = _launches(at)
    aside = list(dict.fromkeys(screened_out))
    checked = {c: n for c, n in launched.items() if c in aside}
    per = {c: n for c, n in launched.items() if c not in checked}
    spent = sum(per.values())
    fit = _fit(at)
    grid = len(per) + len(aside)
    level = family_level(grid)
    needed = (launches_needed_in(fit.noise.var, effect, lambda n: full_design_df(grid, n), level)
              if fit is not None and effect else None)
    out: dict[str, Any] = {"spent": spent, "per_configuration": per, "launches_needed": needed, "level": level,
                           "full_design": None, "why": None, "smallest_effect": effect, "screened_out": aside,
                           "checked": checked, "check_spent": sum(checked.values())}
    if needed is None:
        out["why"] = "no launch variance to compute the launches needed from" if effect else "no smallest_effect"
        return out
    aa = 1 if aa_planned and any(e.get("launch") == CONTROL for r in at for e in r.get("launch_entries") or []) else 0
    out["full_design"] = grid * max(needed, planned or 1) + aa
    return out


def _history(configs: Sequence[str], rounds: Sequence[Mapping[str, Any]], winner: str | None,
             tied_with: Sequence[str], decided: bool, screen: Mapping[str, Any] | None = None
             ) -> list[dict[str, Any]]:
    screened = {p["config"]: p for p in (screen or {}).get("predictions") or [] if p.get("set_aside")}
    out = []
    for config in [*configs, *(c for c in sorted(screened) if c not in configs)]:
        entry: dict[str, Any] = {"config": config, "outcome": RACING, "round": None, "verdict": None}
        if config in screened:
            out.append({**entry, "outcome": SCREENED, "round": 0, "verdict": screened[config]})
            continue
        for standing in rounds:
            if config in (standing.get("failed") or []):
                entry.update(outcome=FAILED, round=standing["round"])
                break
            hit = next((a for a in standing.get("against") or [] if a["config"] == config and a["dropped"]), None)
            if hit is not None:
                entry.update(outcome=DROPPED, round=standing["round"], verdict=hit)
                break
        else:
            if config == winner:
                entry.update(outcome=WON if decided else LEADING, round=rounds[-1]["round"] if rounds else None)
            elif config in tied_with:
                entry.update(outcome=TIED, round=rounds[-1]["round"] if rounds else None)
        out.append(entry)
    return out


def race_record(rows: Sequence[Mapping[str, Any]], judgements: Sequence[Mapping[str, Any]],
                effect: float | None, aa_planned: bool, screen: Mapping[str, Any] | None = None
                ) -> dict[str, Any] | None:
    """report.json's ``race`` (module docstring), from the final rows and every round's judgement, with the
    screen before it (``analysis.screen.screen``'s record: its set-aside configurations are ``screened out``);
    None when no judgement raced."""
    rounds = [j["race"] for j in judgements if j.get("race")]
    if not rounds:
        return None
    planned = next((s["round"] for s in rounds if s.get("dropping")), rounds[-1]["round"])
    last = judgements[-1]
    at = first_point(rows)
    configs = [r["config"] for r in at]
    fit = _fit([r for r in at if r["status"] not in (Status.FAILED, Status.CONTAMINATED)])
    survivors = list(rounds[-1]["survivors"])
    winner = best_of(fit, [s for s in survivors if s in fit.levels or s in fit.sides]) if fit is not None else None
    others = [c for c in configs if c != winner and fit is not None and (c in fit.levels or c in fit.sides)]
    against = against_best(fit, winner, others, effect or 0.0) if winner else []
    decided = last.get("ended_by") in RACE_ANSWERED
    tied_with = [a["config"] for a in against if a["config"] in survivors and a["tied"]]
    if last.get("ended_by") != TIE:
        tied_with = []
    return {"winner": winner, "tied_with": tied_with, "ended_by": last.get("ended_by"), "why": last.get("why"),
            "point": at[0]["point"] if at else None, "smallest_effect": effect,
            "against": against, "history": _history(configs, rounds, winner, tied_with, decided, screen),
            "decided": decided, "rounds": rounds, "screen": dict(screen) if screen else None,
            "screen_check": check_record(screen, rows, winner, against) if screen else None,
            "launches": cost_record(rows, effect, aa_planned, planned, (screen or {}).get("set_aside") or ()),
            "method": RACE_METHOD}


def ratio_to_best(entry: Mapping[str, Any]) -> tuple[float | None, list[float] | None]:
    """A configuration's decode rate relative to the best's (1 / ``ratio``) and its interval, for the views."""
    ratio, ci = entry.get("ratio"), entry.get("ratio_ci")
    if ratio is None or not ratio > 0:
        return None, None
    return 1 / ratio, ([1 / ci[1], 1 / ci[0]] if ci and all(v and v > 0 and math.isfinite(v) for v in ci) else None)
