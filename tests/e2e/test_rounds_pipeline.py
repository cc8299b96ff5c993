"""Rounds until the question is answered, on the real reference engine, one round at a time.

The baseline, one launch planned, and a positive control slowed by 50 % (the
reference engine's test-only fault): one round (one launch each and the A/A
control, 6 requests a launch) cannot resolve a 10 % difference (fewer than
the verdict's 10 requests a side, and one degree of freedom), so the
judgement of round 1 asks for round 2; a later round resolves it. After
each round, ``snakemake -n`` shows exactly the next round's jobs (its plan,
its launches, its judgement) and no launch already measured. Two burn-in
units run before round 1, and round 1's judgement keeps their record; the
order of every round is its seeded permutation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsweep.plan.rounds import round_order
from specsweep.testing.workflow import (
    copy_workflow,
    measured_launches,
    plain_default_config,
    planned_launches,
    run,
    run_pipeline,
)

pytestmark = pytest.mark.slow

JUDGEMENT = "results/rounds/round-{}/judgement.json"


def rounds_config() -> dict:
    config = plain_default_config()
    config["defaults"]["workload"].update(
        num_prompts=6, output_len=24, repeats=1,
        warmup={"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 2})
    nospec = config["configurations"]["nospec"]
    config["configurations"] = {"nospec": nospec}
    config["positive_control"] = {"of": "nospec", "slowdown": 0.5}
    config["smallest_effect"] = 0.10
    config["rounds"] = {"seed": 3, "max_launches": 4}
    config["burn_in"] = {"enabled": True, "requests": 2, "min_units": 2, "max_units": 2}
    return config


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("rounds"))


def test_rounds_go_on_until_the_difference_is_resolved(work):
    run_pipeline(work, rounds_config(), args=[JUDGEMENT.format(1)])
    first = json.loads((work / JUDGEMENT.format(1)).read_text())
    assert first["continue"] and first["ended_by"] is None, first
    assert any(c["open"] for c in first["comparisons"]), first["comparisons"]
    measured = measured_launches(work)
    assert measured == {("nospec", "1"), ("nospec", "aa"), ("nospec-slow50", "1")}
    r = 1
    while True:
        nxt = planned_launches(work)
        judgement = json.loads((work / JUDGEMENT.format(r)).read_text())
        if not judgement["continue"]:
            assert nxt == set(), nxt
            break
        # -n shows the next round's launches, and none already measured
        assert nxt == {(c, lid) for c, lid in judgement["next"]}, (nxt, judgement["next"])
        assert not (nxt & measured)
        r += 1
        run_pipeline(work, None, args=[JUDGEMENT.format(r)])
        now = measured_launches(work)
        assert now - measured == nxt
        measured = now
    assert judgement["ended_by"] == "resolved", judgement
    assert r >= 2
    # the control's comparison was called in the end
    control = next(c for c in judgement["comparisons"] if c["config"] == "nospec-slow50")
    assert control["verdict"] == "slower", control


def test_the_report_names_the_design_the_rounds_and_the_order(work):
    run_pipeline(work, None)
    report = (work / "results" / "report.md").read_text()
    assert "Design: **sequential**" in report and "rounds.seed 3" in report
    assert "they ended by **resolved**" in report
    assert "Burn-in: 2 unmeasured launches of nospec" in report
    burn_in = json.loads((work / JUDGEMENT.format(1)).read_text())["burn_in"]
    assert [u["unit"] for u in burn_in["units"]] == [1, 2] and burn_in["config"] == "nospec"
    plan2 = json.loads((work / "results/rounds/round-2/plan.json").read_text())
    assert [tuple(x) for x in plan2["order"]] == round_order([tuple(x) for x in plan2["order"]], 3, 2)
    # the launches started in each round's order
    records = [json.loads(p.read_text()) for p in (work / "results").glob("*/plans/*/launch-*/launch.json")]
    ran = [(rec["plan_name"], rec["launch"]) for rec in sorted(records, key=lambda r: r["started_at"])]
    plans = sorted((work / "results/rounds").glob("round-*/plan.json"), key=lambda p: int(p.parent.name[6:]))
    planned = [tuple(x) for p in plans for x in json.loads(p.read_text())["order"]]
    assert ran == planned
    assert run(["python3", "-m", "snakemake", "--cores", "1", "-n", "all"], work).returncode == 0


def test_a_judgement_that_reruns_alone_launches_no_burn_in(work):
    """A judgement rerun without any launch (here forced; a switch of config files back does it too) reads the
    burn-in's lasting record, not the file the launches wait for: no burn-in server starts."""
    result = run(["python3", "-m", "snakemake", "--cores", "1", "-n", "--forcerun", "judge_round", "all"], work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "checkpoint judge_round:" in result.stdout, result.stdout[-3000:]
    assert "rule burn_in_host:" not in result.stdout and "rule benchmark_server:" not in result.stdout
