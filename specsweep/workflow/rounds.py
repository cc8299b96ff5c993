"""The rounds of a sweep, as Snakemake runs them: each round's plan, and the judgement after it.

Round ``r`` is: ``plan_round`` writes results/rounds/round-<r>/plan.json (its
design and order, ``plan.rounds``), the round's launch jobs read it, and the
checkpoint ``judge_round`` writes results/rounds/round-<r>/judgement.json
from every launch measured so far: the verdicts recomputed exactly as the
report computes them (``analysis.rows.config_rows``), and the decision:

* before the planned rounds are done (``launches``): go on, with the next
  planned round;
* every comparison is either called or can already see ``smallest_effect``
  (80 % power): the question is answered, stop (``resolved``);
* the budget is spent (``rounds.max_launches`` launches per configuration,
  or ``rounds.max_minutes`` of measuring: each round from its first launch's
  start to its last one's end, summed): stop (``budget``);
* no extra rounds were asked for (``rounds.max_launches`` unset): stop
  (``planned rounds``);
* every configuration failed or was measured beside another server: stop
  (``nothing comparable``; a summary's status is its worst launch's, so
  more rounds cannot change it);
* otherwise: one more round, of the baseline and every configuration whose
  comparison is still open (with its twin, for the positive control).

The comparisons that must be answered are every configuration's decode
verdict against the baseline and the positive control's against its twin.
The A/A control is not one of them: it is the check that identical setups
are not called different, whatever the number of rounds.

With ``rounds.mode: race`` (``analysis.race``) the rounds after the planned ones
are a race: from the last planned round on, each judgement drops every
survivor the verdicts call slower than the current best, and the race ends
when one is left (``one left``), when every other survivor ties with the best
within ``smallest_effect`` (``tie``), or when the budget is spent (``budget``);
otherwise the next round holds the survivors, and only them.

Snakemake sees the next round only once the judgement exists (a checkpoint),
so ``-n`` after a round shows that round's jobs and nothing already measured;
a launch once measured is never rerun by a later round.

A judgement that stopped for want of budget (``budget``, ``planned rounds``)
also names the round it would have run (``next_with_budget``). A later
invocation with a larger budget continues there (``walk_rounds``): the walk
decides again, under the loaded budget, whether that round may run, and
nothing already measured or judged runs again. (Rerunning the last judgement
instead would not do: Snakemake 9 does not rerun a checkpoint behind another
one for its params alone.)

Format history of results/rounds/round-<r>/judgement.json:
  1  round, continue, ended_by (null while going on), why, next (the next round's members, or null),
     comparisons (each: config, against, verdict, ratio, detectable, open), launches, elapsed_min,
     burn_in (the burn-in record before round 1, round 1 only; else null).
  2  mode (sweep or race), race (a race's standings after the round, ``analysis.race.standings``; null in a
     sweep).
  3  next_with_budget (the round a larger budget runs next, when the budget or the planned rounds ended the
     sweep; else null); elapsed_min is the rounds' measuring time summed (was from the first launch's start to
     the last one's end, which counted the time between two invocations).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from specsweep.contracts import rounds as rounds_words
from specsweep.contracts.layout import CONTROL, launch_round
from specsweep.contracts.summary import ConfigSummary
from specsweep.contracts.vocabulary import CALLED, Status
from specsweep.files import read_json, write_json_atomic
from specsweep.plan.rounds import RoundSettings, planned_members, planned_rounds, round_order, round_plan

JUDGEMENT_FORMAT_VERSION = 3

#: Why a sweep's rounds ended (``judgement["ended_by"]``).
RESOLVED = "resolved"
BUDGET = "budget"
PLANNED = "planned rounds"
NOT_COMPARABLE = "nothing comparable"
ONE_LEFT, TIE = rounds_words.ONE_LEFT, rounds_words.TIE


def round_path(round_no: int | str, leaf: str) -> str:
    """results/rounds/round-<r>/<leaf> (``plan.json``, ``judgement.json``)."""
    return f"results/rounds/round-{round_no}/{leaf}"


def walk_rounds(launches: Mapping[str, int], baseline: str | None, aa_control: bool,
                judgement_of: Callable[[int], str], upto: int | None = None,
                extra_rounds: bool = True, planned: Callable[[int], list[tuple[str, str]]] | None = None,
                read: Callable[[str], dict] = read_json, settings: RoundSettings | None = None
                ) -> list[list[tuple[str, str]]]:
    """The members of every round, round 1 first: the planned rounds, then the rounds the judgements
    asked for; with ``upto``, only rounds 1..upto (fewer when the sweep ended before). ``judgement_of(r)``
    is the path of round r's judgement (in a Snakefile: ``checkpoints.judge_round.get(round=r).output[0]``,
    which stops the DAG where a judgement is missing and schedules the job that writes it). Without
    ``extra_rounds`` (no budget for them) the planned rounds are all there is and no judgement is read,
    so that ``-n`` sees every job exactly, with no checkpoint in the way. ``planned(r)`` (planned round r's
    members, ``planned_members`` of these launches) and ``read`` (a judgement's object) may be given memoised
    (``workflow.round_inputs.RoundWalk``)."""
    if planned is None:
        def planned(round_no: int) -> list[tuple[str, str]]:
            return planned_members(launches, baseline, aa_control, round_no,
                                   settings.first_round_baseline if settings is not None else 1)
    rounds: list[list[tuple[str, str]]] = []
    r = 1
    last_planned = planned_rounds(launches)
    members = planned(1)
    while members:
        rounds.append(members)
        if upto is not None and len(rounds) >= upto:
            break
        if r < last_planned:
            r += 1
            members = planned(r)
            continue
        if not extra_rounds:
            break
        judgement = read(judgement_of(r))
        if judgement.get("continue"):
            nxt = judgement["next"]
        elif settings is not None and continues(judgement, settings):
            nxt = judgement["next_with_budget"]
        else:
            break
        r += 1
        members = [(c, lid) for c, lid in nxt]
    return rounds


def continues(judgement: Mapping[str, Any], settings: RoundSettings) -> bool:
    """Whether a judgement that stopped for want of budget (``budget``, ``planned rounds``) is continued under
    ``settings``: a budget that allows another round after it (``_budget_spent`` decides, as the judgement did).
    A judgement of format 2 names no next round, and ends there."""
    if judgement.get("ended_by") not in (BUDGET, PLANNED) or not judgement.get("next_with_budget"):
        return False
    return settings.max_launches is not None and \
        _budget_spent(int(judgement["round"]), settings, judgement.get("elapsed_min"), "") is None


def members_of_round(rounds: Sequence[Sequence[tuple[str, str]]], round_no: int) -> list[tuple[str, str]]:
    return list(rounds[round_no - 1]) if round_no <= len(rounds) else []


def write_round_plan(round_no: int, members: Sequence[Sequence[str]], design: str, why: str,
                     settings: RoundSettings, out_path: str) -> dict[str, Any]:
    """plan_round: the round's order (a seeded permutation of its members) and design."""
    plan = round_plan(round_no, round_order([tuple(m) for m in members], settings.seed, round_no), design, why,
                      settings)
    write_json_atomic(out_path, plan)
    return plan


# ------------------------------------------------------------------ judging a round


def _open(row: Mapping[str, Any], effect: float) -> bool:
    """A comparison is open when it is not called and cannot yet see ``effect`` (80 % power)."""
    comparison = row.get("comparison") or {}
    if comparison.get("verdict") in CALLED:
        return False
    seen = comparison.get("detectable")
    return seen is None or seen > effect


def comparisons(rows: Sequence[Mapping[str, Any]], baseline: str | None, control: Mapping[str, Any] | None,
                effect: float, compare: Callable[[Any, Any], dict]) -> list[dict[str, Any]]:
    """The comparisons a round's judgement asks about: each compared row against the baseline, and the
    positive control against its twin (``compare(row, other)``: the primary verdict)."""
    out = []
    by_name = {(r["config"], r["point"]): r for r in rows}
    for r in rows:
        if r["config"] == baseline:
            continue
        if r["status"] in (Status.FAILED, Status.CONTAMINATED):
            # never compared, and more rounds cannot change that (a summary's status is its worst launch's)
            out.append({"config": r["config"], "against": None, "verdict": r["status"], "ratio": None,
                        "detectable": None, "open": False})
            continue
        if control and r["config"] == control.get("name") and (control.get("of"), r["point"]) in by_name:
            c = compare(r, by_name[(control["of"], r["point"])])
            against = control["of"]
        else:
            c = r.get("comparison") or {}
            against = baseline
        row = {"comparison": c}
        out.append({"config": r["config"], "against": against, "verdict": c.get("verdict"),
                    "ratio": c.get("ratio"), "detectable": c.get("detectable"), "open": _open(row, effect)})
    return out


def _budget_spent(round_no: int, settings: RoundSettings, elapsed_min: float | None, still: str
                  ) -> dict[str, Any] | None:
    """The decision to stop when the budget is spent (``still``: what is left open, in words), else None."""
    if settings.max_launches is not None and round_no >= settings.max_launches:
        return {"continue": False, "ended_by": BUDGET,
                "why": f"the budget of {settings.max_launches} launches per configuration is spent; {still}"}
    if settings.max_minutes is not None and elapsed_min is not None and elapsed_min >= settings.max_minutes:
        return {"continue": False, "ended_by": BUDGET,
                "why": f"the budget of {settings.max_minutes:g} min is spent ({elapsed_min:.1f} min); {still}"}
    return None


def decide_race(round_no: int, settings: RoundSettings, race: Mapping[str, Any], elapsed_min: float | None,
                effect: float) -> dict[str, Any]:
    """The decision of a race after round ``round_no`` (``race``: ``analysis.race.standings`` of the round):
    one left, a tie, the budget spent, or the next round of the survivors."""
    left, best = list(race["survivors"]), race.get("best")
    gone = [f"{c} (slower than {best})" for c in race.get("dropped") or []]
    gone += [f"{c} (failed)" for c in race.get("failed") or []]
    dropped = f"; dropped after round {round_no}: " + ", ".join(gone) if gone else ""
    if not left:
        return {"continue": False, "ended_by": NOT_COMPARABLE,
                "why": f"no configuration is left to race after round {round_no}{dropped}"}
    if len(left) == 1:
        return {"continue": False, "ended_by": ONE_LEFT,
                "why": f"{left[0]} is the one configuration left after round {round_no}{dropped}"}
    if race.get("tied"):
        return {"continue": False, "ended_by": TIE,
                "why": f"{', '.join(left)} are within {effect:.0%} of {best} (a tie) after round {round_no}{dropped}"}
    nxt = [[name, str(round_no + 1)] for name in sorted(left)]
    spent = _budget_spent(round_no, settings, elapsed_min, f"still racing: {', '.join(left)} (best so far: {best})")
    if spent is not None:
        return {**spent, "why": spent["why"] + dropped, "next_with_budget": nxt}
    return {"continue": True, "ended_by": None,
            "why": f"still racing: {', '.join(left)} (best so far: {best}){dropped}; round {round_no + 1} of at "
                   f"most {settings.max_launches}",
            "next": nxt}


def decide(round_no: int, rounds_planned: int, settings: RoundSettings, compared: Sequence[Mapping[str, Any]],
           baseline: str | None, control: Mapping[str, Any] | None, elapsed_min: float | None,
           next_planned: Sequence[tuple[str, str]], effect: float, race: Mapping[str, Any] | None = None
           ) -> dict[str, Any]:
    """The decision after round ``round_no`` (module docstring), without the comparisons' details; in a race
    (``race``: the round's standings), ``decide_race``'s after the planned rounds."""
    if round_no < rounds_planned:
        return {"continue": True, "ended_by": None, "why": f"planned round {round_no} of {rounds_planned}",
                "next": [list(m) for m in next_planned]}
    if settings.race and race is not None:
        return decide_race(round_no, settings, race, elapsed_min, effect)
    still = [c for c in compared if c["open"]]
    excluded = [c for c in compared if c["verdict"] in (Status.FAILED, Status.CONTAMINATED)]
    left_out = ("; not compared: " + ", ".join(f"{c['config']} ({c['verdict']})" for c in excluded)
                if excluded else "")
    if compared and len(excluded) == len(compared):
        return {"continue": False, "ended_by": NOT_COMPARABLE,
                "why": f"no configuration can be compared, more rounds cannot change that{left_out}"}
    if not still:
        return {"continue": False, "ended_by": RESOLVED,
                "why": f"every comparison is called or sees {effect:.0%} (80 % power) after {round_no} rounds"
                       + left_out}
    names = ", ".join(c["config"] for c in still)
    wanted = {baseline} | {c["config"] for c in still}
    if control and control.get("name") in wanted:
        wanted.add(control.get("of"))
    nxt = [[name, str(round_no + 1)] for name in sorted(n for n in wanted if n)]
    if settings.max_launches is None:
        return {"continue": False, "ended_by": PLANNED,
                "why": f"the {rounds_planned} planned rounds ran and no extra rounds were asked for "
                       f"(rounds.max_launches); still open at {effect:.0%}: {names}", "next_with_budget": nxt}
    spent = _budget_spent(round_no, settings, elapsed_min, f"still open at {effect:.0%}: {names}")
    if spent is not None:
        return {**spent, "next_with_budget": nxt}
    return {"continue": True, "ended_by": None,
            "why": f"still open at {effect:.0%}: {names}; round {round_no + 1} of at most {settings.max_launches}",
            "next": nxt}


def elapsed_minutes(summaries: Sequence[ConfigSummary]) -> float | None:
    """The rounds' measuring time in minutes: each round (``contracts.layout.launch_round`` of a launch id: the
    A/A control and the baseline's 1b, 1c, ... are round 1) from its first launch's start to its last one's end,
    summed; so a sweep continued another day (``next_with_budget``) does not count the time between its
    invocations."""
    spans: dict[str, list[float]] = {}
    for s in summaries:
        for e in s.launches:
            if e.started_at and e.ended_at:
                span = spans.setdefault(str(launch_round(e.launch)), [e.started_at, e.ended_at])
                span[0], span[1] = min(span[0], e.started_at), max(span[1], e.ended_at)
    return sum(end - start for start, end in spans.values()) / 60 if spans else None


def judge_round(round_no: int, rounds: Sequence[Sequence[tuple[str, str]]], params: Mapping[str, Any],
                out_path: str, log: TextIO, burn_in_path: str | None = None,
                budget: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """judge_round: the verdicts after ``round_no`` and whether another round runs (module docstring).

    ``rounds``: the members of rounds 1..round_no (``walk_rounds``); ``params``: ``workflow.round_inputs.round_params``
    (``plans``: each configuration's current plan key, whose launches are judged); ``budget``: the loaded
    config's (``RoundSettings.budget``; not in ``params``, so that raising it reruns no judgement).
    Each configuration's summary is built in memory from its launches so far, exactly as
    summarize_config builds it, and judged exactly as the report judges it.
    """
    from specsweep.analysis.race import judge_rows  # the race's standings, by the same verdicts
    from specsweep.analysis.rows import compare_primary, config_rows, explode_points  # the report's own verdicts
    from specsweep.workflow.inputs import schedule_of_rounds, summary_inputs  # summarize_config's own inputs
    from specsweep.workflow.jobs import summary_of_files

    settings = RoundSettings(**{**params["rounds"], **(budget or {})})
    launches_of = schedule_of_rounds(rounds[:round_no], sorted({c for r in rounds[:round_no] for c, _ in r}))
    summaries = []
    quiet = io.StringIO()
    for config in launches_of:
        inputs = summary_inputs(launches_of, config, params["plans"])
        labels = json.dumps((params.get("labels") or {}).get(config) or {})
        summaries.append(summary_of_files(inputs, quiet, "{}", labels))
    effect = float(params["smallest_effect"])
    baseline, control = params.get("baseline"), params.get("positive_control")
    rows, _ = config_rows(explode_points(summaries, expects=params.get("expects")), baseline, effect,
                          {(c, lid): k for k, members in enumerate(rounds[:round_no], 1) for c, lid in members})
    compared = comparisons(rows, baseline, control, effect, compare_primary)
    elapsed = elapsed_minutes(summaries)
    next_planned = planned_members(params["launches"], baseline, bool(params.get("aa_control")), round_no + 1,
                                   settings.first_round_baseline)
    rounds_planned = planned_rounds(params["launches"])
    race = None
    if settings.race:
        outside = set(params.get("outside_race") or ())  # a screen's check run: measured, never racing
        racing = sorted({c for c, lid in rounds[round_no - 1] if lid != CONTROL and c not in outside})
        race = judge_rows(rows, racing, effect, round_no, dropping=round_no >= rounds_planned)
    decision = decide(round_no, rounds_planned, settings, compared, baseline, control, elapsed,
                      next_planned, effect, race)
    judgement = {"format_version": JUDGEMENT_FORMAT_VERSION, "round": round_no, "mode": settings.mode, **decision,
                 "next": decision.get("next"), "next_with_budget": decision.get("next_with_budget"),
                 "race": race, "comparisons": compared,
                 "launches": {c: ids for c, ids in sorted(launches_of.items())},
                 "elapsed_min": elapsed,
                 "burn_in": read_json(burn_in_path) if burn_in_path else None}
    write_json_atomic(out_path, judgement)
    state = "another round" if judgement["continue"] else f"the sweep ends ({judgement['ended_by']})"
    print(f"round {round_no}: {state}: {judgement['why']}", file=log)
    return judgement
