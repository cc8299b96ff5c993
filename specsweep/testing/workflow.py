"""Running the workflow from tests and benchmarks: a private copy of it, a small config, a pipeline run,
and what Snakemake planned.

One helper of each for every test tier, so that all of them run the same files the same way.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from specsweep.contracts import layout
from specsweep.contracts.summary import ConfigSummary
from specsweep.records import DEFAULT_POINT

#: The repository root (this file is specsweep/testing/workflow.py).
REPO = Path(__file__).resolve().parents[2]

#: What a copy of the workflow needs to run in another directory (the package
#: included: model configs are read by relative path, and the server is
#: started with ``python -m specsweep.refengine`` from the copy).
WORKFLOW_FILES = (
    "Snakefile", "rules", "scripts", "schemas", "envs", "profiles", "report", "containers", "config", "specsweep",
    "pyproject.toml", "requirements.txt", "config.yaml",
)


def copy_workflow(dest: Path, repo: Path = REPO) -> Path:
    """A private copy of the workflow in ``dest`` (caches and build leftovers excluded); returns ``dest``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in WORKFLOW_FILES:
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def plain_default_config(repo: Path = REPO) -> dict:
    """The default ``config.yaml`` with one launch per configuration and no positive control: the base of
    the end-to-end tests' small sweeps, which count, order and time their own launches."""
    config = yaml.safe_load((repo / "config.yaml").read_text())
    config.pop("positive_control", None)
    config.setdefault("defaults", {})["launches"] = 1
    # No burn-in, one server at a time and no extra rounds: these sweeps time, order and count their own
    # launches (the pipeline tests that check the burn-in, side by side or the rounds turn them on).
    config["burn_in"] = {"enabled": False}
    config["rounds"] = {**config.get("rounds", {}), "design": "sequential", "max_launches": None}
    return config


#: Snakemake on one core, as the workflow's tests run it.
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1"]

#: A workload small enough for a whole pipeline in a test: 3 prompts x 2 repeats of 16 tokens.
SMALL_WORKLOAD = {
    "num_prompts": 3,
    "output_len": 16,
    "repeats": 2,
    "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3},
}

#: A server that dies during startup: its flags parse (preflight runs where the server may not),
#: but a CPU machine has no CUDA device. Its failure is a result; the other configurations complete.
CRASHES = {
    "description": "asks for CUDA on a machine without a GPU",
    "extends": "nospec",
    "server_args": {"device": "cuda", "all-reduce-backend": "nccl"},
}


def run(argv: Sequence[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``argv`` in ``cwd``, its output captured as text."""
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout)  # noqa: S603


def small_config(workload: Mapping[str, Any] = SMALL_WORKLOAD, crashes: bool = True) -> dict:
    """The default ``config.yaml`` as ``plain_default_config`` gives it, with ``workload`` over its defaults'
    and, with ``crashes``, the ``crashes`` configuration (``CRASHES``) added."""
    config = plain_default_config()
    config["defaults"]["workload"].update(workload)
    if crashes:
        config["configurations"]["crashes"] = dict(CRASHES)
    return config


def run_pipeline(work: Path, config: Mapping[str, Any] | None = None, config_path: str = "config.yaml",
                 snakemake: Sequence[str] = SNAKEMAKE, args: Sequence[str] = ("all",), timeout: float = 1800) -> Path:
    """``config`` written to ``work/config_path`` (when given), then ``snakemake args`` in ``work``, which must
    succeed (an ``AssertionError`` with the tails of its output otherwise); returns ``work``."""
    if config is not None:
        (work / config_path).write_text(yaml.safe_dump(dict(config), sort_keys=False))
    t0 = time.monotonic()
    result = run([*snakemake, *args], work, timeout=timeout)
    print(f"pipeline {work.name} took {time.monotonic() - t0:.0f} s")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return work


#: ``python -c`` this, then Snakemake's arguments: Snakemake with Python's own Ctrl-C handler (a process started
#: in the background, as a test run may be, inherits SIGINT ignored, and Python then keeps it ignored).
SNAKEMAKE_WITH_CTRL_C = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
                         "from snakemake.cli import main\n"
                         "sys.argv = ['snakemake', *sys.argv[1:]]\n"
                         "main()\n")


def interrupted_run(work: Path, args: Sequence[str], ready: Callable[[str], bool],
                    timeout_s: float = 180) -> tuple[int, str]:
    """``snakemake --cores 1 args`` in ``work``, given a SIGINT to its process group (what Ctrl-C in a terminal
    sends) as soon as ``ready(console so far)`` is true; its exit status and its console (stderr into stdout)."""
    console = work / "console.txt"
    with console.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", SNAKEMAKE_WITH_CTRL_C, "--cores", "1", *args],  # noqa: S603
                                cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while not ready(console.read_text()):
                assert proc.poll() is None, f"ended before the Ctrl-C: {console.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"not ready for the Ctrl-C: {console.read_text()[-3000:]}"
                time.sleep(0.01)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, console.read_text()


def planned_jobs(work: Path, *extra: str, snakemake: Sequence[str] = SNAKEMAKE,
                 targets: Sequence[str] = ("all",)) -> list[tuple[str, str, str]]:
    """(rule, config, launch) of every job ``snakemake -n <targets>`` (``all``) would execute in ``work``,
    sorted (``""`` where a job has no such wildcard)."""
    result = run([*snakemake, "-n", *targets, *extra], work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule )", result.stdout):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head and head[1] != "all":
            wild = re.search(r"wildcards: config=([a-z0-9_-]+)(?:, plan=\w+)?(?:, launch=(\w+))?", block)
            jobs.append((head[1], wild[1] if wild else "", (wild[2] or "") if wild else ""))
    return sorted(jobs)


def planned_launches(work: Path) -> set[tuple[str, str]]:
    """(config, launch) of every server job ``snakemake -n all`` would run in ``work``."""
    return {(c, lid) for rule, c, lid in planned_jobs(work) if rule == "benchmark_server"}


def measured_launches(work: Path) -> set[tuple[str, str]]:
    """(config, launch) of every launch with an outcome in ``work``
    (results/<config>/plans/<plan key>/launch-<id>/outcome.json: ``contracts.layout``)."""
    return {(p.parents[3].name, p.parent.name.removeprefix("launch-"))
            for p in (work / "results").glob("*/plans/*/launch-*/outcome.json")}


#: The rounds' own jobs (rules/rounds.smk): a round's plan and its judgement rerun with the launches they
#: read, and measure nothing.
ROUND_RULES = ("plan_round", "judge_round")


def beside_rounds(jobs: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """``jobs`` without the rounds' own jobs (``ROUND_RULES``), which rerun whenever a launch they read does."""
    return [job for job in jobs if job[0] not in ROUND_RULES]


def plan_key_in(work: Path, name: str, configfiles: Sequence[str] = ("config.yaml",)) -> str:
    """The key of the plan that ``configfiles`` (in ``work``, resolved there as Snakemake does) give the
    configuration ``name``: where its plan and launches are stored (``contracts.layout``)."""
    from specsweep.files import canonical_json
    from specsweep.plan.config import load_configs
    from specsweep.plan.resolve import resolve_sweep

    with contextlib.chdir(work):  # (``specsweep failed`` resolves the same way)
        plans, _ = resolve_sweep(load_configs([Path(f) for f in configfiles]), " + ".join(configfiles))
    return layout.plan_key(canonical_json(plans[name]))  # (workflow.inputs.plan_key, a floor above)


def launch_path(work: Path, name: str, launch: str = "1", configfiles: Sequence[str] = ("config.yaml",)) -> Path:
    """The directory of a launch of the plan ``configfiles`` give the configuration ``name`` (``plan_key_in``)."""
    return work / layout.launch_dir(name, plan_key_in(work, name, configfiles), launch)


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints (a dry run, or a run), as ``{rule: count}``; {} when there is none."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^([a-z_]+)\s+(\d+)$", table, flags=re.M) if m[1] != "total"}


def only_point(work: Path, name: str) -> dict:
    """The summary section of a configuration that declares no workload points (its one, ``default``), read
    as every stage reads summary.json (``ConfigSummary.load``), as its mapping."""
    [point] = ConfigSummary.load(work / "results" / name / "summary.json").points
    assert point.point == DEFAULT_POINT, point.point
    return point.to_dict()
