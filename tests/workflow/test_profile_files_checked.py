"""This checkout's Snakemake profiles: a typo in either one stops `snakemake -n`, naming file and key.

Snakemake itself drops a mapping under an unknown key (``set-resource:``) and
takes any resource name (``slurm_partiton``) without a word
(``specsweep.workflow.profiles``); these run the real Snakemake on a copy.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from specsweep.plan.config import load_yaml_strict
from specsweep.testing.workflow import REPO, copy_workflow
from specsweep.workflow.profiles import profile_problems, workflow_profiles

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1", "-n"]


def _rules() -> list[str]:
    text = "".join(p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))])
    return re.findall(r"^rule (\w+):", text, flags=re.M)


def test_the_shipped_profiles_pass():
    profiles = workflow_profiles(REPO)
    assert [p.parent.name for p in profiles] == ["default", "slurm"]
    for path in profiles:
        assert profile_problems(load_yaml_strict(path), _rules()) == [], path


def test_each_kind_of_typo_is_named():
    data = load_yaml_strict(REPO / "profiles/slurm/config.yaml")
    data["default-resources"]["slurm_partiton"] = data["default-resources"].pop("slurm_partition")
    data["set-resource"] = data.pop("set-resources")
    data["set-resources"] = {"benchmark_sever": {"runtime": 1}}
    problems = profile_problems(data, _rules())
    assert [p.split(":")[0] for p in problems] == ["set-resource", "default-resources.slurm_partiton",
                                                   "set-resources.benchmark_sever"], problems
    assert "drops a mapping" in problems[0] and "'set-resources'" in problems[0]
    assert "allowed: [" in problems[1] and "'slurm_partition'" in problems[1]
    assert "not a rule of this workflow" in problems[2] and "'benchmark_server'" in problems[2]


@pytest.mark.parametrize("profile, old, new, key", [
    ("default", "\nresources:\n", "\nresource:\n", "resource"),
    ("slurm", "slurm_partition: specsweep", "slurm_partiton: specsweep", "default-resources.slurm_partiton"),
    ("slurm", "\nset-resources:\n", "\nset-resource:\n", "set-resource"),
])
def test_a_typo_in_each_profile_stops_a_dry_run(tmp_path, profile, old, new, key):
    work = copy_workflow(tmp_path)
    path = work / "profiles" / profile / "config.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    result = subprocess.run(SNAKEMAKE + ["all"], cwd=work, capture_output=True, text=True, timeout=300)  # noqa: S603
    out = result.stdout + result.stderr  # Snakemake prints a WorkflowError on stdout
    assert result.returncode != 0, out
    assert f"invalid configuration in profiles/{profile}/config.yaml:" in out and f"  - {key}: " in out, out
