"""Shared test helpers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What a copy of the workflow needs to run in a temporary directory.
WORKFLOW_FILES = [
    "Snakefile", "rules", "scripts", "schemas", "envs", "profiles", "report", "containers", "config", "specsweep",
    "pyproject.toml", "requirements.txt", "config.yaml",
]


@pytest.fixture
def repo_root() -> Path:
    return REPO


def copy_workflow(dest: Path) -> Path:
    """A private copy of the workflow, package included (model configs are read by relative path)."""
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run only when asked for (`-m gpu`): then they fail, never skip, without a GPU.

    CI has no GPU; its run deselects them, which pytest reports as deselected,
    not as passed or skipped.
    """
    if "gpu" in (config.getoption("markexpr") or ""):
        return
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("gpu")]
