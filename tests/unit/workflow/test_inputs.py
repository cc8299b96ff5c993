"""rules/images.smk without Docker: dry-run job counts and rerun triggers of
the image rules, and their input functions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from specsweep.images.tag import image_tag
from specsweep.testing.workflow import REPO, copy_workflow, job_counts
from specsweep.workflow import inputs


def _dry(work: Path, *targets: str) -> dict[str, int]:
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "1", "-n", *targets]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)  # noqa: S603
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return job_counts(result.stdout)


def test_dry_run_builds_the_image_once(tmp_path):
    counts = _dry(copy_workflow(tmp_path), "all")
    assert counts["build_image"] == 1
    assert counts["benchmark_server"] == 3  # two configurations, and the baseline's A/A control launch


def test_push_target(tmp_path):
    counts = _dry(copy_workflow(tmp_path), "push")
    assert counts == {"build_image": 1, "push_images": 1, "push": 1}


def test_rule_inputs_are_explicit_and_content_based():
    config = yaml.safe_load((REPO / "config/docker-cpu.yaml").read_text())
    assert inputs.image_tag_params(config, REPO, "reference") == image_tag("reference", config["images"]["reference"], REPO)
    assert '"description"' not in inputs.image_spec_json(config, "reference")
    assert inputs.image_manifests(config) == ["results/images/reference.json"]
    assert '"url":"127.0.0.1:5000"' in inputs.registry_json(config)
    edited = {"images": {"reference": dict(config["images"]["reference"], description="other words")}}
    assert inputs.image_spec_json(edited, "reference") == inputs.image_spec_json(config, "reference")
