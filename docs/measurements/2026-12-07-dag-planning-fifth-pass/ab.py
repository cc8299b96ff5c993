"""`snakemake --cores 1 -n all` on the 500-configuration grid, the parent (A) and this branch (B) and bench_dag's two
floors (F1, F2) in turn within each round: nothing built, then the no-op (every output the dry run lists
created and recorded with --touch, as bench_dag.dry_and_noop does, a launch's other files beside its outcome.json).

    nice -n 19 python3 ab.py A_CHECKOUT ROUNDS

Run from this checkout (B); CPU = user + sys of the snakemake process (bench_dag.timed).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

B = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(B), str(B / "benchmarks")]
from bench_dag import (  # noqa: E402
    SNAKEMAKE,
    floor_snakefile,
    launch_files,
    outputs_of_dry_run,
    resolved_plans,
    timed,
    touched_content,
)

from specsweep.testing.workflow import copy_workflow, job_counts  # noqa: E402


def touch_all(work: Path, dry_output: str) -> None:
    plans = resolved_plans(work)
    for path in outputs_of_dry_run(dry_output):
        if not Path(path).suffix:
            (work / path).mkdir(parents=True, exist_ok=True)
            continue
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(touched_content(path, plans))
        launch_files(work, path)
    timed(SNAKEMAKE + ["--touch", "all"], work)


def main(a: Path, rounds: int) -> None:
    from bench_dag import grid_config  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="ab-dag-"))
    try:
        works = {}
        for tag, repo in (("A", a), ("B", B)):
            works[tag] = copy_workflow(tmp / tag, repo=repo)
            (works[tag] / "config.yaml").write_text(yaml.safe_dump(grid_config(500), sort_keys=False))
        first = timed(SNAKEMAKE + ["-n", "all"], works["B"])[2]
        counts = job_counts(first)
        configs, launches = counts["summarize_config"], counts["benchmark_server"]
        per = launches // configs
        for tag, checkpoint in (("F1", False), ("F2", True)):
            works[tag] = tmp / tag
            works[tag].mkdir()
            (works[tag] / "Snakefile").write_text(floor_snakefile(configs, per, launches - per * configs, checkpoint))
        print(f"jobs planned (B): {sum(v for k, v in counts.items() if k != 'all')}; {configs} configurations, "
              f"{launches} launches")
        for phase in ("nothing built", "no-op"):
            cpu: dict[str, list[float]] = {t: [] for t in works}
            wall: dict[str, list[float]] = {t: [] for t in works}
            outs: dict[str, str] = {}
            if phase == "no-op":
                for tag, work in works.items():
                    touch_all(work, timed(SNAKEMAKE + ["-n", "all"], work)[2])
            for r in range(1, rounds + 1):
                for tag, work in works.items():
                    w, c, out = timed(SNAKEMAKE + ["-n", "all"], work)
                    if phase == "no-op" and "Nothing to be done" not in out:
                        raise SystemExit(f"{tag}: expected a no-op, got:\n{out[-3000:]}")
                    outs[tag] = out
                    cpu[tag].append(c)
                    wall[tag].append(w)
                    print(f"{phase} run {r} {tag}: CPU {c:.2f} s, wall {w:.2f} s", flush=True)
            med = {t: statistics.median(v) for t, v in cpu.items()}
            for tag in works:
                print(f"{phase} {tag}: CPU median {med[tag]:.2f} s {[round(x, 2) for x in cpu[tag]]}, "
                      f"wall median {statistics.median(wall[tag]):.2f} s")
            ratios = {f"{x}/{f}": med[x] / med[f] for x in ("B", "A") for f in ("F1", "F2")}
            print(f"{phase}: B/A {med['B'] / med['A']:.3f}; " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()),
                  flush=True)
            if phase == "no-op":
                for tag in ("A", "B"):
                    warned = [ln for ln in outs[tag].splitlines() if "lacks" in ln]
                    print(f"no-op {tag}: {len(warned)} lines about launches lacking a file")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
