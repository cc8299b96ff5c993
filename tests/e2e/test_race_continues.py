"""A race ended by its budget continues where it stopped when the budget grows, on the real reference engine.

Two configurations with the same settings race with one planned round and a budget of one launch each: with one
launch each the blocked model has no degree of freedom, so nothing is called, no tie either (it needs their
interval within 0.1 %, ``smallest_effect``), and the race ends by its budget. Raised to two, ``snakemake -n``
plans round 2 of both, nothing measured and no judgement again; the run measures round 2 and writes its
judgement; the report counts both rounds. No burn-in and no A/A control: this checks the rounds' bookkeeping.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specsweep.testing.workflow import (
    SMALL_WORKLOAD,
    SNAKEMAKE,
    copy_workflow,
    job_counts,
    measured_launches,
    plain_default_config,
    planned_launches,
    run,
    run_pipeline,
)

pytestmark = pytest.mark.slow

JUDGEMENT = "results/rounds/round-{}/judgement.json"
PAIR = ("nospec", "nospec-again")


def one_round_race() -> dict:
    config = plain_default_config()
    config["defaults"]["workload"].update(SMALL_WORKLOAD)
    config["configurations"] = {"nospec": config["configurations"]["nospec"],
                                "nospec-again": {"description": "the baseline's settings again", "extends": "nospec"}}
    config["aa_control"] = False
    config["smallest_effect"] = 0.001
    config["rounds"] = {"seed": 2, "design": "sequential", "max_launches": 1, "mode": "race"}
    return config


def test_a_larger_budget_runs_the_next_round_of_the_survivors_and_nothing_measured(tmp_path: Path):
    work = copy_workflow(tmp_path)
    run_pipeline(work, one_round_race())
    first = json.loads((work / JUDGEMENT.format(1)).read_text())
    assert first["ended_by"] == "budget" and not first["continue"], first["why"]
    assert first["next_with_budget"] == [[c, "2"] for c in PAIR], first
    before = measured_launches(work)
    assert before == {(c, "1") for c in PAIR}
    assert planned_launches(work) == set()  # the same budget: the race is over

    config = yaml.safe_load((work / "config.yaml").read_text())
    config["rounds"]["max_launches"] = 2
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert planned_launches(work) == {(c, "2") for c in PAIR}
    dry = run([*SNAKEMAKE, "-n", "all"], work)
    counts = job_counts(dry.stdout)
    # round 2's judgement, nothing of round 1 again (the budget is not a param of its jobs); round 2's plan
    # comes once its judgement is written (the report's view of the rounds)
    assert counts.get("judge_round") == 1 and "plan_round" not in counts, counts
    assert "Missing output files: results/rounds/round-2/judgement.json" in dry.stdout

    round1 = (work / "results" / "nospec").glob("plans/*/launch-1/outcome.json")
    stamps = {p: p.stat().st_mtime_ns for p in round1}
    run_pipeline(work, None)
    assert measured_launches(work) == before | {(c, "2") for c in PAIR}
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # round 1 not measured again
    second = json.loads((work / JUDGEMENT.format(2)).read_text())
    assert second["round"] == 2 and set(second["launches"]) == set(PAIR), second
    assert all(ids == ["1", "2"] for ids in second["launches"].values()), second["launches"]
    report = json.loads((work / "results" / "report.json").read_text())
    assert report["race"]["launches"]["spent"] == 4, report["race"]["launches"]
    assert report["race"]["ended_by"] == second["ended_by"]
    assert planned_launches(work) == set()
