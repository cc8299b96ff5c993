"""A race with a screen run in the results/ of a sweep of the same configurations, on the real reference engine.

First a sweep (config/backends-cpu.yaml's way: two all-reduce backends at TP=2, small workload); then the same
configurations as a race with the screen (config/screen-cpu.yaml's keys) and a third planned round in the
same directory. The race's plans are the sweep's, so it launches only the new round (after a burn-in); its
last judgements are its own, and the report gives the race. Two earlier faults: the sweep's judgements were
taken as the race's and render_report stopped on missing best-configuration files (a job waiting for a
checkpoint not on disk skipped Snakemake's rerun checks: rules/common.smk, checkpoint_pending); and with the
burn-in run again, a launch due only because its round is new never ran (workflow.stored.launch_measured).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specsweep.testing.workflow import REPO, SMALL_WORKLOAD, copy_workflow, measured_launches, run_pipeline

pytestmark = pytest.mark.slow

JUDGEMENT = "results/rounds/round-{}/judgement.json"


def sweep_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "backends-cpu.yaml").read_text())
    config["configurations"] = {k: v for k, v in config["configurations"].items() if k.startswith("nospec")}
    config["defaults"]["workload"].update(SMALL_WORKLOAD)
    config["defaults"]["launches"] = 2
    config["defaults"]["profile"] = {"enabled": False}
    config["burn_in"] = {"requests": 2, "min_units": 2, "max_units": 2, "tolerance": 0.5, "ready_tolerance": 1.0}
    return config


def race_overlay() -> dict:
    return {"defaults": {"launches": 3}, "rounds": {"mode": "race", "max_launches": 3},
            "screen": {"enabled": True, "settings": ["server_args.all-reduce-backend"]}}


def test_a_race_after_a_sweep_in_the_same_results_judges_its_own_rounds(tmp_path: Path):
    work = copy_workflow(tmp_path)
    run_pipeline(work, sweep_config())
    swept = json.loads((work / JUDGEMENT.format(2)).read_text())
    assert swept["mode"] == "sweep" and swept["race"] is None, swept
    measured = measured_launches(work)
    assert len(measured) == 5, measured  # 2 configurations x 2 launches and the A/A control

    (work / "race.yaml").write_text(yaml.safe_dump(race_overlay(), sort_keys=False))
    stamps = {p: p.stat().st_mtime_ns for p in (work / "results").glob("*/plans/*/launch-*/outcome.json")}
    run_pipeline(work, None, args=["all", "--configfile", "config.yaml", "race.yaml"])
    # the same plans: round 3 launched, nothing measured launched again
    assert measured_launches(work) == measured | {("nospec-gloo", "3"), ("nospec-shm", "3")}
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    raced = json.loads((work / JUDGEMENT.format(3)).read_text())
    assert raced["mode"] == "race" and raced["race"] is not None, raced
    report = json.loads((work / "results" / "report.json").read_text())
    race = report["race"]
    assert race is not None and race["screen"] is not None, race
    assert race["launches"]["spent"] == len(measured) + 2, race["launches"]
    assert {h["config"] for h in race["history"]} == {"nospec-gloo", "nospec-shm"}
