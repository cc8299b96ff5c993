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

The profiles this run uses are checked, read from Snakemake's own command line
as its ``parse_args`` picks them (snakemake/cli.py, 9.27.1: ``--workflow-profile``,
default ``profiles/default``, searched as given, under ``profiles/`` and beside
the Snakefile; ``--profile`` paths): a stray copy elsewhere under ``profiles/``
(``profiles/default copy/``) is no part of the run and cannot stop it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


_PROFILE_FILES = ("profile.yaml", "config.yaml")


def workflow_profiles(basedir: Path) -> list[Path]:
    """The profiles of a checkout (``profiles/<name>/config.yaml`` or ``profile.yaml``)."""
    return sorted(p for p in Path(basedir).glob("profiles/*/*.yaml") if p.name in _PROFILE_FILES)


def _option_values(argv: Sequence[str], option: str) -> list[str]:
    """The values of ``option`` in an argv (``--x v``, ``--x=v``; ``--profile`` takes several)."""
    values: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith(option + "="):
            values.append(arg.split("=", 1)[1])
        elif arg == option:
            for value in argv[i + 1:]:
                if value.startswith("-"):
                    break
                values.append(value)
                if option != "--profile":
                    break
    return values


def _profile_file(path: Path) -> Path | None:
    if path.is_file():
        return path
    return next((path / name for name in _PROFILE_FILES if (path / name).is_file()), None)


def profiles_in_use(argv: Sequence[str], basedir: Path, cwd: Path) -> list[Path]:
    """The profile files Snakemake reads for this command line (module doc): the workflow profile
    (``--workflow-profile``, ``profiles/default`` when not given, none for ``none``) and ``--profile`` paths."""
    found: list[Path] = []
    given = _option_values(argv, "--workflow-profile")
    name = given[-1] if given else "default"
    if name != "none":
        for candidate in (cwd / name, cwd / "profiles" / name, Path(basedir) / "profiles" / name):
            if candidate.exists():
                file = _profile_file(candidate)
                if file is not None:
                    found.append(file)
                break
    for value in _option_values(argv, "--profile"):
        file = _profile_file(cwd / value) if value != "none" and (cwd / value).exists() else None
        if file is not None:
            found.append(file)
    return found


def check_profiles(basedir: Path, rules: Iterable[str], argv: Sequence[str] | None = None,
                   cwd: Path | None = None) -> None:
    """Raise ``ConfigError`` (file, key path, allowed values) for the first profile in use with problems
    (every profile of the checkout when ``argv`` is None)."""
    rules = list(rules)
    paths = workflow_profiles(basedir) if argv is None else profiles_in_use(argv, basedir, cwd or Path.cwd())
    for path in paths:
        problems = profile_problems(load_yaml_strict(path), rules)
        if problems:
            try:
                shown = path.resolve().relative_to(Path(basedir).resolve())
            except ValueError:
                shown = path
            raise ConfigError(str(shown), problems)
