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
