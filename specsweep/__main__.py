"""Small command-line helpers around the workflow.

    python -m specsweep check [CONFIG ...]      validate config files (merged like --configfile),
                                                print each resolved plan's argv
    python -m specsweep preflight CONFIG ...    every SGLang argv through SGLang's own parser (JSON out;
                                                exit 1 when any configuration has errors)
    python -m specsweep failed [RESULTS]        outcome files of failed launches, for
                                                `snakemake --cores 1 all -R $(python -m specsweep failed)`
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, ensure_parser_env, preflight_plans
from specsweep.plan.config import ConfigError, load_configs
from specsweep.plan.resolve import plan_problems, resolve_plans
from specsweep.workflow.inputs import DEFAULT_PARSER_ENV, resolve_or_config_error


def failed_outcomes(results: Path) -> list[Path]:
    """Outcome files of launches that failed (a rerun of that file reruns that launch's server job)."""
    failed = []
    for path in sorted(results.glob("*/launch-*/outcome.json")):
        if json.loads(path.read_text()).get("status") != "ok":
            failed.append(path)
    return failed


def preflight(config: dict, plans: dict, parser_env: Path | None, requirements: Path) -> int:
    """All plans through SGLang's own parser in one process; print the verdicts as JSON."""
    venv = parser_env or Path(config.get("parser_env") or DEFAULT_PARSER_ENV)
    python = ensure_parser_env(venv, requirements)
    results = preflight_plans(list(plans.values()), python, config.get("images"))
    json.dump(results, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0 if all(r["ok"] for r in results.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specsweep", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate config files and print the resolved argv of each configuration")
    check.add_argument("config", nargs="*", default=[Path("config.yaml")], type=Path,
                       help="config file(s), merged in order like --configfile (default: config.yaml)")
    pre = sub.add_parser("preflight", help="check every SGLang configuration with SGLang's own parser")
    pre.add_argument("config", type=Path, nargs="+", help="config file(s), merged in order like --configfile")
    pre.add_argument("--parser-env", type=Path, default=None, help="venv dir (default: config's parser_env)")
    pre.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS)
    failed = sub.add_parser("failed", help="list outcome.json files of failed configurations")
    failed.add_argument("results", nargs="?", default="results", type=Path)
    args = parser.parse_args(argv)

    if args.command in ("check", "preflight"):
        try:
            config = load_configs(args.config)
            plans = resolve_or_config_error(resolve_plans, config, " + ".join(map(str, args.config)))
            problems = plan_problems(plans)
            if problems:
                raise ConfigError(" + ".join(map(str, args.config)), problems)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.command == "preflight":
            return preflight(config, plans, args.parser_env, args.requirements)
        for name, plan in plans.items():
            print(f"{name}: {' '.join(plan['argv'])}")
        return 0
    for path in failed_outcomes(args.results):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
