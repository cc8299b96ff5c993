"""This checkout's Snakemake profiles: a typo in the one a run uses stops `snakemake -n`, naming file and key;
a stray copy under profiles/ that the run does not use stops nothing.

Snakemake itself drops a mapping under an unknown key (``set-resource:``) and
takes any resource name (``slurm_partiton``) without a word
(``specsweep.workflow.profiles``); these run the real Snakemake on a copy.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import pytest

from specsweep.plan.config import load_yaml_strict
from specsweep.testing.workflow import REPO, copy_workflow
from specsweep.workflow.profiles import profile_problems, profiles_in_use, workflow_profiles

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
    chosen = [] if profile == "default" else ["--workflow-profile", f"profiles/{profile}"]
    result = subprocess.run(SNAKEMAKE + [*chosen, "all"], cwd=work, capture_output=True, text=True, timeout=300,
                            check=False)
    out = result.stdout + result.stderr  # Snakemake prints a WorkflowError on stdout
    assert result.returncode != 0, out
    assert f"invalid configuration in profiles/{profile}/config.yaml:" in out and f"  - {key}: " in out, out


def test_a_stray_profile_copy_the_run_does_not_use_stops_nothing(tmp_path):
    work = copy_workflow(tmp_path)
    stray = work / "profiles" / "default copy" / "config.yaml"
    stray.parent.mkdir()
    stray.write_text((work / "profiles/default/config.yaml").read_text().replace("\nresources:\n", "\nresource:\n"))
    result = subprocess.run(SNAKEMAKE + ["all"], cwd=work, capture_output=True, text=True, timeout=300, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "default copy" not in out, out[-3000:]
    # named on the command line, it is the profile in use, and checked
    result = subprocess.run(SNAKEMAKE + ["--workflow-profile", "profiles/default copy", "all"], cwd=work,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode != 0 and "invalid configuration in profiles/default copy/config.yaml:" in \
        result.stdout + result.stderr


def test_the_profiles_in_use_are_read_as_snakemake_reads_its_command_line(tmp_path):
    for name in ("default", "slurm", "default copy"):
        (tmp_path / "profiles" / name).mkdir(parents=True)
        (tmp_path / "profiles" / name / "config.yaml").write_text("cores: 1\n")
    own = tmp_path / "mine.yaml"
    own.write_text("cores: 1\n")
    used = functools.partial(profiles_in_use, basedir=tmp_path, cwd=tmp_path)
    assert used(["--cores", "1", "all"]) == [tmp_path / "profiles/default/config.yaml"]
    assert used(["--workflow-profile", "profiles/slurm", "all"]) == [tmp_path / "profiles/slurm/config.yaml"]
    assert used(["--workflow-profile=slurm"]) == [tmp_path / "profiles/slurm/config.yaml"]
    assert used(["--workflow-profile", "none"]) == []
    assert used(["--profile", "mine.yaml", "--workflow-profile", "none"]) == [own]
