"""A race that drops after its first round, on the real reference engine: ``launches: 1`` and
``rounds.first_round_baseline: 4``. After the burn-in, round 1 holds the baseline four times (launches 1, 1b,
1c, 1d) and its A/A control, a copy of it and a slowed copy (the test-only fault: 20 ms more every engine step,
several times slower on this CPU) once each; its judgement, the one-way model on the baseline's five launches
of round 1, drops the slowed configuration, and round 2 holds the two survivors only. The report counts the
baseline's launches of round 1 in what the race spent.
"""

from __future__ import annotations

import json

import pytest

from specsweep.testing.workflow import (
    SMALL_WORKLOAD,
    copy_workflow,
    measured_launches,
    plain_default_config,
    planned_launches,
    run_pipeline,
)
from specsweep.workflow.rounds import round_path

pytestmark = pytest.mark.slow

ROUND_1 = round_path(1, "judgement.json")


def test_round_one_with_the_baseline_three_times_drops_the_slowed_configuration(tmp_path):
    work = copy_workflow(tmp_path)
    config = plain_default_config()
    # 10 measured requests a launch: the fewest a side may have to be judged (stats.MIN_SAMPLES), one launch each
    config["defaults"]["workload"].update({**SMALL_WORKLOAD, "num_prompts": 5, "repeats": 2})
    config["defaults"]["launches"] = 1
    nospec = config["configurations"]["nospec"]
    config["configurations"] = {
        "nospec": nospec,
        "nospec-again": {"description": "the baseline's settings again", "extends": "nospec"},
        "nospec-slow": {"description": "the baseline, every step 20 ms longer (test-only fault)", "extends": "nospec",
                        "env": {"SPECSWEEP_TEST_STEP_DELAY_S": "0.02"}}}
    config["aa_control"] = True
    config["smallest_effect"] = 0.1
    config["burn_in"] = {"enabled": True}
    config["rounds"] = {"seed": 1, "max_launches": 2, "mode": "race", "first_round_baseline": 4}
    run_pipeline(work, config, args=[ROUND_1])
    judged = json.loads((work / ROUND_1).read_text())
    assert judged["race"]["dropping"] and judged["race"]["model"] == "one-way", judged["race"]
    assert judged["race"]["dropped"] == ["nospec-slow"], judged["race"]["against"]
    assert judged["launches"]["nospec"] == ["1", "1b", "1c", "1d", "aa"], judged["launches"]
    measured = measured_launches(work)
    assert measured == {("nospec", lid) for lid in ("1", "1b", "1c", "1d", "aa")} | {
        ("nospec-again", "1"), ("nospec-slow", "1")}
    if judged["continue"]:  # the copies may also end it (one left by a false call, or a tie)
        assert planned_launches(work) == {("nospec", "2"), ("nospec-again", "2")}
    run_pipeline(work, None)
    report = json.loads((work / "results" / "report.json").read_text())
    race = report["race"]
    history = {h["config"]: (h["outcome"], h["round"]) for h in race["history"]}
    assert history["nospec-slow"] == ("dropped", 1), history
    cost = race["launches"]
    assert cost["spent"] == len(measured_launches(work)) and cost["per_configuration"]["nospec-slow"] == 1
    assert cost["per_configuration"]["nospec"] >= 5, "its four launches of round 1 and the A/A control"
    rounds = {(e["config"], e["launch"]): e["planned_place"][0] for e in report["launches"]["entries"]}
    assert all(rounds[("nospec", lid)] == 1 for lid in ("1", "1b", "1c", "1d", "aa")), rounds
    md = (work / "results" / "report.md").read_text()
    assert "| nospec-slow | dropped in round 1 |" in md
    assert (work / "results" / "plots" / "race.png").exists()
