"""The round plan (``contracts.rounds.RoundPlan``): read, written, positions and partners; bad files refused
with the file, the key and what is allowed."""

from __future__ import annotations

import json

import pytest

from specsweep.contracts.rounds import Design, RoundPlan, RoundPlanError

GOOD = {"format_version": 1, "round": 2, "design": "side-by-side", "why": "every server fits on the CPU at once",
        "seed": 0, "order": [["eagle3-shm", "2"], ["nospec", "2"], ["nospec", "aa"]],
        "budget": {"max_launches": 6, "max_minutes": None}}


def test_a_round_plan_reads_and_writes_itself_and_knows_positions_and_partners(tmp_path):
    path = tmp_path / "round-2.json"
    path.write_text(json.dumps(GOOD))
    plan = RoundPlan.load(path)
    assert plan.to_dict() == GOOD and plan.design == Design.SIDE_BY_SIDE
    assert plan.position("nospec", "aa") == 3
    assert plan.partners("nospec", "2") == (("eagle3-shm", "2"), ("nospec", "aa"))
    with pytest.raises(RoundPlanError, match=r"round 2: order has no entry \['nospec', '1'\]"):
        plan.position("nospec", "1")


@pytest.mark.parametrize("change, message", [
    ({"design": "parallel"}, "design 'parallel': allowed ['side-by-side', 'sequential']"),
    ({"round": 0}, "round 0: expected an integer >= 1"),
    ({"format_version": 2}, "format_version 2; this checkout reads 1"),
    ({"order": [["nospec"]]}, "order: expected a non-empty list of [configuration, launch] string pairs"),
    ({"order": [["a", "1"], ["a", "1"]]}, "order: a launch is listed twice"),
    ({"why": ""}, "why: expected one sentence saying why this design"),
    ({"extra": 1}, "unknown keys ['extra']"),
    ({"budget": 3}, "budget 3: expected an object"),
])
def test_a_bad_round_plan_names_the_file_the_key_and_the_allowed_values(tmp_path, change, message):
    path = tmp_path / "round.json"
    path.write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(RoundPlanError) as info:
        RoundPlan.load(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(RoundPlanError, match="not a readable JSON round plan"):
        RoundPlan.load(tmp_path / "absent.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(RoundPlanError, match="broken.json: not a readable JSON round plan"):
        RoundPlan.load(tmp_path / "broken.json")


def test_the_workflows_round_plan_is_this_record():
    """``plan.rounds.round_plan`` writes what ``RoundPlan`` reads, byte for byte the same object."""
    from specsweep.plan.rounds import RoundSettings, round_plan

    written = round_plan(2, [("eagle3-shm", "2"), ("nospec", "aa")], "sequential", "asked for",
                         RoundSettings(seed=7, max_launches=4))
    assert RoundPlan.from_dict(written).to_dict() == written
    assert written["budget"] == {"max_launches": 4, "max_minutes": None} and written["seed"] == 7
