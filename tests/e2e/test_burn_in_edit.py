"""An edit with the burn-in on (as the shipped config.yaml has it) reruns the edited configuration's launches and
a burn-in before them, and no launch measured already.

The burn-in's record was a temp() file that every launch of the planned rounds waited for: an edit needed the
burn-in again, the file was gone, and Snakemake reran every launch waiting for it (all of round 1, the A/A
control included), so each edit of the default config relaunched the whole sweep. The pipeline of
tests/e2e/test_pipeline.py runs without a burn-in and did not see it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specsweep.testing.workflow import copy_workflow, plain_default_config, planned_jobs, run_pipeline

pytestmark = pytest.mark.slow

TINY = {"num_prompts": 2, "output_len": 8, "repeats": 1,
        "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 1}}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    config = plain_default_config()
    config["defaults"]["workload"].update(TINY)
    config["configurations"] = {name: config["configurations"][name] for name in ("nospec", "eagle3-gloo")}
    config["aa_control"] = False  # four launches in all: the burn-in's two units and one of each configuration
    config["burn_in"] = {"enabled": True, "requests": 2, "min_units": 2, "max_units": 2}
    # the summaries only: no report to render (what reruns is read from the launches' jobs)
    return run_pipeline(copy_workflow(tmp_path_factory.mktemp("burnin")), config,
                        args=["results/nospec/summary.json", "results/eagle3-gloo/summary.json"])


def test_an_edit_reruns_the_burn_in_and_the_edited_launch_only(work):
    original = (work / "config.yaml").read_text()
    try:
        config = yaml.safe_load(original)
        config["configurations"]["eagle3-gloo"]["env"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
        (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        jobs = planned_jobs(work)
        assert sorted((name, launch) for rule, name, launch in jobs if rule == "benchmark_server") == [
            ("eagle3-gloo", "1")], jobs
        assert [rule for rule, _, _ in jobs].count("burn_in_host") == 1, "a burn-in before the launch"
    finally:
        (work / "config.yaml").write_text(original)
