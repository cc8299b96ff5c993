"""Fixtures and collection rules shared by every test tier.

Helpers that tests import (the workflow copy, Snakemake's job table, the repo
root) live in ``specsweep.testing.workflow``; this file is never imported as a
module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.testing.workflow import REPO, copy_workflow


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A private copy of the workflow (``specsweep.testing.workflow.copy_workflow``) in ``tmp_path``."""
    return copy_workflow(tmp_path)


#: Markers that a tier's folder implies: a test under tests/<folder>/ needs what
#: the folder's name says, whether or not its module repeats the marker.
FOLDER_MARKERS = {
    "e2e": ("slow",),
    "docker": ("docker", "slow"),
    "slurm": ("slurm", "slow"),
    "workflow": ("slow",),
    "sglang": ("slow",),  # the pinned SGLang wheel (downloaded) or its preflight venv (built once, cached)
    "gpu": ("gpu",),
}


def _folder_markers(item: pytest.Item) -> tuple[str, ...]:
    try:
        rel = Path(str(item.path)).resolve().relative_to(REPO / "tests")
    except ValueError:
        return ()
    return FOLDER_MARKERS.get(rel.parts[0], ()) if len(rel.parts) > 1 else ()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from the folder, then: GPU tests run only when asked for (`-m gpu`).

    Every test of tests/docker, tests/slurm, tests/e2e, tests/workflow,
    tests/sglang and tests/gpu gets its folder's markers (FOLDER_MARKERS), so
    `-m 'not slow'` is the fast tier whatever a module declares. GPU tests fail, never skip, without a GPU; CI
    has no GPU and its run deselects them, which pytest reports as deselected,
    not as passed or skipped.
    """
    for item in items:
        for name in _folder_markers(item):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)
    if "gpu" in (config.getoption("markexpr") or ""):
        return
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("gpu")]
