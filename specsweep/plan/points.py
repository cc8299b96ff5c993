"""Workload points: several workloads measured in one server launch.

A configuration's ``points`` lists workload overrides (e.g. ``{concurrency:
1}``, ``{concurrency: 4}``); each is deep-merged over the configuration's own
``workload`` and measured in the same launch, in list order, after one
readiness wait. A configuration without ``points`` has one point, its
``workload``, named ``default``.

Each point has a name, its key in records (``record.point``), in summaries and
in the report: ``name`` if given, else one part per key it sets, sorted by
key, ``<token><value>`` (``POINT_TOKENS``; e.g. ``{concurrency: 4, input_len:
1024}`` -> ``c4-in1024``).

The resolved points are part of the plan (``plan["points"]``, only when the
configuration declares points, so that plans without points stay what they
were): changing one point reruns the configuration's server job, which is the
price of sharing a launch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.plan.config import deep_merge
from specsweep.plan.grid import value_label
from specsweep.plan.names import NAME_PATTERN, NAME_RULE
from specsweep.records import DEFAULT_POINT

#: Name tokens of the workload keys a point sets (others: the key itself).
POINT_TOKENS = {
    "concurrency": "c",
    "request_rate": "r",
    "input_len": "in",
    "output_len": "out",
    "num_prompts": "n",
    "repeats": "rep",
    "temperature": "t",
}


def point_name(overrides: Mapping[str, Any]) -> str:
    """The default name of a point (see the module docstring)."""
    parts = []
    for key in sorted(k for k in overrides if k != "name"):
        value = overrides[key]
        if isinstance(value, Mapping):
            raise ValueError(f"a point that sets {key!r} (a mapping) needs a name")
        parts.append(POINT_TOKENS.get(key, key.replace("_", "")) + value_label(value))
    return "-".join(parts)


def resolve_points(
    workload: Mapping[str, Any], points: Sequence[Mapping[str, Any]] | None, where: str
) -> list[dict[str, Any]] | None:
    """``[{"name", "workload"}]`` in declared order, each workload the base deep-merged with
    its point; None when no points are declared. Raises ``ValueError(problems)``."""
    if not points:
        return None
    from_base = dict(workload)
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, point in enumerate(points):
        overrides = {k: v for k, v in point.items() if k != "name"}
        try:
            name = point.get("name") or point_name(overrides)
        except ValueError as exc:
            problems.append(f"{where}[{i}]: {exc}")
            continue
        if name == DEFAULT_POINT:
            problems.append(f"{where}[{i}]: the name {DEFAULT_POINT!r} is reserved for a configuration without "
                            "points; set another name")
        if not NAME_PATTERN.match(name):
            problems.append(f"{where}[{i}]: point name {name!r} is invalid; {NAME_RULE}")
        if name in seen:
            problems.append(f"{where}[{i}]: point name {name!r} is also points[{seen[name]}]; "
                            "points of a configuration need distinct names (set name:)")
        seen[name] = i
        merged = deep_merge(from_base, overrides)
        out.append({"name": name, "workload": merged})
    if problems:
        raise ValueError(problems)
    return out


def plan_points(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The points a server job measures: the plan's points, or its one workload as ``default``."""
    return list(plan.get("points") or [{"name": DEFAULT_POINT, "workload": plan["workload"]}])
