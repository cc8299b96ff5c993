"""The `specsweep` command: small helpers around the workflow (also `python3 -m specsweep`).

    specsweep check [CONFIG ...]      validate config files (merged like --configfile), run every
                                      plan through its engine's preflight (its own argument parser),
                                      print each argv and the environment beside it; exit 2 on any error
                                      (--no-parser-env: without SGLang's parser, whose environment is a
                                      download and a build); then what the sweep will cost (launches,
                                      requests, a time)
    specsweep preflight CONFIG ...    every SGLang argv through SGLang's own parser (JSON out; exit 1
                                      when any configuration has errors)
    specsweep failed [CONFIG ...]     outcome files of the failed (or contaminated) launches of these
                                      config files' configurations, for
                                      `snakemake --cores 1 all --configfile F -R $(specsweep failed F)`
    specsweep --version

Exit codes: 0 fine; 2 an error in what was given (a file that cannot be read, a config that fails its
checks, a flag the engine's parser refuses, a bad option), one line per problem and never a traceback;
1 only from `preflight`, whose JSON says which configuration failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from specsweep import __version__
from specsweep.contracts import layout
from specsweep.contracts.plan import Plan
from specsweep.contracts.vocabulary import Status
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import (
    DEFAULT_REQUIREMENTS,
    ParserEnvError,
    build_notice,
    ensure_parser_env,
    image_parser_prefix,
    parser_env_ready,
    preflight_plans,
)
from specsweep.plan.checks import start_findings
from specsweep.plan.config import ConfigError, load_configs
from specsweep.plan.cost import config_cost, cost_lines
from specsweep.plan.resolve import resolve_labels, resolve_sweep
from specsweep.workflow.inputs import launch_order, parser_env_path, plan_keys
from specsweep.workflow.stored import current_key, stale_launches


def failed_outcomes(results: Path, keys: Mapping[str, str] | None = None,
                    planned: Sequence[tuple[str, str]] = ()) -> list[Path]:
    """Outcome files of launches that failed or were contaminated, or that a summary was built from and that
    lack a file now (deleted: Snakemake does not notice, ``workflow.stored``), of the plans ``keys`` names
    (configuration -> plan key, ``layout.plan_key``; ``planned``: their (configuration, launch id)).
    Forcing such a file (``-R``) reruns that launch's server job, the summary and the report. A launch
    belongs to its plan, and after a ``--configfile`` switch ``results/`` still holds the plans of the other
    file, which ``snakemake -R`` could not make. Without ``keys``: each configuration's current plan."""
    if keys is None:
        dirs = sorted(d for d in results.iterdir() if d.is_dir()) if results.is_dir() else []
        keys = {d.name: key for d in dirs if (key := current_key(results, d.name))}
    listed = {launch / layout.LAUNCH_FILES["outcome"] for _, launch, _ in stale_launches(results, keys, planned)}
    for name, key in sorted(keys.items()):
        for path in Path(layout.plan_dir(name, key, str(results))).glob("launch-*/outcome.json"):
            if json.loads(path.read_text()).get("status") != Status.OK:
                listed.add(path)
    return sorted(listed)


def parser_plans(plans: Mapping[str, Mapping]) -> list[str]:
    """The configurations whose check needs SGLang's parser environment (their engine's preflight does)."""
    return [n for n, p in plans.items() if get_engine(p["engine"]).needs_parser_env]


def parser_env_notice(venv: Path, requirements: Path, names: Sequence[str]) -> str:
    """What building the parser environment costs and where it goes, said before it starts."""
    return f"{build_notice(venv, requirements, names)}; `specsweep check --no-parser-env` skips this check"


def _parser_python(venv: Path, requirements: Path, names: Sequence[str]) -> str | None:
    """The parser venv's python, built first if needed (saying so, how big it is and where it goes); None,
    with the builder's message printed, when it cannot be built."""
    if not parser_env_ready(venv, requirements):
        print(parser_env_notice(venv, requirements, names), file=sys.stderr)
    try:
        return ensure_parser_env(venv, requirements)
    except ParserEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def check_all(config: dict, plans: dict, parser_env: Path | None, requirements: Path,
              shown: Sequence[str] = (), skip_parser: bool = False) -> int:
    """Every plan, with its labels (variant, expect), through its engine's preflight (SGLang: its rules and
    its parser, in the pinned venv); print each argv with the environment beside it, every warning and error
    (once; none of ``shown``, printed already by the start checks); 2 when any has errors, 1 when the parser
    venv cannot be built. ``skip_parser``: plans that need the parser environment get only the rules the
    start checks ran."""
    labels = resolve_labels(config)
    errors: list[str] = []
    warnings: list[str] = []
    parser_python = None
    needing = parser_plans(plans)
    if needing and skip_parser:
        warnings.append(f"SGLang's own parser and model check skipped (--no-parser-env) for {len(needing)} "
                        "configuration(s): only specsweep's rules checked them; the workflow's preflight jobs "
                        "still run SGLang's parser before any launch")
    elif needing:
        parser_python = _parser_python(parser_env or parser_env_path(config), requirements, needing)
        if parser_python is None:
            return 1
    for name, plan in plans.items():
        engine = get_engine(plan["engine"])
        if not (engine.needs_parser_env and skip_parser):
            result = engine.preflight(Plan.from_dict(plan), parser_python if engine.needs_parser_env else None,
                                      config.get("images"), labels[name])
            errors += result.errors
            warnings += result.warnings
        print(f"{name}: {' '.join(plan['argv'])}")
        if plan.get("env"):  # the server's environment beside its argv (as plan.json holds it)
            print(f"{' ' * len(name)}  env: {' '.join(f'{k}={v}' for k, v in sorted(plan['env'].items()))}")
    for warning in dict.fromkeys(w for w in warnings if w not in shown):
        print(f"warning: {warning}", file=sys.stderr)
    for error in dict.fromkeys(errors):
        print(f"error: {error}", file=sys.stderr)
    return 2 if errors else 0


def preflight(config: dict, plans: dict, parser_env: Path | None, requirements: Path, image: str | None) -> int:
    """All plans through SGLang's own parser in one process (the venv's, or a built image's); print JSON verdicts."""
    needing = parser_plans(plans)
    if image:
        python: str | list[str] = image_parser_prefix(image)
    elif not needing:  # nothing for SGLang's parser: no environment to build
        print("specsweep preflight: no SGLang configuration: SGLang's parser environment is not needed (nothing "
              "downloaded or built)", file=sys.stderr)
        python = []
    else:
        found = _parser_python(parser_env or parser_env_path(config), requirements, needing)
        if found is None:
            return 1
        python = found
    results = preflight_plans([Plan.from_dict(p) for p in plans.values()], python, config.get("images"))
    json.dump(results, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0 if all(r["ok"] for r in results.values()) else 1


class UsageError(Exception):
    """A problem with what the user gave the command: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line form of every other error of the command (exit 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _problem_lines(prog: str, exc: ConfigError) -> list[str]:
    """One self-contained line per problem: the command, the file(s), the problem (key path, allowed values)."""
    return [f"{prog}: {exc.source}: {problem}" for problem in exc.problems]


def _readable_configs(paths: list[Path], defaulted: bool, cwd: Path) -> None:
    """Refuse, in one line, a config argument that is not a readable file (before YAML sees it)."""
    for path in paths:
        if path.is_dir():
            raise UsageError(f"{path} is a directory: give a config file (e.g. {path / 'config.yaml'})")
        if not path.exists():
            if defaulted and not is_workflow_dir(cwd):
                raise UsageError(f"no {path} in {cwd}: run it in the workflow's directory (the one with the "
                                 "Snakefile) or name a config file")
            raise UsageError(f"{path}: no such file")


def is_workflow_dir(path: Path) -> bool:
    """Where Snakemake would find this workflow's Snakefile (``Snakefile`` or ``workflow/Snakefile``)."""
    return (path / "Snakefile").is_file() or (path / "workflow" / "Snakefile").is_file()


def workflow_dir_of(paths: Sequence[Path], cwd: Path) -> Path | None:
    """The directory Snakemake runs in for these config files, the one their relative paths (model, dataset)
    mean: ``cwd`` when it is a workflow directory, else the nearest one above the first config file, else above
    ``cwd`` (``specsweep check ../config.yaml`` from ``docs/``); None when there is none."""
    if is_workflow_dir(cwd):
        return cwd
    for start in ([paths[0].resolve().parent] if paths else []) + [cwd.resolve()]:
        for candidate in (start, *start.parents):
            if is_workflow_dir(candidate):
                return candidate
    return None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specsweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"specsweep {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    check = sub.add_parser("check", help="validate config files and print the resolved argv of each configuration")
    check.add_argument("config", nargs="*", default=None, type=Path,
                       help="config file(s), merged in order like --configfile (default: config.yaml)")
    check.add_argument("--parser-env", type=Path, default=None,
                       help="SGLang parser venv (default: config's parser_env)")
    check.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS)
    check.add_argument("--no-parser-env", action="store_true",
                       help="skip SGLang's own parser and model check, and the environment it needs (a download "
                            "and build whose size is printed before it starts); specsweep's rules still run")
    pre = sub.add_parser("preflight", help="check every SGLang configuration with SGLang's own parser")
    pre.add_argument("config", type=Path, nargs="+", help="config file(s), merged in order like --configfile")
    pre.add_argument("--parser-env", type=Path, default=None, help="venv dir (default: config's parser_env)")
    pre.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS)
    pre.add_argument("--image", default=None,
                     help="check with this built SGLang image (id or reference) instead of the parser venv")
    failed = sub.add_parser("failed", help="list outcome.json files of failed configurations of these config files")
    failed.add_argument("config", nargs="*", default=None, type=Path,
                        help="the config file(s) given to snakemake's --configfile (default: config.yaml)")
    failed.add_argument("--results", default=Path("results"), type=Path, help="results directory (default: results)")
    return parser


def main(argv: list[str] | None = None) -> int:
    prog = "specsweep"
    try:
        args = _parser().parse_args(argv)
        prog = f"specsweep {args.command}"
        return _run(args, prog)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print("\n".join(_problem_lines(prog, exc)), file=sys.stderr)
        return 2
    except OSError as exc:  # a file that went away or cannot be read while checking: the user's input
        print(f"{prog}: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2


def _into_workflow_dir(args: argparse.Namespace, paths: list[Path]) -> list[Path]:
    """Change into the config files' workflow directory when run elsewhere (saying so): the plans' relative
    model and dataset paths are checked where the workflow will use them. The paths given, made absolute."""
    cwd = Path.cwd()
    workdir = workflow_dir_of(paths, cwd)
    if workdir is None or workdir == cwd:
        return paths
    for option in ("parser_env", "requirements"):
        if getattr(args, option, None) is not None:
            setattr(args, option, getattr(args, option).resolve())
    print(f"specsweep {args.command}: relative paths in the config are checked from {workdir}, the workflow's "
          "directory (where snakemake runs)", file=sys.stderr)
    os.chdir(workdir)
    return [cwd / p for p in paths]


def _run(args: argparse.Namespace, prog: str) -> int:
    defaulted = not args.config
    paths = [Path("config.yaml")] if defaulted else list(args.config)
    _readable_configs(paths, defaulted, Path.cwd())
    if args.command == "failed" and not args.results.is_dir():
        raise UsageError(f"--results {args.results}: no such directory (the workflow's results/, where "
                         "snakemake ran)")
    source = " + ".join(map(str, paths))
    if args.command != "failed":  # relative paths in a config mean the workflow's directory, where snakemake runs
        paths = _into_workflow_dir(args, paths)
    config = load_configs(paths)
    plans, launches = resolve_sweep(config, source)
    if args.command == "failed":  # only the names matter: what ran is in results/
        for path in failed_outcomes(args.results, plan_keys(plans), launch_order(config, launches)):
            print(path)
        return 0
    problems, warnings = start_findings(config, plans, resolve_labels(config))  # what `snakemake -n` refuses
    if problems:
        raise ConfigError(source, problems)
    cost, cost_warnings = cost_lines(config_cost(config, plans, launches))
    for warning in [*warnings, *cost_warnings]:
        print(f"{prog}: warning: {warning}", file=sys.stderr)
    if args.command == "preflight":
        return preflight(config, plans, args.parser_env, args.requirements, args.image)
    status = check_all(config, plans, args.parser_env, args.requirements, warnings, args.no_parser_env)
    print(cost)
    return status


if __name__ == "__main__":
    sys.exit(main())
