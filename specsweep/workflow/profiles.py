"""This workflow's Snakemake profiles (``profiles/*/config.yaml``), checked at every start.

Snakemake reads a profile through configargparse: an unknown top-level key
with a scalar or list value is refused ("unrecognized arguments"), but one
with a mapping value that is not among the keys its profile parser formats is
dropped without a word (snakemake/profiles.py, ``ProfileConfigFileParser.parse``,
Snakemake 9.27.1: the ``isinstance(value, dict)`` branch has no else). A
``set-resource:`` typo thus silently loses every per-rule resource, here the
server job's ``--exclusive``, runtime and memory. Resource names are free-form
to Snakemake, so ``slurm_partiton`` becomes a resource nobody reads and the
job goes to the default partition. Both are refused here, naming the file,
the key path and what is allowed; so are rules in ``set-resources`` that the
workflow does not have.

Every profile of the checkout is checked, not only the one in use: which one
Snakemake picked is not visible to the workflow, and each is part of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from specsweep.plan.config import ConfigError, load_yaml_strict

#: Top-level keys whose value may be a mapping (snakemake/profiles.py, ProfileConfigFileParser.parse, 9.27.1:
#: the one-level keys and ``set-resources``); any other mapping is dropped by Snakemake.
MAPPING_KEYS = frozenset({"set-threads", "resources", "set-scatter", "batch", "set-resource-scopes",
                          "default-resources", "config", "groups", "group-components", "consider-ancient",
                          "set-resources"})
#: Keys holding resources: top-level mapping of names, or (set-resources) rule -> mapping of names.
RESOURCE_KEYS = ("default-resources", "resources")

#: Resource names something reads. Snakemake's own (snakemake/resources.py: mem/disk and their _mb/_mib
#: forms, runtime, tmpdir, threads; _cores/_nodes internal); the Slurm executor plugin's
#: (snakemake-executor-plugin-slurm 2.8.0: __init__.py, submit_string.py, partitions.py, utils.py);
#: this workflow's own (``server``: one server job at a time on one host; ``gpu``: GPUs of a server job).
KNOWN_RESOURCES = frozenset({
    "mem", "mem_mb", "mem_mib", "disk", "disk_mb", "disk_mib", "runtime", "tmpdir", "threads", "_cores", "_nodes",
    "slurm_partition", "slurm_account", "slurm_extra", "slurm_cluster", "clusters", "cluster", "constraint", "qos",
    "nodes", "tasks", "tasks_per_node", "tasks_per_gpu", "cpus_per_task", "cpus_per_gpu", "mem_mb_per_cpu",
    "gres", "gpu", "gpu_model", "mpi",
    "server",
})


def _resource_problems(where: str, mapping: object) -> list[str]:
    if not isinstance(mapping, dict):
        return [f"{where}: expected a mapping of resource names to values, got {mapping!r}"]
    return [f"{where}.{name}: unknown resource (a typo is read by nobody); allowed: {sorted(KNOWN_RESOURCES)}"
            for name in mapping if name not in KNOWN_RESOURCES]


def profile_problems(data: dict, rules: Iterable[str]) -> list[str]:
    """What Snakemake would drop or nobody would read in one profile's parsed YAML, by key path."""
    problems: list[str] = []
    rules = sorted(rules)
    for key, value in data.items():
        if isinstance(value, dict) and key not in MAPPING_KEYS:
            problems.append(f"{key}: Snakemake drops a mapping under this key without a word (not a profile "
                            f"key that takes one); keys that do: {sorted(MAPPING_KEYS)}")
    for key in RESOURCE_KEYS:
        if isinstance(data.get(key), dict):
            problems += _resource_problems(key, data[key])
    per_rule = data.get("set-resources")
    if isinstance(per_rule, dict):
        for rule, mapping in per_rule.items():
            if rule not in rules:
                problems.append(f"set-resources.{rule}: not a rule of this workflow; rules: {rules}")
            problems += _resource_problems(f"set-resources.{rule}", mapping)
    return problems


def workflow_profiles(basedir: Path) -> list[Path]:
    """The profiles of a checkout (``profiles/<name>/config.yaml`` or ``profile.yaml``)."""
    return sorted(p for p in Path(basedir).glob("profiles/*/*.yaml") if p.name in ("config.yaml", "profile.yaml"))


def check_profiles(basedir: Path, rules: Iterable[str]) -> None:
    """Raise ``ConfigError`` (file, key path, allowed values) for the first profile with problems."""
    rules = list(rules)
    for path in workflow_profiles(basedir):
        problems = profile_problems(load_yaml_strict(path), rules)
        if problems:
            raise ConfigError(str(path.relative_to(basedir)), problems)
