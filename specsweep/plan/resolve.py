"""Resolve a configuration into one explicit launch plan.

The plan is everything that decides a measurement and nothing else: engine,
runtime, image, argv, env, address, workload and the harness version. It is
passed to Snakemake as canonical JSON (sorted keys), so that reordering keys
or editing an unrelated configuration reruns nothing, while any change that
alters what would be measured reruns exactly that configuration.

Merge order, later wins: the schema's built-in defaults, the top-level
``defaults``, the configurations named in ``extends`` (in order), the entry.
Mappings (``server_args``, ``env``, ``workload``) are deep-merged; other
values are replaced.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from specsweep import HARNESS_VERSION
from specsweep.engines.registry import get_engine
from specsweep.plan.config import as_list, deep_merge, load_schema
from specsweep.plan.points import resolve_points

# Format history of results/<config>/plan.json (and of the params that carry it):
#   1  name, engine, runtime, image, server_args, argv, env, host, port,
#      ready_timeout_s, gpus, workload, variant, expect, harness_version and the
#      target keys of the schema (gpu_arch, nvlink, volumes, ...).
#      Added without a version change (a plan without them is unchanged):
#      points = [{"name", "workload"}], only when the configuration declares
#      points (plan.points).
PLAN_FORMAT_VERSION = 1
# Keys of a configuration that do not change what is measured, kept out of
# the plan so that editing them reruns only the report. ``launches`` decides
# how many server jobs there are, not what one of them measures; ``axes`` is
# gone after grid expansion; ``points`` enters the plan resolved (below).
_NOT_IN_PLAN = {"description", "extends", "launches", "axes", "points"}


def _schema_defaults(node: Mapping, defs: Mapping) -> Any:
    """Built-in default of a schema node, descending into object properties."""
    for ref_holder in [node] + list(node.get("allOf", [])):
        ref = ref_holder.get("$ref")
        if ref:
            node = {**defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k not in ("$ref", "allOf")}}
    if node.get("type") == "object" and "properties" in node:
        out = copy.deepcopy(node.get("default", {}))
        for key, sub in node["properties"].items():
            value = _schema_defaults(sub, defs)
            if value is not _MISSING:
                out[key] = value
        return out
    return copy.deepcopy(node["default"]) if "default" in node else _MISSING


_MISSING = object()


def builtin_defaults(schema: Mapping | None = None) -> dict:
    """Defaults of a configuration entry as written in the schema (``default:`` keys)."""
    schema = schema if schema is not None else load_schema()
    defs = schema["$defs"]
    entry = _schema_defaults(defs["config_entry"], defs)
    entry["workload"] = _schema_defaults(defs["workload"], defs)
    for key in ("description", "extends", "axes", "points"):  # not inherited from the schema: no such setting
        entry.pop(key, None)
    return entry


def merged_entry(config: Mapping, name: str, defaults: Mapping | None = None) -> dict:
    """The configuration ``name`` with defaults and ``extends`` parents merged in."""
    return _Merger(config, defaults).entry(name)


class _Merger:
    """``merged_entry`` for many names of one config: the defaults and each entry's own
    merge (itself over what it extends) are computed once (a grid's members share a parent)."""

    def __init__(self, config: Mapping, defaults: Mapping | None = None) -> None:
        self.configurations = config["configurations"]
        self.base = deep_merge(defaults if defaults is not None else builtin_defaults(), config.get("defaults") or {})
        self._own: dict[str, dict] = {}

    def own(self, name: str) -> dict:
        if name not in self._own:
            entry = dict(self.configurations[name] or {})
            merged: dict = {}
            for parent in as_list(entry.get("extends")):
                merged = deep_merge(merged, self.own(parent))
            self._own[name] = deep_merge(merged, entry)
        return self._own[name]

    def entry(self, name: str) -> dict:
        return deep_merge(self.base, self.own(name))


def _env_strings(env: Mapping[str, Any]) -> dict[str, str]:
    """Environment values as the strings the process will see; null drops the key."""
    return {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in sorted(env.items()) if v is not None}


def build_plan(config: Mapping, name: str, defaults: Mapping | None = None) -> dict:
    """Resolve configuration ``name`` of a checked ``config`` into its launch plan."""
    return plan_from_entry(name, merged_entry(config, name, defaults))


def plan_from_entry(name: str, entry: Mapping) -> dict:
    """The launch plan of configuration ``name`` from its merged entry (``merged_entry``)."""
    engine = get_engine(entry["engine"])
    server_args = {k: entry["server_args"][k] for k in sorted(entry["server_args"])}
    plan = {k: v for k, v in entry.items() if k not in _NOT_IN_PLAN}
    plan.update(
        format_version=PLAN_FORMAT_VERSION,
        harness_version=HARNESS_VERSION,
        name=name,
        server_args=server_args,
        argv=engine.launch_argv("python3", server_args),
        env=_env_strings(entry["env"]),
        variant=sorted(as_list(entry.get("variant"))),
    )
    if plan["runtime"] != "docker":
        plan["image"] = None
    points = resolve_points(entry["workload"], entry.get("points"), f"configurations.{name}.points")
    if points is not None:
        plan["points"] = points
    return plan


def resolve_plans(config: Mapping) -> dict[str, dict]:
    """Plans of every configuration, by name."""
    return resolve_sweep(config)[0]


def resolve_sweep(config: Mapping) -> tuple[dict[str, dict], dict[str, int]]:
    """Plans of every configuration and its launch count (``launches``), by name.

    Raises ``ValueError(problems)`` for points that cannot be named (the
    caller names the file).
    """
    merger = _Merger(config)
    plans: dict[str, dict] = {}
    launches: dict[str, int] = {}
    problems: list[str] = []
    for name in sorted(config["configurations"]):
        entry = merger.entry(name)
        try:
            plans[name] = plan_from_entry(name, entry)
        except ValueError as exc:
            problems.extend(exc.args[0] if isinstance(exc.args[0], list) else [str(exc)])
            continue
        launches[name] = int(entry.get("launches", 1))
    if problems:
        raise ValueError(problems)
    return plans, launches


def plan_problems(plans: Mapping[str, Mapping]) -> list[str]:
    """Checks on resolved plans (what only exists after merging)."""
    problems = []
    for name, plan in plans.items():
        if plan["runtime"] == "docker" and not plan.get("image"):
            problems.append(f"configurations.{name}.image: runtime 'docker' needs an image (a name under images:)")
    return problems

