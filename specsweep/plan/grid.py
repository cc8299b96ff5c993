"""Grids: a configuration with ``axes`` becomes one configuration per combination.

Applied to the checked config before plans are resolved, so that every
generated configuration is an ordinary one afterwards: its own plan, cache
entry, report row and line in ``python3 -m specsweep check``.

An axis maps one or more keys to lists of values::

    axes:
      - server_args.all-reduce-backend: [gloo, shm]          # one key: one axis
      - env.SGLANG_SIMULATE_ACC_LEN: ["1.5", "2.0", "2.5"]
        token: acc                                            # name part prefix
      - env.NCCL_ALGO: [null, Ring]                           # null = key removed
        labels: [auto, ring]                                  # name parts, one per value
      - server_args.speculative-num-steps: [1, 3]             # several keys: zipped,
        server_args.speculative-num-draft-tokens: [2, 4]      # they vary together
        token: steps

Axes multiply in list order. The generated name is ``<entry>-<part>-<part>``,
one part per axis: ``token`` + the value's label. A label is the given
``labels[i]``, else the value of the axis' first key (sorted) rendered by
``value_label``. Names are deterministic: the same axes give the same names,
and editing one value adds and removes exactly the configurations that carry
it (the others keep their names and their plans).

Keys are ``server_args.<flag>``, ``env.<VAR>`` or ``workload.<key>[.<key>]``
(the workload keys the schema knows). A generated entry is the grid entry
without ``axes``, with each axis value set in its own mapping, so axis values
win over the entry's own values and over everything it extends.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from specsweep.plan.names import NAME_PATTERN, NAME_RULE

SECTIONS = ("server_args", "env", "workload")
AXIS_OPTIONS = ("token", "labels")
KEY_FORMS = "server_args.<flag>, env.<VAR> or workload.<key>"


@dataclass(frozen=True)
class Axis:
    """One axis: its keys (zipped), their values (one list per key), name token and labels."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]  # values[k][i] = value of keys[k] at position i
    labels: tuple[str, ...]
    token: str

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class Grid:
    """A grid entry and what it generated: member name -> {axis key: value}."""

    name: str
    axes: tuple[Axis, ...]
    members: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [k for axis in self.axes for k in axis.keys]


@dataclass(frozen=True)
class Expansion:
    """The config with every grid replaced by its configurations, and the grids."""

    config: dict
    grids: dict[str, Grid]


def value_label(value: Any) -> str:
    """A value as a name part: lowercased, '.' -> 'p', runs of other characters
    outside ``[a-z0-9_-]`` -> '_', no leading/trailing '_' (``null`` -> ``none``)."""
    text = "none" if value is None else value if isinstance(value, str) else json.dumps(value)
    text = text.lower().replace(".", "p")
    return re.sub(r"[^a-z0-9_-]+", "_", text).strip("_")


def describe_value(value: Any) -> str:
    return "unset" if value is None else str(value)


def short_key(key: str) -> str:
    """``env.NCCL_ALGO`` -> ``NCCL_ALGO``: what a description shows."""
    return key.split(".", 1)[1]


def _workload_properties(schema: Mapping) -> Mapping:
    return schema["$defs"]["workload"]["properties"]


def _key_problem(key: str, schema: Mapping) -> str | None:
    """Why ``key`` is not an axis key, or None."""
    section, _, rest = key.partition(".")
    if section not in SECTIONS or not rest:
        return f"unknown axis key {key!r}; allowed: {KEY_FORMS}, and the options {list(AXIS_OPTIONS)}"
    if section == "workload":
        props = _workload_properties(schema)
        parts = rest.split(".")
        for depth, part in enumerate(parts):
            if part not in props:
                where = ".".join(["workload", *parts[:depth]])
                return f"unknown axis key {key!r}: {where} has no key {part!r}; allowed: {sorted(props)}"
            node = props[part]
            props = node.get("properties", {})
            if depth < len(parts) - 1 and not props:
                return f"unknown axis key {key!r}: workload.{'.'.join(parts[:depth + 1])} has no sub-keys"
    return None


def _set_key(entry: dict, key: str, value: Any) -> None:
    section, rest = key.split(".", 1)
    parts = [rest] if section != "workload" else rest.split(".")
    node = entry.setdefault(section, {})
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = copy.deepcopy(value)


def _value_validator(schema: Mapping) -> jsonschema.Draft202012Validator:
    """Validates one configuration entry (what an axis value lands in)."""
    entry_schema = {"$defs": schema["$defs"], **schema["$defs"]["config_entry"]}
    return jsonschema.Draft202012Validator(entry_schema)


def parse_axis(raw: Any, where: str, schema: Mapping, problems: list[str]) -> Axis | None:
    """One axis of ``raw`` (a mapping), or None with the problems appended."""
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: an axis is a mapping of {KEY_FORMS} to lists of values, got {raw!r}")
        return None
    keys = sorted(k for k in raw if k not in AXIS_OPTIONS)
    if not keys:
        problems.append(f"{where}: no axis key; allowed: {KEY_FORMS}")
        return None
    bad = False
    for key in keys:
        problem = _key_problem(key, schema)
        if problem:
            problems.append(f"{where}: {problem}")
            bad = True
            continue
        values = raw[key]
        if not isinstance(values, list) or not values:
            problems.append(f"{where}.{key}: needs a non-empty list of values, got {values!r}")
            bad = True
    if bad:
        return None
    lengths = {k: len(raw[k]) for k in keys}
    if len(set(lengths.values())) > 1:
        problems.append(f"{where}: zipped keys need lists of equal length, got {lengths}")
        return None
    n = lengths[keys[0]]
    token = raw.get("token", "")
    labels = raw.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or len(labels) != n:
            problems.append(f"{where}.labels: needs one label per value ({n}), got {labels!r}")
            return None
    else:
        labels = [value_label(v) for v in raw[keys[0]]]
        empty = [raw[keys[0]][i] for i, label in enumerate(labels) if not label]
        if empty:
            problems.append(f"{where}.{keys[0]}: values {empty!r} give an empty name part; set labels")
            return None
    if len(set(labels)) != n:
        dup = sorted({label for label in labels if labels.count(label) > 1})
        problems.append(f"{where}: values give the same name part {dup}; allowed: distinct values or labels")
        return None
    validator = _value_validator(schema)
    for key in keys:
        for i, value in enumerate(raw[key]):
            probe: dict = {}
            _set_key(probe, key, value)
            for error in validator.iter_errors(probe):
                problems.append(f"{where}.{key}[{i}]: {value!r}: {error.message}")
                bad = True
    if bad:
        return None
    return Axis(keys=tuple(keys), values=tuple(tuple(raw[k]) for k in keys), labels=tuple(labels), token=token)


def _grid_members(name: str, axes: list[Axis]) -> dict[str, dict[str, Any]]:
    members: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*(range(len(a)) for a in axes)):
        parts = [a.token + a.labels[i] for a, i in zip(axes, combo)]
        values = {key: a.values[k][i] for a, i in zip(axes, combo) for k, key in enumerate(a.keys)}
        members["-".join([name, *parts])] = values
    return members


def expand_axes(config: Mapping, schema: Mapping) -> Expansion:
    """Replace every configuration that declares ``axes`` by its generated configurations.

    Raises ``ValueError`` with the list of problems (the caller names the file):
    unknown keys (with the allowed forms), empty lists, zipped lists of unequal
    length, values the schema refuses, names outside ``[a-z0-9_-]``, generated
    names that collide with each other or with a configuration, a grid used in
    ``extends`` or as the baseline, ``axes`` under ``defaults``.
    """
    configurations: Mapping = config.get("configurations") or {}
    problems: list[str] = []
    if (config.get("defaults") or {}).get("axes"):
        problems.append("defaults.axes: not allowed in defaults (a grid is one configuration's axes)")
    grids: dict[str, Grid] = {}
    for name, entry in configurations.items():
        raw_axes = (entry or {}).get("axes")
        if not raw_axes:
            continue
        axes = [parse_axis(raw, f"configurations.{name}.axes[{i}]", schema, problems)
                for i, raw in enumerate(raw_axes)]
        if any(a is None for a in axes):
            continue
        seen: dict[str, int] = {}
        for i, axis in enumerate(axes):
            for key in axis.keys:  # type: ignore[union-attr]
                if key in seen:
                    problems.append(f"configurations.{name}.axes[{i}].{key}: already an axis (axes[{seen[key]}])")
                seen[key] = i
        grids[name] = Grid(name=name, axes=tuple(axes), members=_grid_members(name, axes))  # type: ignore[arg-type]

    origin: dict[str, str] = {n: f"configurations.{n}" for n in configurations if n not in grids}
    for grid in grids.values():
        for member in grid.members:
            where = f"configurations.{grid.name}.axes"
            if not NAME_PATTERN.match(member):
                problems.append(f"{where}: generated name {member!r} is invalid; {NAME_RULE}")
            if member in origin:
                problems.append(f"{where}: generated name {member!r} collides with {origin[member]}; "
                                "rename one, or set token/labels")
            origin[member] = where
    for name, entry in configurations.items():
        for parent in _as_list((entry or {}).get("extends")):
            if parent in grids:
                problems.append(f"configurations.{name}.extends: {parent!r} is a grid (it declares axes); extend "
                                f"the configuration it extends or one of its configurations: {_some(grids[parent])}")
    baseline = config.get("baseline")
    if baseline in grids:
        problems.append(f"baseline: {baseline!r} is a grid (it declares axes); name one of its configurations: "
                        f"{_some(grids[baseline])}")
    if problems:
        raise ValueError(problems)
    if not grids:
        return Expansion(config=dict(config), grids={})

    out_configs: dict[str, Any] = {}
    for name, entry in configurations.items():
        if name not in grids:
            out_configs[name] = entry
            continue
        base = {k: v for k, v in (entry or {}).items() if k != "axes"}
        for member, values in grids[name].members.items():
            generated = copy.deepcopy(base)
            for key, value in values.items():
                _set_key(generated, key, value)
            where = ", ".join(f"{short_key(k)}={describe_value(v)}" for k, v in values.items())
            generated["description"] = (f"{base['description']} " if base.get("description") else "") + f"[{where}]"
            out_configs[member] = generated
    return Expansion(config={**config, "configurations": out_configs}, grids=grids)


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _some(grid: Grid, n: int = 3) -> str:
    names = list(grid.members)
    return ", ".join(names[:n]) + (f", ... ({len(names)} in all)" if len(names) > n else "")


def grid_params(grids: Mapping[str, Grid]) -> dict[str, Any]:
    """The grids as plain data (for report params): axes and each member's axis values."""
    return {
        name: {
            "axes": [{"keys": list(a.keys), "token": a.token, "labels": list(a.labels)} for a in grid.axes],
            "members": grid.members,
        }
        for name, grid in grids.items()
    }
