"""Load and check ``config.yaml`` before anything expensive starts.

Two layers of checking:

1. the JSON schema (``schemas/config.schema.yaml``): types, allowed values,
   unknown keys (``workload.endpoint``'s allowed values are the endpoint
   registry's names, ``contracts.endpoints.ENDPOINTS``, filled in on loading);
2. semantic checks the schema cannot express: names usable as paths,
   ``extends`` and ``image`` references that exist, no ``extends`` cycles,
   duplicate keys in the YAML text (YAML silently keeps the last one),
   ``NCCL_*``/``SGLANG_*`` names and values in ``env`` (``plan.envcheck``).

Every error names the file, the key path and what is allowed, and all errors
are reported at once.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from specsweep.contracts.endpoints import ENDPOINTS
from specsweep.plan.controls import expand_control
from specsweep.plan.envcheck import env_problems
from specsweep.plan.grid import Expansion, expand_axes
from specsweep.plan.names import NAME_PATTERN, NAME_RULE
from specsweep.plan.screen import setting_problems

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration that must not run. The message lists every problem found."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid configuration in {source}:\n{lines}")


# libyaml's loader where PyYAML was built with it: the config is parsed at every
# Snakemake start, so this is on the path of every `snakemake -n`.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[misc, valid-type]
    """A YAML loader that refuses duplicate keys instead of keeping the last."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_strict(path: Path) -> dict:
    """Parse ``path`` as YAML, failing on duplicate keys with file and line, and on a top level that is not a
    mapping (a list or a string is a config file's mistake, not a config)."""
    try:
        with open(path, encoding="utf-8") as stream:  # a stream, so that every error names the file and line
            data = yaml.load(stream, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [str(exc).replace("\n", " ")]) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), [(f"(top level): a config file is a mapping of keys (configurations:, defaults:, "
                                       f"baseline:, ...), got a YAML {_yaml_kind(data)}")])
    return data


def _yaml_kind(data: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(data),
                                                                                          type(data).__name__)


@functools.lru_cache(maxsize=4)
def _schema_text_cached(path: Path) -> dict:
    schema = yaml.load(Path(path).read_text(), Loader=_SafeLoader)  # noqa: S506 - a safe loader
    _fill_registries(schema)
    return schema


def _fill_registries(node: Any) -> None:
    """Allowed values the package's registries hold, set in the schema where the file leaves them out.

    Every ``endpoint`` property (the workload's, wherever it is reused) allows the names of
    ``ENDPOINTS`` and nothing else, so a new endpoint is its registry entry, not also a schema edit.
    """
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and isinstance(props.get("endpoint"), dict):
            props["endpoint"]["enum"] = list(ENDPOINTS)
        for value in node.values():
            _fill_registries(value)
    elif isinstance(node, list):
        for value in node:
            _fill_registries(value)


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    """The config schema (parsed once per process; callers get their own copy)."""
    return copy.deepcopy(_schema_text_cached(Path(path)))


def schema_default(key: str) -> Any:
    """The schema's default of a top-level key (a copy), without copying the whole schema
    (``workflow.inputs.agreement_params``)."""
    return copy.deepcopy(_schema_text_cached(SCHEMA_PATH)["properties"][key].get("default"))


def _key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _schema_problem(error: jsonschema.ValidationError) -> str:
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        return f"{where}: unknown key(s) {extra}; allowed: {allowed}"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not allowed; allowed values: {error.validator_value}"
    if error.validator == "oneOf" and error.context:
        return f"{where}: {error.instance!r} must be a string or a list of strings"
    return f"{where}: {error.message}"


def schema_problems(config: Mapping, schema: Mapping) -> list[str]:
    """Every schema violation of ``config``, as 'key.path: what is wrong; what is allowed'."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    return [_schema_problem(e) for e in errors]


def semantic_problems(config: Mapping) -> list[str]:
    """Checks that need the whole configuration: names, references, cycles."""
    problems: list[str] = []
    configurations: Mapping = config.get("configurations") or {}
    images: Mapping = config.get("images") or {}
    known = sorted(configurations)
    for name in configurations:
        if not NAME_PATTERN.match(str(name)):
            problems.append(f"configurations.{name}: invalid name; {NAME_RULE}")
    for name in images:
        if not NAME_PATTERN.match(str(name)):
            problems.append(f"images.{name}: invalid name; {NAME_RULE}")

    baseline = config.get("baseline")
    if baseline is not None and baseline not in configurations:
        problems.append(f"baseline: {baseline!r} is not a configuration; allowed: {known}")

    defaults = config.get("defaults") or {}
    if "extends" in defaults:
        problems.append("defaults.extends: not allowed in defaults (defaults apply to every configuration)")
    entries = [("defaults", defaults)] + [(f"configurations.{n}", e or {}) for n, e in configurations.items()]
    for where, entry in entries:
        image = entry.get("image")
        if image is not None and image not in images:
            problems.append(f"{where}.image: {image!r} is not defined under images; allowed: {sorted(images)}")
        for parent in as_list(entry.get("extends")):
            if parent not in configurations:
                problems.append(f"{where}.extends: {parent!r} is not a configuration; allowed: {known}")

    for name in configurations:
        cycle = _extends_cycle(configurations, name)
        if cycle:
            problems.append(f"configurations.{name}.extends: cycle {' -> '.join(cycle)}")
    rounds = config.get("rounds") or {}
    if rounds.get("mode") == "race" and rounds.get("max_launches") is None:
        problems.append("rounds.max_launches: a race (rounds.mode: race) needs a budget of launches per "
                        "configuration; allowed: an integer >= the planned `launches`")
    if (rounds.get("first_round_baseline") or 1) > 1 and baseline is None:
        problems.append(f"rounds.first_round_baseline: {rounds['first_round_baseline']} launches of the baseline in "
                        f"round 1, and no baseline is set; allowed: baseline: one of {known}, or "
                        "rounds.first_round_baseline: 1")
    screen = config.get("screen") or {}
    if screen.get("enabled"):
        if rounds.get("mode") != "race":
            problems.append(f"screen.enabled: a screen sets configurations aside before a race; rounds.mode is "
                            f"{rounds.get('mode', 'sweep')!r}; allowed: rounds.mode: race, or screen.enabled: false")
        if not screen.get("settings"):
            problems.append("screen.settings: a screen needs the settings that make the communication setting; "
                            "allowed: a list of server_args.<flag> or env.<VAR> (as a grid axis names them)")
    elif screen.get("check"):
        problems.append("screen.check: a check run launches what the screen set aside, and no screen runs "
                        "(screen.enabled is false); allowed: screen.enabled: true, or screen.check: false")
    problems += setting_problems(screen.get("settings") or [])
    return problems


def _extends_cycle(configurations: Mapping, start: str) -> list[str] | None:
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name not in configurations:
            return None
        path.append(name)
        for parent in as_list((configurations[name] or {}).get("extends")):
            found = visit(parent)
            if found:
                return found
        path.pop()
        return None

    return visit(start)


def as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_config(config: Mapping, source: str, schema: Mapping | None = None) -> dict:
    """Validate ``config`` (already parsed); return it with grids expanded, or raise ConfigError.

    Order: the schema on the file as written (axes included), then the grids
    expanded (``plan.grid.expand_axes``: axis keys, values and generated
    names), then the positive control added (``plan.controls.expand_control``),
    then the semantic checks on the configurations that will run.
    """
    return check_sweep(config, source, schema).config


def check_sweep(config: Mapping, source: str, schema: Mapping | None = None) -> Expansion:
    """``check_config``, keeping the grids (which configuration came from which axis values)."""
    schema = schema if schema is not None else load_schema()
    problems = schema_problems(config, schema)
    if problems:
        raise ConfigError(source, problems)
    problems = env_problems(config)  # on the file as written: a grid axis' env values at their own key paths
    if problems:
        raise ConfigError(source, problems)
    try:
        expansion = expand_axes(copy.deepcopy(dict(config)), schema)
        expansion = Expansion(config=expand_control(expansion.config), grids=expansion.grids)
    except ValueError as exc:
        raise ConfigError(source, list(exc.args[0])) from None
    problems = semantic_problems(expansion.config)
    if problems:
        raise ConfigError(source, problems)
    return expansion


def load_config(path: Path | str) -> dict:
    """Read, de-duplicate-check and validate one config file."""
    path = Path(path)
    return check_config(load_yaml_strict(path), str(path))


def target_as_configfile(paths: Iterable[Path | str], results: Path | str = "results") -> str | None:
    """The one line for a target that Snakemake read as a config file, or None.

    ``--configfile`` takes one or more files (Snakemake 9.27.1, snakemake/cli.py:717-720: ``nargs="+"``; the
    targets are the positional ``nargs="*"`` of cli.py:443-445), so ``snakemake --configfile F
    results/x/summary.json`` gives it the target too, and Snakemake loads every one
    (snakemake/settings/types.py:412-415) before the workflow starts. A target that does not exist yet ends
    Snakemake there, with its own FileNotFoundError, before any of this workflow runs; one that exists (a file
    under ``results``, JSON) reaches the workflow as a config file, and this says so.
    """
    root = Path(results).resolve()
    paths = [Path(p) for p in paths]
    targets = [p for p in paths if Path(p).resolve().is_relative_to(root)]
    if not targets:
        return None
    target = Path(results) / targets[0].resolve().relative_to(root)
    files = " ".join(_shown(p) for p in paths if p not in targets) or "F.yaml"
    return (f"specsweep: {target} was read as a config file: --configfile takes every file after it (Snakemake's "
            f"parser: one or more), so a target after it is one of them; put the target first "
            f"(`snakemake {target} --configfile {files}`) or end the config files with `--` "
            f"(`snakemake --configfile {files} -- {target}`)")


def _shown(path: Path) -> str:
    """``path`` as the user would type it here: relative to the working directory when under it."""
    resolved = path.resolve()
    return str(resolved.relative_to(Path.cwd())) if resolved.is_relative_to(Path.cwd()) else str(path)


def check_files_strict(paths: Iterable[Path | str]) -> None:
    """Fail on duplicate keys in the YAML files Snakemake already loaded leniently."""
    for path in paths:
        load_yaml_strict(Path(path))


def json_copy(value: Any) -> Any:
    """A deep copy of YAML/JSON data (dicts, lists, scalars): ``copy.deepcopy`` without its memo
    and ABC checks, several times faster (a sweep merges thousands of entries at every start)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_copy(v) for v in value]
    return value


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """Merge ``override`` onto ``base``; nested mappings merge, everything else is replaced.

    The result shares nothing with either argument (a deep copy of JSON-like data)."""
    out = {k: json_copy(v) for k, v in base.items()}
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = json_copy(value)
    return out


def load_configs(paths: Iterable[Path | str]) -> dict:
    """Load one or more config files merged in order, as ``snakemake --configfile A B`` does.

    Snakemake deep-merges several config files (later wins); the weight-free
    overlay (``config/kimi-k25-8gpu-dummy.yaml``) relies on it. The merged
    result is validated like a single file.
    """
    paths = [Path(p) for p in paths]
    merged: dict = {}
    for path in paths:
        merged = deep_merge(merged, load_yaml_strict(path))
    return check_config(merged, " + ".join(str(p) for p in paths))
