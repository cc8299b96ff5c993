"""The resolved launch plan of one configuration: ``results/<config>/plan.json``, as one typed record.

``plan.resolve`` builds it from the configuration (everything that decides a
measurement, nothing else); every later stage reads it: the preflight, the
server job (``serve.job``), the summary. ``Plan.from_dict`` / ``to_dict`` are
exact inverses for every plan of this format, so that a plan read and written
again is the same bytes: the file and the Snakemake params that decide reruns
are the canonical JSON of ``to_dict()`` (``specsweep.files``: the one JSON
writer; this floor imports nothing of the package).

A plan is frozen: no field is reassigned after it is made (``replace`` makes a
changed copy, e.g. the server job's plan with its launch in ``env``). Its
mappings are its own copies, typed read-only (``Mapping``); ``to_dict`` hands
out fresh copies, so that no reader changes the plan of another.

Keys that are in a file only when they apply (``url``, ``profile``,
``points``) are ``None`` when absent; the schema's target keys (``gpu_arch``,
``nvlink``, ``rdma``, ``volumes``: ``TARGET_KEYS``) pass through as the
configuration sets them, present or not, in ``target``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Format history of results/<config>/plan.json (and of the params that carry it):
#   1  name, engine, runtime, image, server_args, argv, env, host, port,
#      ready_timeout_s, gpus, workload, variant, expect, harness_version and the
#      target keys of the schema (gpu_arch, nvlink, volumes, ...).
#   2  + prompts (the selected dataset prompts' identity, null for random);
#      workload.dataset; endpoint "chat".
#   3  variant and expect moved to the labels (plan.resolve.build_labels): they change the
#      summary and the report, never what a server measures.
#      (later: the optional key profile, present only when profile.enabled is true: a plan
#      without it reads as before, so the version stays.)
#   4  + points = [{"name", "workload", "prompts"}], only when the configuration
#      declares points (plan.points; a plan without them is as in 3): each
#      point's workload merged over the configuration's, and its own selected
#      prompts (null for random).
#      (runtime "external" adds the key url, only in such plans, whose argv is [] and whose host and
#      port are the url's: plans of the other runtimes read as before, so the version stays.)
#      (later: the typed record Plan, here; the file is byte for byte as before.)
#   5  + facts = {"tp_size", "speculative_algorithm", "simulated_accept_length",
#      "simulated_accept_length_setting", "speculation_settings", "all_reduce_backend"}: what the
#      engine's flags and environment mean, resolved once by the engine (``Engine.facts``), so that
#      analysis and the report never read an engine's flags. Nothing else changes: a plan of 4 is this
#      plan without facts (a results/ made before reruns every server job once).
PLAN_FORMAT_VERSION = 5

#: ``facts``: what the engine says its plan's settings mean (``Engine.facts``, ``FACT_KEYS``):
#: ``tp_size`` (ranks of one tensor-parallel group), ``speculative_algorithm`` (None: no speculation),
#: ``simulated_accept_length`` (the fixed accept length the engine will simulate, None when it does not),
#: ``simulated_accept_length_setting`` (the setting that fixes it, as a grid axis names it: ``env.<VAR>``),
#: ``speculation_settings`` (the plan's settings that only speculation reads, ``server_args.<flag>`` /
#: ``env.<VAR>``), ``all_reduce_backend`` (the one backend the flags select; None where the engine has
#: no such setting and its log says what ran).
FACT_KEYS = ("all_reduce_backend", "simulated_accept_length", "simulated_accept_length_setting",
             "speculation_settings", "speculative_algorithm", "tp_size")

#: The schema's keys that describe the target host (preflight reads them), kept as the configuration
#: sets them: ``rdma`` has no default, so a plan without it stays as it was before the key existed.
TARGET_KEYS = ("gpu_arch", "nvlink", "rdma", "volumes")
#: Keys of a plan that are there only when they apply (``None`` on the record when absent).
_OPTIONAL_KEYS = ("url", "profile", "points")


def _copy(value: Any) -> Any:
    """A deep copy of a plan's data (dicts, lists, tuples, scalars, as JSON and the resolver give them):
    ``copy.deepcopy``'s result without its memo and dispatch, several times faster (a start types and
    writes out every plan of a sweep: hundreds). Anything else is left to ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind is tuple:
        return tuple(_copy(v) for v in value)
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


class PlanError(ValueError):
    """A mapping that is not a plan of this format: what is missing, unknown or of another version."""


@dataclass(frozen=True)
class Point:
    """One workload point of a launch (``plan.points``): its name, its workload (the configuration's with
    the point's keys merged over it) and its own selected prompts (None: synthetic)."""

    name: str
    workload: Mapping[str, Any]
    prompts: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Point":
        unknown = sorted(set(data) - {"name", "workload", "prompts"})
        if unknown or "name" not in data or "workload" not in data:
            raise PlanError(f"a plan's point needs name and workload (and prompts); got {sorted(data)}")
        return cls(name=str(data["name"]), workload=_copy(dict(data["workload"])),
                   prompts=_copy(data.get("prompts")))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "workload": _copy(dict(self.workload)),
                "prompts": _copy(self.prompts)}


@dataclass(frozen=True)
class Plan:
    """One configuration's launch plan (docs/design.md, "Resolved plan"); ``PLAN_FORMAT_VERSION``."""

    name: str
    engine: str  # a name of engines.registry
    runtime: str  # "local" | "docker" | "external"
    image: str | None  # a name under `images:` when runtime is docker
    server_args: Mapping[str, Any]  # flag -> value, keys sorted
    argv: tuple[str, ...]  # without --host/--port; () for runtime external
    env: Mapping[str, str]
    host: str
    port: int | None  # None: a free port is picked at launch
    ready_timeout_s: float
    gpus: int  # GPUs the server needs (0 on CPU)
    workload: Mapping[str, Any]
    prompts: Mapping[str, Any] | None  # the selected dataset prompts' identity; None: synthetic
    harness_version: int
    facts: Mapping[str, Any]  # FACT_KEYS: what the engine says the settings mean
    format_version: int = PLAN_FORMAT_VERSION
    target: Mapping[str, Any] = field(default_factory=dict)  # TARGET_KEYS, as set
    url: str | None = None  # runtime external only: the running server's base URL
    profile: Mapping[str, Any] | None = None  # only when profile.enabled
    points: tuple[Point, ...] | None = None  # only when the configuration declares points

    # ------------------------------------------------------------ reading and writing

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Plan":
        """The plan a mapping holds (plan.json's object); ``PlanError`` names what is missing, unknown
        or of another format version."""
        own = [f.name for f in dataclasses.fields(cls) if f.name != "target"]
        required = [name for name in own if name not in _OPTIONAL_KEYS]
        missing = [key for key in required if key not in data]
        unknown = sorted(set(data) - set(own) - set(TARGET_KEYS))
        if missing or unknown:
            raise PlanError(f"plan {data.get('name')!r}: " + "; ".join(
                part for part in (f"missing keys {missing}" if missing else "",
                                  f"unknown keys {unknown}" if unknown else "") if part))
        if data["format_version"] != PLAN_FORMAT_VERSION:
            raise PlanError(f"plan {data.get('name')!r} is of format {data['format_version']!r}; this checkout "
                            f"reads format {PLAN_FORMAT_VERSION}: resolve it again (snakemake reruns resolve_plan)")
        values = {key: _copy(data[key]) for key in own if key in data}
        values["argv"] = tuple(values["argv"])
        if sorted(values["facts"]) != sorted(FACT_KEYS):
            raise PlanError(f"plan {data.get('name')!r}: facts {sorted(values['facts'])}, expected {list(FACT_KEYS)}")
        if values.get("points") is not None:
            values["points"] = tuple(Point.from_dict(p) for p in values["points"])
        target = {key: _copy(data[key]) for key in TARGET_KEYS if key in data}
        return cls(**values, target=target)

    def to_dict(self) -> dict[str, Any]:
        """plan.json's object: every key the plan has, as fresh copies (``from_dict``'s inverse)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "target" or (f.name in _OPTIONAL_KEYS and value is None):
                continue
            out[f.name] = _copy(value)
        out["argv"] = list(self.argv)
        if self.points is not None:
            out["points"] = [p.to_dict() for p in self.points]
        out.update(_copy(dict(self.target)))
        return out

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls.from_dict(json.loads(text))

    @classmethod
    def load(cls, path: Path | str) -> "Plan":
        """``results/<config>/plan.json`` (written by ``resolve_plan`` as ``files.write_json_atomic`` of
        ``to_dict()``)."""
        return cls.from_json(Path(path).read_text())

    # ------------------------------------------------------------ what readers ask

    def replace(self, **changes: Any) -> "Plan":
        """A copy with ``changes`` (fields; the target keys, ``TARGET_KEYS``, go into ``target``)."""
        target = {key: changes.pop(key) for key in TARGET_KEYS if key in changes}
        if "volumes" in target:
            target["volumes"] = list(target["volumes"])
        if target:
            changes["target"] = {**self.target, **target}
        return dataclasses.replace(self, **changes)

    @property
    def volumes(self) -> list[str]:
        """``host:container[:mode]`` mounts of a container runtime (none when unset)."""
        return list(self.target.get("volumes") or [])

    @property
    def rdma(self) -> bool | None:
        return self.target.get("rdma")

    @property
    def nvlink(self) -> bool | None:
        return self.target.get("nvlink")

    @property
    def gpu_arch(self) -> str | None:
        return self.target.get("gpu_arch")

    def measured_points(self, default_name: str) -> tuple[Point, ...]:
        """The points a server job measures: the plan's points, or its one workload and prompts as a point
        named ``default_name`` (``records.DEFAULT_POINT``)."""
        return self.points or (Point(default_name, self.workload, self.prompts),)


def typed_plan(typed: Mapping[str, Plan] | None, name: str, plan: Mapping[str, Any]) -> Plan:
    """Configuration ``name``'s typed plan: the one in ``typed`` (``plan.resolve.resolve_sweep_typed``: one per
    plan for every check at a start, not a deep copy per check), else ``plan`` typed afresh."""
    if typed is not None and name in typed:
        return typed[name]
    return Plan.from_dict(plan)


def setting(plan: Mapping[str, Any], path: str) -> Any:
    """The value of a plan's setting named as a grid axis names it (``env.<VAR>``, ``server_args.<flag>``),
    None when unset: how a reader finds the setting a fact names (``simulated_accept_length_setting``)."""
    section, _, key = path.partition(".")
    return (plan.get(section) or {}).get(key)
