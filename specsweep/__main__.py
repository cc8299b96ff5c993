"""Small command-line helpers around the workflow.

    python -m specsweep check [CONFIG]     validate a config file, print each resolved plan's argv
    python -m specsweep failed [RESULTS]   outcome files of failed configurations, for
                                           `snakemake --cores 1 all -R $(python -m specsweep failed)`
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specsweep.config import ConfigError, load_config
from specsweep.plan import plan_problems, resolve_plans


def failed_outcomes(results: Path) -> list[Path]:
    """Outcome files whose configuration failed (a rerun of that file reruns its server job)."""
    failed = []
    for path in sorted(results.glob("*/outcome.json")):
        if json.loads(path.read_text()).get("status") != "ok":
            failed.append(path)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specsweep", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate a config file and print the resolved argv of each configuration")
    check.add_argument("config", nargs="?", default="config.yaml", type=Path)
    failed = sub.add_parser("failed", help="list outcome.json files of failed configurations")
    failed.add_argument("results", nargs="?", default="results", type=Path)
    args = parser.parse_args(argv)

    if args.command == "check":
        try:
            config = load_config(args.config)
            plans = resolve_plans(config)
            problems = plan_problems(plans)
            if problems:
                raise ConfigError(str(args.config), problems)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        for name, plan in plans.items():
            print(f"{name}: {' '.join(plan['argv'])}")
        return 0
    for path in failed_outcomes(args.results):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
