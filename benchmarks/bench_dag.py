"""How long Snakemake takes to plan a sweep, and how many server launches it costs.

Prints, for a grid of N configurations (default 500: axes over config.yaml's
eagle3-shm, with 3 workload points per launch):
  * `snakemake -n all` with nothing built yet (parsing, validation, grid
    expansion, plan resolution, DAG);
  * the no-op rerun: `snakemake -n all` once every output exists and is up to
    date, i.e. what a user waits for when nothing changed;
  * server launches of the sweep (= benchmark_server jobs = configurations x
    launches + the A/A control), against configurations x points (what it
    would cost if every workload point had its own launch);
  * the import time of what rules/common.smk imports (paid at every start);
  * Snakemake alone on a DAG of the same shape: the same jobs per rule and the
    same edges, but trivial rules (a `shell:` touch, no params, no input
    functions, no scripts). What the workflow costs above that line is ours;
    the line itself is Snakemake's floor for this many jobs on this machine;
  * the same floor with the judgement a checkpoint over every plan and every
    launch of the planned rounds, which every summary waits for, as the
    workflow's judgement is when extra rounds may run (config.yaml's
    rounds.max_launches): what Snakemake costs for that shape alone.
Goal: each `snakemake -n` under 3 s. Wall time on a shared machine depends
on its load; CPU time (user + sys of the snakemake process) is printed too.

The no-op case needs every output present. Running 500 real benchmarks for a
timing of Snakemake itself would take days, so every output the dry run
lists is created (empty; a JSON file an empty object, a configuration's plan
the plan it resolves to: the workflow's start reads them; beside a launch's
outcome.json its other files, as a real launch leaves them) and recorded with
`snakemake --touch`. `--touch`
records no params metadata for resolve_plan and preflight_config (Snakemake
then says so and skips their params check, which makes the no-op cheaper than
on a real results tree); with `--real-plans` those two rules run for real
first (`snakemake preflight`: slow, one Python process per job), so the no-op
checks every plan's params as it would after a real sweep.
Run from the repository root:  python benchmarks/bench_dag.py [N] [ROUNDS] [--real-plans]
"""

from __future__ import annotations

import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from specsweep.contracts import layout  # noqa: E402
from specsweep.files import canonical_json  # noqa: E402
from specsweep.plan.config import check_sweep  # noqa: E402
from specsweep.plan.resolve import resolve_sweep  # noqa: E402
from specsweep.testing.workflow import copy_workflow, job_counts  # noqa: E402

POINTS = [{"concurrency": 1}, {"concurrency": 2}, {"concurrency": 4}]


def grid_config(n: int) -> dict:
    """config.yaml plus one grid of about ``n`` configurations (3 axes), 3 points per launch."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    base = len(config["configurations"])
    a = 5
    b = max(1, round(math.sqrt((n - base) / a)))
    c = max(1, math.ceil((n - base) / (a * b)))
    config["defaults"]["points"] = POINTS
    config["configurations"]["sweep"] = {
        "extends": "eagle3-shm",
        "axes": [
            {"env.NCCL_BUFFSIZE": [str(1 << (20 + i)) for i in range(a)], "token": "buf"},
            {"env.SWEEP_A": [str(i) for i in range(b)], "token": "a"},
            {"env.SWEEP_B": [str(i) for i in range(c)], "token": "b"},
        ],
    }
    return config


def timed(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, output) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)  # noqa: S603
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout + result.stderr


def outputs_of_dry_run(text: str) -> list[str]:
    return sorted({f.strip() for m in re.finditer(r"^\s+output: (.+)$", text, flags=re.M) for f in m[1].split(",")})


def import_cost() -> float:
    """Seconds to import, in a fresh interpreter, what rules/common.smk imports (median of 3)."""
    code = ("import time; t = time.perf_counter(); import specsweep.workflow.inputs, specsweep.plan.config, "
            "specsweep.plan.resolve; print(time.perf_counter() - t)")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    runs = [float(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,  # noqa: S603
                                 check=True, env={**os.environ, "PYTHONPATH": path}).stdout) for _ in range(3)]
    return statistics.median(runs)


SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1"]


def floor_snakefile(configs: int, launches: int, aa: int, checkpoint: bool = False) -> str:
    """A Snakefile with the sweep's DAG shape and nothing else: per configuration a plan, its selection as the
    current one, a preflight, ``launches`` launches (each after a burn-in) and a summary (the first
    configuration ``aa`` more launches: the A/A control); a judgement of the last planned round over its
    launches, one report over every summary and the judgement, its rendering. Each job touches its output.

    With ``checkpoint``, the judgement is what it is in the workflow when extra rounds may run
    (``rounds.max_launches``, as in config.yaml): a checkpoint over every configuration's current plan and
    every launch of the planned rounds (``judge_inputs``), which every summary waits for before it lists its
    launches (``summary_inputs``: the rounds after it come from it); Snakemake evaluates the summaries again
    once it is written, or, at a start where it exists, once more after building the DAG."""
    text = _floor_rules(configs, launches, aa)
    if not checkpoint:
        return text
    out = text.replace("""rule judge:
    input: expand("r/{c}/launch-{launch}/outcome.json", c=N, launch=[L])
""", f"""checkpoint judge:
    input: expand("r/{{c}}/plan.json", c=N),
           [f"r/{{c}}/launch-{{i}}/outcome.json" for c in N for i in range(1, 1 + L + ({aa} if c == "c0" else 0))]
""").replace("""rule summary:
    input: "r/{c}/plan.json", launches
""", """def judged_launches(wildcards):
    checkpoints.judge.get()  # the summary waits for the judgement
    return launches(wildcards)
rule summary:
    input: "r/{c}/plan.json", judged_launches
""")
    assert "checkpoint judge:" in out and "judged_launches\n" in out, "the floor's rules changed: update checkpoint"
    return out


def _floor_rules(configs: int, launches: int, aa: int) -> str:
    return f"""N = [f"c{{i}}" for i in range({configs})]
L = {launches}
wildcard_constraints:
    c="c[0-9]+",
    launch="[0-9]+",
rule all:
    input: "r/report.md"
rule render:
    input: "r/report.json"
    output: "r/report.md"
    shell: "touch {{output}}"
rule analyze:
    input: expand("r/{{c}}/summary.json", c=N), "r/judgement.json"
    output: "r/report.json"
    shell: "touch {{output}}"
rule judge:
    input: expand("r/{{c}}/launch-{{launch}}/outcome.json", c=N, launch=[L])
    output: "r/judgement.json"
    shell: "touch {{output}}"
rule burn_in:
    output: "r/burn-in.json"
    shell: "touch {{output}}"
rule plan:
    output: "r/{{c}}/plans/plan.json"
    shell: "touch {{output}}"
rule select:
    input: "r/{{c}}/plans/plan.json"
    output: "r/{{c}}/plan.json"
    shell: "touch {{output}}"
rule preflight:
    input: "r/{{c}}/plans/plan.json"
    output: "r/{{c}}/preflight.json"
    shell: "touch {{output}}"
rule launch:
    input: "r/{{c}}/plans/plan.json", "r/{{c}}/preflight.json", "r/burn-in.json"
    output: "r/{{c}}/launch-{{launch}}/outcome.json"
    shell: "touch {{output}}"
def launches(wildcards):
    return [f"r/{{wildcards.c}}/launch-{{i}}/outcome.json"
            for i in range(1, 1 + L + ({aa} if wildcards.c == "c0" else 0))]
rule summary:
    input: "r/{{c}}/plan.json", launches
    output: "r/{{c}}/summary.json"
    shell: "touch {{output}}"
"""


def touched_content(path: str, plans: dict[str, dict]) -> str:
    """What a touched output holds: the workflow's start reads some of them (``workflow.stored``: the current
    plan's copy, the summaries' launch ids, the burn-in's record), so a JSON file gets a valid object and a
    configuration's plan (``results/<config>/plan.json`` and the stored one) the plan it resolves to, as a
    real run writes it (so the start's check of stored launches does the work it does after a real sweep)."""
    parts = Path(path).parts
    if path.endswith("/plan.json") and len(parts) >= 3 and parts[0] == "results" and parts[1] in plans:
        return canonical_json(plans[parts[1]])
    return "{}" if path.endswith(".json") else ""


def launch_files(work: Path, path: str) -> None:
    """Beside a launch's outcome.json in the workflow's results (benchmark_server's one declared output), the
    launch's other files (``layout.LAUNCH_FILES``), empty, as a real launch leaves them: the start checks each
    summarized launch for them (``workflow.stored``)."""
    if not (path.startswith(f"{layout.RESULTS}/") and path.endswith(f"/{layout.LAUNCH_FILES['outcome']}")):
        return
    for leaf in layout.LAUNCH_FILES.values():
        target = work / Path(path).parent / leaf
        if leaf == layout.NCCL_LOG_DIR:
            target.mkdir(exist_ok=True)
        elif not target.exists():
            target.write_text("")


def resolved_plans(work: Path) -> dict[str, dict]:
    """The plans the workflow in ``work`` resolves (its config.yaml), by configuration; {} without one."""
    if not (work / "config.yaml").exists():
        return {}
    here = Path.cwd()
    os.chdir(work)  # relative paths of the config (model directories) resolve from the workflow's root
    try:
        plans, _ = resolve_sweep(check_sweep(yaml.safe_load((work / "config.yaml").read_text()), "config.yaml").config)
    finally:
        os.chdir(here)
    return plans


def dry_and_noop(work: Path, rounds: int, real_plans: bool = False) -> tuple[list, list, str]:
    """Timings of ``snakemake -n all`` with nothing built, then of the no-op rerun once every output the
    dry run lists exists (created empty, recorded with ``--touch``; with ``real_plans``, plans and
    preflights are built for real first). Returns (nothing-built runs, no-op runs, the first dry run's output)."""
    dry = [timed(SNAKEMAKE + ["-n", "all"], work) for _ in range(rounds)]
    skip_touch: tuple[str, ...] = ()
    if real_plans:
        timed(SNAKEMAKE + ["preflight"], work)  # plans and preflights for real: their params metadata
        skip_touch = ("/plan.json", "/preflight.json")
    plans = resolved_plans(work)
    for path in outputs_of_dry_run(dry[0][2]):
        if path.endswith(skip_touch):
            continue
        if not Path(path).suffix:  # a directory() output (the launch's NCCL debug files, the report's plots)
            (work / path).mkdir(parents=True, exist_ok=True)
            continue
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(touched_content(path, plans))
        launch_files(work, path)
    timed(SNAKEMAKE + ["--touch", "all"], work)
    noop = []
    for _ in range(rounds):
        wall, cpu, out = timed(SNAKEMAKE + ["-n", "all"], work)
        if "Nothing to be done" not in out:
            raise SystemExit(f"expected a no-op rerun, got:\n{out[-3000:]}")
        noop.append((wall, cpu, out))
    return dry, noop, dry[0][2]


def main(n: int = 500, rounds: int = 3, real_plans: bool = False) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-dag-"))
    try:
        work = copy_workflow(tmp / "workflow")
        (work / "config.yaml").write_text(yaml.safe_dump(grid_config(n), sort_keys=False))
        dry, noop, first = dry_and_noop(work, rounds, real_plans)
        counts = job_counts(first)
        configs = counts["summarize_config"]
        launches = counts["benchmark_server"]
        missing = re.search(r"(\d+) jobs have missing provenance/metadata", noop[-1][2])

        per = launches // configs  # every configuration's planned launches; the rest: the A/A control
        floors = {}
        for checkpoint in (False, True):
            floor = tmp / f"floor-{checkpoint}"
            floor.mkdir()
            (floor / "Snakefile").write_text(floor_snakefile(configs, per, launches - per * configs, checkpoint))
            floors[checkpoint] = dry_and_noop(floor, rounds)
        floor_jobs = sum(v for k, v in job_counts(floors[False][2]).items() if k != "all")

        def line(label: str, runs: list) -> str:
            walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
            return (f"{label} wall median {statistics.median(walls):.2f} s {[round(x, 2) for x in walls]}, "
                    f"CPU median {statistics.median(cpus):.2f} s  (goal < 3 s)")

        print(f"configurations: {configs} ({len(POINTS)} workload points each; machine: {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f})")
        print(f"jobs planned: {sum(v for k, v in counts.items() if k != 'all')} {dict(sorted(counts.items()))}")
        print(f"server launches per sweep: {launches} (= {configs} configurations x {per} launches + "
              f"{launches - per * configs} A/A control), not {configs * per * len(POINTS)} (x points)")
        print(line("snakemake -n all, nothing built:", dry))
        print(line("no-op rerun (snakemake -n all): ", noop)
              + f"  [plans {'run for real' if real_plans else 'touched'}; jobs without params metadata: "
                f"{missing[1] if missing else 0}]")
        print(f"Snakemake alone, same DAG shape ({floor_jobs} trivial jobs, no params/functions/scripts):")
        print(line("  snakemake -n all, nothing built:", floors[False][0]))
        print(line("  no-op rerun (snakemake -n all): ", floors[False][1]) + "  [touched: no params metadata]")
        print("Snakemake alone, the same with the judgement a checkpoint that every summary waits for "
              f"({'as here' if counts.get('judge_round') else 'not so here: no extra rounds'}):")
        print(line("  snakemake -n all, nothing built:", floors[True][0]))
        print(line("  no-op rerun (snakemake -n all): ", floors[True][1]) + "  [touched: no params metadata]")
        print(f"import of what rules/common.smk imports: {import_cost():.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    main(*numbers[:2], real_plans="--real-plans" in sys.argv)
