"""Running the workflow from tests and benchmarks: a private copy of it, and Snakemake's job table.

One copy helper for every test tier, so that all of them run the same files.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from specsweep.records import DEFAULT_POINT

#: The repository root (this file is specsweep/testing/workflow.py).
REPO = Path(__file__).resolve().parents[2]

#: What a copy of the workflow needs to run in another directory (the package
#: included: model configs are read by relative path, and the server is
#: started with ``python -m specsweep.refengine`` from the copy).
WORKFLOW_FILES = (
    "Snakefile", "rules", "scripts", "schemas", "envs", "profiles", "report", "containers", "config", "specsweep",
    "pyproject.toml", "requirements.txt", "config.yaml",
)


def copy_workflow(dest: Path, repo: Path = REPO) -> Path:
    """A private copy of the workflow in ``dest`` (caches and build leftovers excluded); returns ``dest``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in WORKFLOW_FILES:
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def plain_default_config(repo: Path = REPO) -> dict:
    """The default ``config.yaml`` with one launch per configuration and no positive control: the base of
    the end-to-end tests' small sweeps, which count, order and time their own launches."""
    config = yaml.safe_load((repo / "config.yaml").read_text())
    config.pop("positive_control", None)
    config.setdefault("defaults", {})["launches"] = 1
    return config


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints (a dry run, or a run), as ``{rule: count}``; {} when there is none."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^([a-z_]+)\s+(\d+)$", table, flags=re.M) if m[1] != "total"}


def only_point(work: Path, name: str) -> dict:
    """The summary section of a configuration that declares no workload points (its one, ``default``)."""
    [point] = json.loads((work / "results" / name / "summary.json").read_text())["points"]
    assert point["point"] == DEFAULT_POINT, point["point"]
    return point
