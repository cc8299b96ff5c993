"""How many tokens one request may ask for (prompt + output), as an engine derives it, before any launch.

A workload whose ``input_len + output_len`` is beyond it is refused by the
server on every request (HTTP 400 at warmup), minutes or GPU hours into a
run; each engine says its limit and where it comes from (``Engine.context_limit``),
and ``plan.checks`` refuses such a workload when the workflow starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specsweep.contracts.plan import Plan
from specsweep.engines.volumes import host_path


@dataclass(frozen=True)
class ContextLimit:
    """``tokens``: the largest prompt + max_new_tokens a request may ask for; ``source``: where it comes from
    (the flag, or the model's config file and key, and what the engine keeps back)."""

    tokens: int
    source: str


def model_config(plan: Plan, model_path: str | None, base: Path) -> tuple[Path, dict] | None:
    """The model directory's ``config.json`` as this host sees it (a container path through the plan's
    volumes), parsed; None when it cannot be read here (preflight names a missing directory)."""
    if not model_path:
        return None
    directory, _why = host_path(plan, str(model_path), base)
    if directory is None:
        return None
    path = directory / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return (path, data) if isinstance(data, dict) else None


def shown_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` where it lies below it (as the config names it), else as it is."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
