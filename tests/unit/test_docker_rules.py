"""rules/images.smk without Docker: dry-run job counts and rerun triggers of
the image rules, and their input functions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from specsweep.docker import ImageRuleInputs, image_tag

REPO = Path(__file__).resolve().parents[2]
COPY = ["Snakefile", "rules", "scripts", "schemas", "envs", "profiles", "report", "containers", "config", "specsweep"]


def _work(tmp_path: Path) -> Path:
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, tmp_path / name)
    return tmp_path


def _dry(work: Path, *targets: str) -> dict[str, int]:
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "1", "-n", *targets]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)  # noqa: S603
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if "Job stats:" not in result.stdout:
        return {}
    table = result.stdout.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^([a-z_]+)\s+(\d+)$", table, flags=re.M) if m[1] != "total"}


def test_dry_run_builds_the_image_once(tmp_path):
    counts = _dry(_work(tmp_path), "all")
    assert counts["build_image"] == 1
    assert counts["benchmark_server"] == 2


def test_push_target(tmp_path):
    counts = _dry(_work(tmp_path), "push")
    assert counts == {"build_image": 1, "push_images": 1, "push": 1}


def test_rule_inputs_are_explicit_and_content_based():
    config = yaml.safe_load((REPO / "config/docker-cpu.yaml").read_text())
    inputs = ImageRuleInputs(config["images"], config["registry"], REPO)
    wc = SimpleNamespace(image="reference")
    assert inputs.tag(wc) == image_tag("reference", config["images"]["reference"], REPO)
    assert '"description"' not in inputs.spec_json(wc)
    assert inputs.all_manifests(wc) == ["results/images/reference.json"]
    assert '"url":"127.0.0.1:5000"' in inputs.registry_json(wc)
    edited = dict(config["images"]["reference"], description="other words")
    assert ImageRuleInputs({"reference": edited}, None, REPO).spec_json(wc) == inputs.spec_json(wc)
