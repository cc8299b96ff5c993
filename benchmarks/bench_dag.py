"""How long Snakemake takes to plan a sweep of many configurations.

Prints, for N configurations (default 50) derived from config.yaml:
  * `snakemake -n all` with nothing built yet (parsing, validation, plan
    resolution, DAG);
  * the no-op rerun: `snakemake -n all` once every output exists and is up to
    date, i.e. what a user waits for when nothing changed.
Targets: under 2 s each.

The no-op case needs every output present. Running 50 real benchmarks for a
timing of Snakemake itself would take an hour, so the plans and preflights are
produced for real and the server-job outputs are created empty and recorded
with `snakemake --touch`: Snakemake's bookkeeping is the same, the content is
not read. Run from the repository root:  python benchmarks/bench_dag.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import copy_workflow  # noqa: E402


def many_configurations(n: int) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    base = next(iter(config["configurations"]))
    for i in range(n - len(config["configurations"])):
        config["configurations"][f"sweep-{i:03d}"] = {
            "extends": base,
            "env": {"NCCL_BUFFSIZE": str(1 << (20 + i % 5)), "SWEEP_INDEX": str(i)},
        }
    return config


def timed(argv: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)  # noqa: S603
    elapsed = time.perf_counter() - t0
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return elapsed, result.stdout + result.stderr


def main(n: int = 50, rounds: int = 3) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-dag-"))
    try:
        work = copy_workflow(tmp)
        (work / "config.yaml").write_text(yaml.safe_dump(many_configurations(n), sort_keys=False))
        snakemake = [sys.executable, "-m", "snakemake", "--cores", "1"]
        dry = [timed(snakemake + ["-n", "all"], work)[0] for _ in range(rounds)]

        timed(snakemake + ["preflight"], work)  # plans and preflights, for real
        results = work / "results"
        names = sorted(p.parent.name for p in results.glob("*/plan.json"))
        for name in names:
            for leaf in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json", "summary.json"):
                (results / name / leaf).touch()
        for leaf in ("summary.csv", "report.md", "plots/tok_s.png", "plots/cycle_time.png", "plots/accept_length.png"):
            (results / leaf).parent.mkdir(parents=True, exist_ok=True)
            (results / leaf).touch()
        timed(snakemake + ["--touch", "all"], work)
        noop = []
        for _ in range(rounds):
            elapsed, out = timed(snakemake + ["-n", "all"], work)
            if "Nothing to be done" not in out:
                raise SystemExit(f"expected a no-op rerun, got:\n{out[-3000:]}")
            noop.append(elapsed)
        print(f"configurations: {len(names)} (machine: {shutil.os.cpu_count()} cores)")
        print(f"snakemake -n all, nothing built:  median {statistics.median(dry):.2f} s  runs {[round(x, 2) for x in dry]}  (target < 2 s)")
        print(f"no-op rerun (snakemake -n all):   median {statistics.median(noop):.2f} s  runs {[round(x, 2) for x in noop]}  (target < 2 s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
