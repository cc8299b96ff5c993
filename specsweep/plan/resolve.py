"""Resolve a configuration into one explicit launch plan.

The plan is everything that decides a measurement and nothing else: engine,
runtime, image, argv, env, address, workload and the harness version. What
only tells the report how to read a result (``description``, ``expect``,
``variant``) is the configuration's *labels* (``build_labels``): relabelling a
result must never rerun its server (GPU hours on the real target). It is
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
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from specsweep import HARNESS_VERSION
from specsweep.contracts.plan import PLAN_FORMAT_VERSION, Plan, typed_plan
from specsweep.contracts.vocabulary import Expect
from specsweep.engines.argv import speculative_algorithm
from specsweep.engines.registry import get_engine
from specsweep.plan.config import ConfigError, as_list, deep_merge, load_schema
from specsweep.plan.controls import control_problems
from specsweep.plan.datasets import DatasetError, resolve_prompts
from specsweep.plan.envcheck import env_string
from specsweep.plan.points import resolve_points
from specsweep.plan.tokenizer import TokenizerError
from specsweep.records import EXTERNAL_RUNTIME, is_external

# The plan's format version and its history live with the typed record (contracts.plan).
#: Keys of a configuration that tell the report how to read a result (``build_labels``).
LABEL_KEYS = ("description", "expect", "expect_signature", "variant", "own_baseline")
# Keys of a configuration that do not change what is measured, kept out of
# the plan so that editing them reruns no server. ``launches`` decides how
# many server jobs there are, not what one of them measures; ``axes`` is gone
# after grid expansion; ``points`` enters the plan resolved (below).
_NOT_IN_PLAN = {"extends", "launches", "axes", "points", *LABEL_KEYS}


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

    def entry_keys(self, name: str, keys: tuple[str, ...]) -> dict:
        """``entry(name)`` of ``keys`` only: a key of the entry is taken over the defaults, as ``deep_merge``
        takes it (merged where both are mappings), without merging the rest of a configuration."""
        own = self.own(name)
        return deep_merge({k: self.base[k] for k in keys if k in self.base}, {k: own[k] for k in keys if k in own})


def _env_strings(env: Mapping[str, Any]) -> dict[str, str]:
    """Environment values as the strings the process will see; null drops the key."""
    return {k: env_string(v) for k, v in sorted(env.items()) if v is not None}


def build_plan(config: Mapping, name: str, defaults: Mapping | None = None, write_prompts: bool = False) -> dict:
    """Resolve configuration ``name`` of a checked ``config`` into its launch plan.

    ``write_prompts``: keep a dataset's selected prompts under
    ``plan.datasets.PROMPTS_DIR`` (what the benchmark job reads); raises
    ``DatasetError`` / ``TokenizerError`` for a dataset that cannot be used,
    ``ValueError(problems)`` for points that cannot be named.
    """
    return plan_from_entry(name, merged_entry(config, name, defaults), write_prompts)


def _random_dataset(workload: dict) -> None:
    if workload["dataset"]["format"] == "random":
        workload["dataset"] = {"format": "random"}  # the other keys do not apply: they rerun nothing


def plan_from_entry(name: str, entry: Mapping, write_prompts: bool = False) -> dict:
    """The launch plan of configuration ``name`` from its merged entry (``merged_entry``), as plan.json's
    object (``resolve_plan(...).to_dict()``)."""
    return resolve_plan(name, entry, write_prompts).to_dict()


def resolve_plan(name: str, entry: Mapping, write_prompts: bool = False) -> Plan:
    """The typed launch plan (``contracts.plan.Plan``) of configuration ``name`` from its merged entry."""
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
    )
    plan["facts"] = engine.facts(server_args, plan["env"])
    if plan["runtime"] != "docker":
        plan["image"] = None
    if is_external(plan) and plan.get("url"):
        # Nothing is launched: no argv; the address is the running server's.
        plan["url"] = plan["url"].rstrip("/")
        address = urlsplit(plan["url"])
        plan.update(argv=[], host=address.hostname or plan["host"],
                    port=address.port or (443 if address.scheme == "https" else 80))
    plan["prompts"] = resolve_prompts(entry, engine.builtin_tokenizer, write_prompts)
    points = resolve_points(entry["workload"], entry.get("points"), f"configurations.{name}.points")
    if points is not None:
        for point in points:  # a point may change the dataset or the lengths: its own selection
            point["prompts"] = resolve_prompts(dict(entry, workload=point["workload"]), engine.builtin_tokenizer,
                                               write_prompts)
            _random_dataset(point["workload"])
        plan["points"] = points
    _random_dataset(plan["workload"])
    # Profiling off leaves no trace in the plan: plans (and so results) made before profiling existed stay valid.
    profile = plan.pop("profile", None)
    if profile and profile.get("enabled"):
        plan["profile"] = profile
    return Plan.from_dict(plan)


def resolve_plans(config: Mapping, source: str = "config", write_prompts: bool = False) -> dict[str, dict]:
    """Plans of every configuration, by name; a dataset that cannot be used is a ``ConfigError`` naming it."""
    return resolve_sweep(config, source, write_prompts)[0]


def resolve_sweep(config: Mapping, source: str = "config", write_prompts: bool = False
                  ) -> tuple[dict[str, dict], dict[str, int]]:
    """Plans of every configuration and its launch count (``launches``), by name.

    A dataset that cannot be used, points that cannot be named, or a positive
    control of an engine without the step-slowdown fault are one
    ``ConfigError`` naming ``source`` and every problem.
    """
    plans, launches, _ = resolve_sweep_typed(config, source, write_prompts)
    return plans, launches


def resolve_sweep_typed(config: Mapping, source: str = "config", write_prompts: bool = False
                        ) -> tuple[dict[str, dict], dict[str, int], dict[str, Plan]]:
    """``resolve_sweep``, and every plan typed (``contracts.plan.Plan``, a copy apart from the plan's object):
    what the checks at a start read (``plan.checks.start_findings``, ``plan.design``), typed once."""
    merger = _Merger(config)
    plans: dict[str, dict] = {}
    typed: dict[str, Plan] = {}
    launches: dict[str, int] = {}
    problems: list[str] = []
    for name in sorted(config["configurations"]):
        entry = merger.entry(name)
        try:
            typed[name] = resolve_plan(name, entry, write_prompts)
            plans[name] = typed[name].to_dict()  # plan_from_entry
        except (DatasetError, TokenizerError) as exc:
            problems.append(f"configurations.{name}.workload.dataset: {exc}")
            continue
        except ValueError as exc:
            problems.extend(exc.args[0] if isinstance(exc.args[0], list) else [str(exc)])
            continue
        launches[name] = int(entry.get("launches", 1))
    problems += control_problems(config, plans)
    if problems:
        raise ConfigError(source, problems)
    return plans, launches, typed


def build_labels(config: Mapping, name: str, defaults: Mapping | None = None) -> dict:
    """How the report reads configuration ``name``: ``{"description", "expect", "expect_signature", "variant"}``.

    ``description`` is the configuration's own (not inherited); ``expect``,
    ``expect_signature`` and ``variant`` merge through ``extends`` like every
    other key; ``variant`` is a sorted list, ``expect_signature`` a list (the
    engine's log must prove each variant, else ``fallback``; a failure is the
    expected one only when one of its signatures is in the log).
    """
    return _labels_of(config, name, merged_entry(config, name, defaults))


def _labels_of(config: Mapping, name: str, entry: Mapping) -> dict:
    own = config["configurations"][name] or {}
    return {"description": own.get("description", ""), "expect": entry.get("expect", Expect.OK),
            "expect_signature": as_list(entry.get("expect_signature")),
            "variant": sorted(as_list(entry.get("variant"))), "own_baseline": own.get("own_baseline")}


def resolve_labels(config: Mapping) -> dict[str, dict]:
    """Labels of every configuration, by name (one merge per parent, as in ``resolve_sweep``)."""
    merger = _Merger(config)
    return {name: _labels_of(config, name, merger.entry_keys(name, LABEL_KEYS))
            for name in sorted(config["configurations"])}


def label_findings(
    plans: Mapping[str, Mapping], labels: Mapping[str, Mapping], images: Mapping[str, Any] | None = None,
    typed: Mapping[str, Plan] | None = None,
) -> tuple[list[str], list[str]]:
    """(errors, warnings) of each engine's static checks of the labels (an unknown variant, a variant
    the flags disable); cheap, so they run when the workflow starts, before any job. ``typed``: the plans
    typed already (``resolve_sweep_typed``)."""
    errors: list[str] = []
    warnings: list[str] = []
    for name, plan in plans.items():
        if is_external(plan) and labels[name].get("variant"):
            # The server's log proves a variant; this workflow never sees an external server's log.
            errors.append(f"configurations.{name}.variant: runtime '{EXTERNAL_RUNTIME}' has no server log to prove "
                          f"a variant with; remove variant")
            continue
        result = get_engine(plan["engine"]).check_labels(typed_plan(typed, name, plan), labels[name], images)
        errors += result.errors
        warnings += result.warnings
    return errors + own_baseline_problems(plans, labels), warnings


def own_baseline_problems(plans: Mapping[str, Mapping], labels: Mapping[str, Mapping]) -> list[str]:
    """``own_baseline`` must name another configuration, one without speculation."""
    problems = []
    plain = sorted(n for n, p in plans.items() if speculative_algorithm(p.get("server_args") or {}) is None)
    for name in sorted(labels):
        other = labels[name].get("own_baseline")
        if other is None:
            continue
        where = f"configurations.{name}.own_baseline"
        if other == name:
            problems.append(f"{where}: {other!r} is this configuration itself; name one without speculation: {plain}")
        elif other not in plans:
            problems.append(f"{where}: {other!r} is not a configuration; allowed (no speculation): {plain}")
        elif speculative_algorithm(plans[other].get("server_args") or {}) is not None:
            algo = speculative_algorithm(plans[other]["server_args"])
            problems.append(f"{where}: {other!r} runs speculation ({algo}); name one without speculation: {plain}")
    return problems


def plan_problems(plans: Mapping[str, Mapping]) -> list[str]:
    """Checks on resolved plans (what only exists after merging)."""
    problems = []
    for name, plan in plans.items():
        if plan["runtime"] == "docker" and not plan.get("image"):
            problems.append(f"configurations.{name}.image: runtime 'docker' needs an image (a name under images:)")
        problems += external_problems(name, plan)
    return problems


#: What a plan of runtime external may not set (key: why), because nothing of it would reach the server.
_NOT_FOR_EXTERNAL = {
    "server_args": "the running server's flags are its own (recorded from its /server_info)",
    "env": "the running server's environment is its own (recorded where its /server_info reports it)",
    "image": "no container is started",
    "volumes": "no container is started",
    "gpus": "no GPU is claimed or checked on this host",
    "profile": "the profiler's traces are written inside the server, where this workflow cannot read them",
}


def external_problems(name: str, plan: Mapping[str, Any]) -> list[str]:
    """``url`` goes with runtime external, and such a plan sets nothing that only a launch would use."""
    where = f"configurations.{name}"
    if not is_external(plan):
        return [f"{where}.url: only runtime '{EXTERNAL_RUNTIME}' attaches to a url; this configuration's runtime "
                f"is {plan['runtime']!r} (remove url, or set runtime: {EXTERNAL_RUNTIME})"] if "url" in plan else []
    problems = [] if plan.get("url") else [
        f"{where}.url: runtime '{EXTERNAL_RUNTIME}' needs the running server's base URL, e.g. "
        "url: http://127.0.0.1:30000"]
    for key, why in _NOT_FOR_EXTERNAL.items():
        if plan.get(key):
            problems.append(f"{where}.{key}: runtime '{EXTERNAL_RUNTIME}' launches nothing, so {key} does not "
                            f"apply ({why}); remove it (or set it under another runtime)")
    return problems
