"""Rounds in tests: a round plan file, server jobs of one round started as Snakemake starts them (each its
own process, all at once), and what their files say about the windows (``serve.sidebyside``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from specsweep.contracts.plan import Plan
from specsweep.contracts.rounds import RoundPlan
from specsweep.files import write_json_atomic
from specsweep.records import new_run_id
from specsweep.serve.container import checkout_id
from specsweep.serve.jobspec import Job, JobHost, JobPaths
from specsweep.serve.launch import identity_env
from specsweep.serve.lock import LockSettings
from specsweep.testing.workflow import REPO

#: One server job as Snakemake's script runs it: its own process, its log a file, the round plan its input.
ROUND_JOB = r"""
import json, sys
from pathlib import Path
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.lock import LockSettings
out, lock_dir = Path(sys.argv[1]), Path(sys.argv[2])
plan, launch, round_plan, wait_s = json.loads(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6])
(out / "logs").mkdir(parents=True, exist_ok=True)
paths = JobPaths(*(out / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json")))
host = JobHost(lock=LockSettings(lock_dir=lock_dir, wait_s=wait_s), workdir=Path.cwd(), guard_interval_s=0.5)
with open(out / "logs" / "job.log", "w", buffering=1) as log:
    run_config(plan, paths, None, log, host=host, launch_id=launch, round_plan=round_plan or None)
"""


def write_round_plan(path: Path, order: Sequence[tuple[str, str]], design: str = "side-by-side",
                     round_no: int = 1) -> Path:
    """A round plan file (``contracts.rounds``) of ``order``."""
    plan = RoundPlan.from_dict({"format_version": 1, "round": round_no, "design": design,
                                "why": "a test round", "seed": 0, "order": [list(p) for p in order]})
    write_json_atomic(path, plan.to_dict())
    return path


def launch_dir(results: Path, config: str, launch: str) -> Path:
    return results / config / f"launch-{launch}"


def start_round_jobs(results: Path, lock_dir: Path, plans: Mapping[str, Mapping[str, Any]],
                     order: Sequence[tuple[str, str]], round_plan: Path | None, wait_s: float = 300.0
                     ) -> list[subprocess.Popen]:
    """Every job of the round at once, each in its own process (``plans``: configuration -> plan.json object;
    ``wait_s``: the host's ``SPECSWEEP_LOCK_WAIT_S``)."""
    procs = []
    for config, launch in order:
        out = launch_dir(results, config, launch)
        out.mkdir(parents=True, exist_ok=True)
        procs.append(subprocess.Popen(
            [sys.executable, "-c", ROUND_JOB, str(out), str(lock_dir), json.dumps(dict(plans[config])), launch,
             str(round_plan or ""), str(wait_s)],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return procs


def wait_all(procs: Iterable[subprocess.Popen], timeout_s: float) -> None:
    for proc in procs:
        _, err = proc.communicate(timeout=timeout_s)
        assert proc.returncode == 0, err[-3000:]


def window_spans(launch_json: Mapping[str, Any]) -> list[tuple[int, int, str]]:
    """(start_ns, end_ns, label) of each window of one launch (``launch.json``'s ``window_log``)."""
    return [(w["start_ns"], w["end_ns"], w["label"]) for w in launch_json.get("window_log") or []]


def overlaps(spans: Mapping[str, Sequence[Sequence[Any]]]) -> list[tuple[str, str]]:
    """Pairs (launch, launch) whose intervals ``(start, end, ...)`` overlap (``spans``: launch -> its intervals)."""
    flat = sorted((iv[0], iv[1], who) for who, ivs in spans.items() for iv in ivs)
    found, end, owner = [], None, None
    for start, stop, who in flat:
        if end is not None and start < end and who != owner:
            found.append((owner, who))
        if end is None or stop > end:
            end, owner = stop, who
    return found


def bare_job(plan: Mapping[str, Any], launch: str, lock_dir: Path, out: Path, log: TextIO) -> Job:
    """A ``Job`` of ``plan`` (a plan.json object) writing under ``out``, for tests of one part of a job."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    paths = JobPaths(*(out / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl",
                                           "outcome.json")))
    run_id = new_run_id()
    return Job(plan=Plan.from_dict(dict(plan)), paths=paths,
               host=JobHost(lock=LockSettings(lock_dir=lock_dir, wait_s=60), workdir=REPO), run_id=run_id,
               launch_id=launch, log=log, console=None, image_manifest=None, registry=None,
               identity=identity_env(run_id, plan["name"], REPO), checkout=checkout_id(REPO), nccl_dir=out / "nccl")
