"""Whether two checkouts plan the same jobs: `snakemake -n` of each, normalised, compared.

    python3 same_jobs.py CHECKOUT_A CHECKOUT_B OUT_DIR

For the 500-configuration grid (bench_dag.grid_config(500)) and config.yaml, config/race-cpu.yaml,
config/sweep-cpu.yaml: every job of the nothing-built dry run as one line (rule, then each of its
keys but jobid; the paths of a list sorted), the lines sorted. A launch's files other than its
outcome.json are dropped from both (they were benchmark_server's declared outputs before, and are
not now); everything else must be identical. Writes OUT_DIR/<case>-{A,B}.txt and prints one line per case.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

LAUNCH_OTHER = re.compile(r"/launch-[^/]+/(launch\.json|server\.log|warmup\.jsonl|requests\.jsonl|nccl|"
                          r"profile\.json|allreduce_bench\.json)$")


def normalised(text: str) -> list[str]:
    jobs, current = [], None
    for line in text.splitlines():
        head = re.match(r"^(rule|checkpoint|localrule|localcheckpoint) (\w+):$", line)
        if head:
            current = [head[2]]
            jobs.append(current)
            continue
        item = re.match(r"^    (\w+): (.*)$", line)
        if current is None or not item or item[1] == "jobid":
            if not line.startswith("    "):
                current = None
            continue
        value = item[2]
        if item[1] == "reason":
            parts = []
            for part in value.split("; "):
                name, _, files = part.partition(": ")
                kept = sorted(f for f in files.split(", ") if not LAUNCH_OTHER.search(f))
                parts.append(f"{name}: {', '.join(kept)}" if files else name)
            value = "; ".join(sorted(parts))
        else:
            value = ", ".join(sorted(f for f in value.split(", ") if not LAUNCH_OTHER.search(f)))
        current.append(f"{item[1]}={value}")
    return sorted(" | ".join(job) for job in jobs)


def dry_run(checkout: Path, work: Path, config: dict | None, configfile: str | None) -> str:
    from specsweep.testing.workflow import copy_workflow  # noqa: PLC0415 - the first checkout's (main)

    copy_workflow(work, repo=checkout)
    if config is not None:
        (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    argv = [sys.executable, "-m", "snakemake", "--cores", "1", "-n", "all"]
    argv += ["--configfile", configfile] if configfile else []
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env, check=False)  # noqa: S603
    if out.returncode != 0:
        raise SystemExit(f"{checkout} {configfile or 'config.yaml'}: {out.stderr[-2000:]}")
    return out.stdout


def main(a: Path, b: Path, out: Path) -> None:
    sys.path[:0] = [str(a), str(a / "benchmarks")]
    from bench_dag import grid_config  # noqa: PLC0415

    cases = {"grid500": (grid_config(500), None), "config": (None, None),
             "race-cpu": (None, "config/race-cpu.yaml"), "sweep-cpu": (None, "config/sweep-cpu.yaml")}
    out.mkdir(parents=True, exist_ok=True)
    for case, (config, configfile) in cases.items():
        texts = {}
        for tag, checkout in (("A", a), ("B", b)):
            lines = normalised(dry_run(checkout, out / f"work-{case}-{tag}", config, configfile))
            (out / f"{case}-{tag}.txt").write_text("\n".join(lines) + "\n")
            texts[tag] = lines
        same = texts["A"] == texts["B"]
        print(f"{case}: {len(texts['A'])} jobs (A) / {len(texts['B'])} (B), normalised lists "
              f"{'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
