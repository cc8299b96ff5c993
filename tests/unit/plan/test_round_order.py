"""Rounds: seeded orders within each round, the A/A control's place, priorities (plan.rounds)."""

from __future__ import annotations

import collections

from specsweep.plan.rounds import (
    RoundSettings,
    planned_members,
    planned_order,
    planned_rounds,
    position_in_round,
    priority_in_round,
    round_of,
    round_order,
)

LAUNCHES = {"nospec": 2, "eagle3-gloo": 2, "eagle3-shm": 2, "eagle3-shm-slow10": 2}


def test_every_planned_launch_runs_once_and_the_control_joins_round_one():
    order = planned_order(LAUNCHES, "nospec", True, seed=0)
    assert len(order) == len(set(order)) == 9
    assert set(order[:5]) == {(c, "1") for c in LAUNCHES} | {("nospec", "aa")}
    assert {lid for _, lid in order[5:]} == {"2"}
    assert planned_rounds(LAUNCHES) == 2 and round_of("aa", 2) == 1 and round_of("2", 2) == 2
    # raising the launches never moves the control (a measured one is kept)
    assert round_of("aa", 5) == 1


def test_the_order_is_a_function_of_seed_round_and_members_only():
    members = planned_members(LAUNCHES, "nospec", True, 2)
    assert round_order(members, 7, 2) == round_order(list(reversed(members)), 7, 2)
    assert sorted(round_order(members, 7, 2)) == sorted(members)
    assert len({tuple(round_order(members, seed, 2)) for seed in range(20)}) > 10


def test_no_configuration_is_always_first_and_the_control_takes_every_place():
    """Over seeds, the baseline leads a round about as often as any other configuration (1 in 4 here), and
    the A/A control is not pinned to one place."""
    firsts = collections.Counter()
    control_places = collections.Counter()
    for seed in range(400):
        order = round_order(planned_members(LAUNCHES, "nospec", True, 1), seed, 1)
        firsts[order[0][0] if order[0][1] != "aa" else "aa"] += 1
        control_places[position_in_round(order, "nospec", "aa")] += 1
    assert set(control_places) == {1, 2, 3, 4, 5}
    assert all(40 <= n <= 120 for n in firsts.values()), firsts  # 80 expected for each of 5 first places
    baseline_first = sum(round_order(planned_members(LAUNCHES, "nospec", True, 2), s, 2)[0][0] == "nospec"
                         for s in range(400))
    assert 60 <= baseline_first <= 140  # 100 expected: 1 in 4


def test_priorities_fall_along_the_round_order():
    order = round_order(planned_members(LAUNCHES, "nospec", True, 1), 3, 1)
    prios = [priority_in_round(order, c, lid) for c, lid in order]
    assert prios == sorted(prios, reverse=True) and len(set(prios)) == len(prios)
    assert all(0 < p < 99 for p in prios)


def test_settings_from_config():
    assert RoundSettings.from_config({}) == RoundSettings()
    got = RoundSettings.from_config({"rounds": {"seed": 5, "max_launches": 6, "design": "sequential"}})
    assert (got.seed, got.max_launches, got.design, got.max_minutes) == (5, 6, "sequential", None)


def test_the_baseline_runs_first_round_baseline_times_in_round_one_and_once_a_round_after():
    import pytest

    from specsweep.contracts import layout
    from specsweep.plan.config import load_schema

    launches = {"a": 1, "b": 1, "c": 2}
    round1 = planned_members(launches, "a", True, 1, first_round_baseline=4)
    assert round1 == [("a", "1"), ("b", "1"), ("c", "1"), ("a", "1b"), ("a", "1c"), ("a", "1d"), ("a", "aa")]
    assert planned_members(launches, "a", True, 2, first_round_baseline=4) == [("c", "2")]
    assert planned_members(launches, "a", False, 1, 2) == [("a", "1"), ("b", "1"), ("c", "1"), ("a", "1b")]
    assert planned_members(launches, None, True, 1, 4) == [("a", "1"), ("b", "1"), ("c", "1")], "no baseline, none"
    assert [round_of(lid, 1) for _, lid in round1] == [1] * 7 and round_of("12", 1) == 12
    with pytest.raises(ValueError, match="not a launch id"):
        round_of("1bb", 1)
    # the launch ids the rules accept (their {launch} wildcard) are these, and at most as many as the schema allows
    import re

    pattern = re.compile(f"^(?:{layout.LAUNCH_ID_RE})$")
    assert all(pattern.match(lid) for lid in ["1", "2", "17", "1b", "1z", "aa"])
    assert not any(pattern.match(lid) for lid in ["0", "1a", "2b", "1bb", "a", "b"])
    most = load_schema()["properties"]["rounds"]["properties"]["first_round_baseline"]["maximum"]
    assert most == layout.MAX_FIRST_ROUND_BASELINE and layout.first_round_copy(most) == "1z"
    with pytest.raises(ValueError, match="allowed 2..26"):
        layout.first_round_copy(most + 1)
    assert sorted(["aa", "2", "1c", "1", "1b"], key=layout.launch_sort_key) == ["1", "1b", "1c", "2", "aa"]
    settings = RoundSettings.from_config({"rounds": {"first_round_baseline": 4, "mode": "race"}})
    assert settings.first_round_baseline == 4 and settings.as_dict()["first_round_baseline"] == 4
    assert "first_round_baseline" not in RoundSettings.from_config({}).as_dict(), "absent at 1: params unchanged"
