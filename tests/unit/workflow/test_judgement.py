"""The judgement after a round: go on or stop, and why (workflow.rounds)."""

from __future__ import annotations

import json

import pytest

from specsweep.plan.rounds import RoundSettings
from specsweep.workflow.rounds import BUDGET, NOT_COMPARABLE, PLANNED, RESOLVED, decide, walk_rounds

CONTROL = {"name": "b-slow10", "of": "b", "slowdown": 0.1}


def _c(config, verdict, detectable, open_):
    return {"config": config, "against": "base", "verdict": verdict, "ratio": 1.0, "detectable": detectable,
            "open": open_}


def test_planned_rounds_always_run():
    got = decide(1, 2, RoundSettings(), [_c("a", "no significant difference", 0.5, True)], "base", None, 1.0,
                 [("a", "2"), ("base", "2")], 0.1)
    assert got["continue"] and got["next"] == [["a", "2"], ["base", "2"]]


def test_resolved_when_every_comparison_is_called_or_sees_the_effect():
    compared = [_c("a", "faster", 0.3, False), _c("b", "no significant difference", 0.04, False)]
    got = decide(2, 2, RoundSettings(max_launches=6), compared, "base", None, 3.0, [], 0.1)
    assert not got["continue"] and got["ended_by"] == RESOLVED


def test_no_budget_means_the_planned_rounds_only():
    got = decide(2, 2, RoundSettings(), [_c("a", "no significant difference", 0.3, True)], "base", None, 3.0,
                 [], 0.1)
    assert not got["continue"] and got["ended_by"] == PLANNED and "a" in got["why"]


@pytest.mark.parametrize("settings,elapsed", [(RoundSettings(max_launches=3), 1.0),
                                              (RoundSettings(max_launches=9, max_minutes=5), 6.0)])
def test_the_budget_ends_the_rounds(settings, elapsed):
    got = decide(3, 2, settings, [_c("a", "no significant difference", 0.3, True)], "base", None, elapsed, [], 0.1)
    assert not got["continue"] and got["ended_by"] == BUDGET


def test_another_round_holds_the_baseline_the_open_ones_and_the_controls_twin():
    compared = [_c("a", "faster", 0.3, False), _c("b-slow10", "no significant difference", 0.2, True),
                _c("c", "no significant difference", 0.2, True)]
    got = decide(2, 2, RoundSettings(max_launches=5), compared, "base", CONTROL, 2.0, [], 0.1)
    assert got["continue"] and got["next"] == [["b", "3"], ["b-slow10", "3"], ["base", "3"], ["c", "3"]]


def test_walk_reads_the_judgements_and_stops_where_one_says_stop(tmp_path):
    launches = {"base": 2, "a": 2}
    paths = {r: tmp_path / f"j{r}.json" for r in (1, 2, 3)}
    paths[2].write_text(json.dumps({"continue": True, "next": [["a", "3"], ["base", "3"]]}))
    paths[3].write_text(json.dumps({"continue": False, "next": None}))
    rounds = walk_rounds(launches, "base", True, lambda r: str(paths[r]))
    assert [len(r) for r in rounds] == [3, 2, 2]
    assert ("base", "aa") in rounds[0] and rounds[2] == [("a", "3"), ("base", "3")]
    assert walk_rounds(launches, "base", True, lambda r: str(paths[r]), upto=2) == rounds[:2]


def test_failed_or_contaminated_configurations_are_named_and_keep_no_round_going():
    compared = [_c("a", "faster", 0.3, False), _c("b", "contaminated", None, False)]
    got = decide(2, 2, RoundSettings(max_launches=6), compared, "base", None, 3.0, [], 0.1)
    assert got["ended_by"] == RESOLVED and "not compared: b (contaminated)" in got["why"]
    got = decide(2, 2, RoundSettings(max_launches=6), [_c("b", "contaminated", None, False)], "base", None, 3.0,
                 [], 0.1)
    assert not got["continue"] and got["ended_by"] == NOT_COMPARABLE


def test_without_extra_rounds_no_judgement_is_read():
    """No budget for extra rounds: the planned rounds are all there is, and the walk reads no judgement (so
    ``-n`` plans every job exactly, with no checkpoint in the way)."""
    def never(r):
        raise AssertionError(f"judgement {r} read")
    rounds = walk_rounds({"base": 2, "a": 2}, "base", True, never, extra_rounds=False)
    assert [len(r) for r in rounds] == [3, 2]


def test_a_start_s_memoised_walk_answers_as_the_walk_and_reads_a_judgement_written_again(tmp_path):
    """``RoundWalk`` (every launch, summary and judgement job of a start walks the rounds): the same rounds and
    schedule as ``walk_rounds``; a judgement written again is read again; a caller's change to a walk's rounds
    reaches no later walk."""
    import os

    from specsweep.workflow.inputs import schedule_of_rounds
    from specsweep.workflow.round_inputs import RoundWalk
    from specsweep.workflow.round_inputs import walk_rounds as config_walk

    config = {"baseline": "base", "rounds": {"max_launches": 4}, "configurations": {}}
    launches = {"base": 2, "a": 2, "b": 1}
    paths = {r: tmp_path / f"j{r}.json" for r in (2, 3)}
    paths[2].write_text(json.dumps({"continue": True, "next": [["a", "3"], ["base", "3"]]}))
    paths[3].write_text(json.dumps({"continue": False, "next": None}))
    walk = RoundWalk(launches, config)

    def judgement_of(r):
        return str(paths[r])

    for upto in (1, 2, None):
        assert walk.walk(judgement_of, upto) == config_walk(launches, config, judgement_of, upto)
    rounds = walk.walk(judgement_of)
    assert [len(r) for r in rounds] == [4, 2, 2]
    assert walk.schedule(rounds) == schedule_of_rounds(rounds, ["a", "b", "base"])
    rounds[0].append(("c", "1"))
    assert ("c", "1") not in walk.walk(judgement_of)[0]
    paths[2].write_text(json.dumps({"continue": False, "next": None}))
    os.utime(paths[2], ns=(1, 1))  # another mtime, whatever the clock's resolution
    assert [len(r) for r in walk.walk(judgement_of)] == [4, 2]


def test_a_judgement_ended_by_its_budget_names_the_round_a_larger_budget_runs():
    got = decide(3, 2, RoundSettings(max_launches=3), [_c("a", "no significant difference", 0.3, True)], "base",
                 None, 1.0, [], 0.1)
    assert got["ended_by"] == BUDGET and got["next_with_budget"] == [["a", "4"], ["base", "4"]]
    got = decide(2, 2, RoundSettings(), [_c("a", "no significant difference", 0.3, True)], "base", None, 1.0, [], 0.1)
    assert got["ended_by"] == PLANNED and got["next_with_budget"] == [["a", "3"], ["base", "3"]]
    compared = [_c("a", "faster", 0.3, False)]
    assert "next_with_budget" not in decide(2, 2, RoundSettings(max_launches=3), compared, "base", None, 1.0, [], 0.1)


@pytest.mark.parametrize("ended,settings,walked", [
    # the budget that ended it, again: the walk ends where the judgement did
    ({"ended_by": BUDGET}, RoundSettings(max_launches=2), 2),
    # a larger one: round 3 of the named members, whose judgement is then read (and stops it)
    ({"ended_by": BUDGET}, RoundSettings(max_launches=3), 3),
    # the planned rounds only, then a budget: the same
    ({"ended_by": PLANNED}, RoundSettings(max_launches=5), 3),
    # a time budget spent still (2.5 min measured, 2 allowed): no more rounds, whatever max_launches says
    ({"ended_by": BUDGET}, RoundSettings(max_launches=5, max_minutes=2), 2),
    # an answer is not continued by any budget
    ({"ended_by": RESOLVED}, RoundSettings(max_launches=9), 2),
    # a judgement of format 2 names no next round: it ends there
    ({"ended_by": BUDGET, "next_with_budget": None}, RoundSettings(max_launches=9), 2),
])
def test_a_larger_budget_continues_a_walk_where_the_last_judgement_stopped(tmp_path, ended, settings, walked):
    launches = {"base": 2, "a": 2}
    paths = {r: tmp_path / f"j{r}.json" for r in (2, 3)}
    paths[2].write_text(json.dumps({"round": 2, "continue": False, "next": None, "elapsed_min": 2.5,
                                    "next_with_budget": [["a", "3"], ["base", "3"]], **ended}))
    paths[3].write_text(json.dumps({"round": 3, "continue": False, "ended_by": RESOLVED, "next": None}))
    rounds = walk_rounds(launches, "base", True, lambda r: str(paths[r]), settings=settings)
    assert len(rounds) == walked
    if walked == 3:
        assert rounds[2] == [("a", "3"), ("base", "3")]
