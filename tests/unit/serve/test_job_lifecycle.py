"""The server job's life cycle against a real server process (the loopback streaming server).

What each test shows: one run id in every file; a result measured beside another server is
``contaminated``; no launch beside one; a server dying mid-benchmark is ``server_exited`` with its
exit code; an interrupt during measurement is recorded as stage ``benchmark``; kill -9 of the job
leaves nothing running; two jobs on one lock directory never run their servers at once.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsweep.analysis.rows import config_rows
from specsweep.analysis.summary import build_summary
from specsweep.files import read_json, read_jsonl
from specsweep.records import MixedRunsError, run_id_of_log
from specsweep.serve import guard, lock
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO
from specsweep.workflow.jobs import one_run_id, summarize_files

FILES = ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json")


def loopback_plan(num_prompts: int = 4, itl_ms: float = 2.0) -> dict:
    return plan_dict(
        name="loop", engine="reference", runtime="local",
        argv=[sys.executable, "-m", "specsweep.testing.loopback", "--ttft-ms", "5", "--itl-ms", str(itl_ms)],
        workload={"endpoint": "generate", "num_prompts": num_prompts, "input_len": 8, "output_len": 8,
                  "concurrency": 1, "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0,
                  "request_timeout_s": 30,
                  "warmup": {"window": 1, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}},
    )


def job_paths(out: Path) -> JobPaths:
    (out / "logs").mkdir(parents=True, exist_ok=True)
    return JobPaths(*(out / name for name in FILES))


# The job as Snakemake runs it: its own process, its log a file.
JOB = r"""
import json, sys
from pathlib import Path
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.lock import LockSettings
out, lock_dir, wait_s, plan = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
(out / "logs").mkdir(parents=True, exist_ok=True)
paths = JobPaths(*(out / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json")))
host = JobHost(lock=LockSettings(lock_dir=lock_dir, wait_s=wait_s), workdir=out, guard_interval_s=0.3)
with open(out / "logs" / "job.log", "w", buffering=1) as log:
    run_config(plan, paths, None, log, host=host)
"""


def start_job(out: Path, lock_dir: Path, plan: dict, wait_s: float = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", JOB, str(out), str(lock_dir), str(wait_s), json.dumps(plan)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_log(out: Path, needle: str, job: subprocess.Popen, timeout_s: float = 60) -> None:
    log = out / "logs" / "job.log"
    deadline = time.monotonic() + timeout_s
    while not (log.exists() and needle in log.read_text()):
        assert job.poll() is None, f"job ended early: {job.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {needle!r} in the job log"
        time.sleep(0.05)


def labelled_foreign_server(run_id: str = "f0re1gnf0re1") -> subprocess.Popen:
    env = dict(os.environ, SPECSWEEP_RUN_ID=run_id, SPECSWEEP_CONFIG="other", SPECSWEEP_CHECKOUT="/other/checkout")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    deadline = time.monotonic() + 10
    while (guard._environ(str(proc.pid)) or {}).get(guard.RUN_ENV) != run_id:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


def run_processes(run_id: str) -> list[int]:
    return [pid for o in guard.labelled_processes(None) if o["run_id"] == run_id for pid in o["pids"]]


def test_every_file_of_a_run_carries_its_run_id(tmp_path):
    paths = job_paths(tmp_path / "r")
    host = JobHost(lock=lock.LockSettings(tmp_path / "locks", wait_s=10), workdir=tmp_path, guard_interval_s=0.3)
    outcome = run_config(loopback_plan(), paths, None, io.StringIO(), host=host)
    assert outcome["status"] == "ok", outcome
    run_id = outcome["run_id"]
    launch = read_json(paths.launch)
    server_log = paths.server_log.read_text()
    assert run_id_of_log(server_log) == run_id
    assert one_run_id(launch, read_json(paths.outcome), server_log, read_jsonl(paths.warmup),
                      read_jsonl(paths.requests)) == run_id
    assert launch["host_lock"]["paths"] == [str(tmp_path / "locks" / "host.lock")]
    # the waits for the host, apart from the server's own time (analysis.launches.host_wait_s)
    assert launch["host_lock"]["waited_s"] >= 0 and launch["host_before_launch"]["waited_s"] >= 0
    assert launch["checkout"] == str(tmp_path.resolve())
    assert outcome["host"]["samples"] >= 1 and outcome["host"]["others_seen"] == []
    assert outcome["server_started_at"] < outcome["server_stopped_at"]
    assert not lock.is_held(tmp_path / "locks" / "host.lock")
    assert run_processes(run_id) == []


def test_files_of_two_runs_are_never_summarised_together(tmp_path):
    """The orphan case: the launch record of one run beside the requests of another."""
    host = JobHost(lock=lock.LockSettings(tmp_path / "locks", wait_s=10), workdir=tmp_path, guard_interval_s=0.3)
    first, second = job_paths(tmp_path / "a"), job_paths(tmp_path / "b")
    run_config(loopback_plan(), first, None, io.StringIO(), host=host)
    run_config(loopback_plan(), second, None, io.StringIO(), host=host)
    (tmp_path / "plan.json").write_text(json.dumps(loopback_plan()))
    inputs = {"plan": str(tmp_path / "plan.json"), "launch": str(first.launch), "server_log": str(first.server_log),
              "warmup": str(first.warmup), "requests": str(second.requests), "outcome": str(first.outcome)}
    with pytest.raises(SystemExit, match="files of two different runs") as info:
        summarize_files(inputs, str(tmp_path / "summary.json"), io.StringIO())
    assert read_json(second.outcome)["run_id"] in str(info.value) and "requests.jsonl" in str(info.value)
    assert not (tmp_path / "summary.json").exists()
    with pytest.raises(MixedRunsError, match="no run id: launch.json"):
        one_run_id({}, read_json(first.outcome), first.server_log.read_text(), [], [])


def test_a_result_measured_beside_another_server_is_contaminated(tmp_path):
    out = tmp_path / "r"
    job = start_job(out, tmp_path / "locks", loopback_plan(num_prompts=80))
    foreign = None
    try:
        wait_for_log(out, "[measured", job)
        foreign = labelled_foreign_server()
        assert job.wait(timeout=120) == 0, job.stderr.read()[-3000:]
    finally:
        if foreign is not None:
            foreign.kill()
            foreign.wait()
        job.kill()
    outcome = read_json(out / "outcome.json")
    assert outcome["status"] == "contaminated" and outcome["reason"] == "other_server", outcome
    assert "f0re1gnf0re1" in outcome["detail"] and "/other/checkout" in outcome["detail"]
    summary = build_summary(loopback_plan(), read_json(out / "launch.json"), outcome, read_jsonl(out / "warmup.jsonl"),
                            read_jsonl(out / "requests.jsonl"), None)
    assert summary["status"] == "contaminated" and summary["run_id"] == outcome["run_id"]
    base = dict(summary, config="base", status="ok")
    rows, _ = config_rows([base, summary], "base")
    assert {r["config"]: r["verdict"] for r in rows}["loop"] == "contaminated"


def test_no_server_is_launched_beside_another(tmp_path):
    foreign = labelled_foreign_server()
    try:
        paths = job_paths(tmp_path / "r")
        host = JobHost(lock=lock.LockSettings(tmp_path / "locks", wait_s=1), workdir=tmp_path, guard_interval_s=0.3)
        log = io.StringIO()
        outcome = run_config(loopback_plan(), paths, None, log, host=host)
    finally:
        foreign.kill()
        foreign.wait()
    assert outcome["status"] == "failed" and outcome["reason"] == "host_busy", outcome
    assert "f0re1gnf0re1" in outcome["detail"] and "waiting: other specsweep servers" in log.getvalue()
    assert "pid" not in read_json(paths.launch), "no server was started"
    assert run_id_of_log(paths.server_log.read_text()) == outcome["run_id"]


def test_a_server_dying_mid_benchmark_is_server_exited_with_its_exit_code(tmp_path):
    out = tmp_path / "r"
    job = start_job(out, tmp_path / "locks", loopback_plan(num_prompts=300))
    try:
        wait_for_log(out, "[measured 1/2]", job)
        os.kill(read_json(out / "launch.json")["pid"], signal.SIGKILL)
        assert job.wait(timeout=120) == 0, job.stderr.read()[-3000:]
    finally:
        job.kill()
    outcome = read_json(out / "outcome.json")
    assert (outcome["stage"], outcome["reason"]) == ("benchmark", "server_exited"), outcome
    assert "server exited with code -9 during benchmark" in outcome["detail"]


def test_an_interrupt_during_measurement_is_recorded_as_the_benchmark_stage(tmp_path):
    out = tmp_path / "r"
    job = start_job(out, tmp_path / "locks", loopback_plan(num_prompts=300))
    try:
        wait_for_log(out, "[measured 1/2]", job)
        job.send_signal(signal.SIGINT)
        assert job.wait(timeout=60) != 0  # an interruption fails the job
    finally:
        job.kill()
    outcome = read_json(out / "outcome.json")
    assert (outcome["stage"], outcome["reason"], outcome["detail"]) == ("benchmark", "interrupted", "received SIGINT")
    assert run_processes(outcome["run_id"]) == []


def test_kill_9_of_the_job_leaves_nothing_running(tmp_path):
    out = tmp_path / "r"
    job = start_job(out, tmp_path / "locks", loopback_plan(num_prompts=300))
    wait_for_log(out, "[measured 1/2]", job)
    run_id = read_json(out / "launch.json")["run_id"]
    assert run_processes(run_id), "the server runs before the kill"
    job.send_signal(signal.SIGKILL)
    job.wait()
    t0 = time.monotonic()
    while run_processes(run_id) or lock.is_held(tmp_path / "locks" / "host.lock"):
        assert time.monotonic() - t0 < 10, f"left running: {run_processes(run_id)}"
        time.sleep(0.1)
    print(f"nothing left {time.monotonic() - t0:.2f} s after kill -9 of the job")


def test_two_jobs_on_one_host_never_run_their_servers_at_once(tmp_path):
    plan = loopback_plan(num_prompts=15)
    jobs = {name: start_job(tmp_path / name, tmp_path / "locks", plan) for name in ("a", "b")}
    for name, job in jobs.items():
        assert job.wait(timeout=180) == 0, job.stderr.read()[-3000:]
    spans = sorted((read_json(tmp_path / n / "outcome.json")["server_started_at"],
                    read_json(tmp_path / n / "outcome.json")["server_stopped_at"], n) for n in jobs)
    assert spans[0][1] <= spans[1][0], f"servers overlapped: {spans}"
    later = spans[1][2]
    assert "waiting for the host" in (tmp_path / later / "logs" / "job.log").read_text()
    for n in jobs:
        assert read_json(tmp_path / n / "outcome.json")["status"] == "ok"


def test_host_settings_come_from_the_environment(tmp_path):
    host = JobHost.from_environ({"SPECSWEEP_LOCK_DIR": str(tmp_path), "SPECSWEEP_LOCK_WAIT_S": "5",
                                 "SPECSWEEP_GUARD_INTERVAL_S": "0.5"}, tmp_path)
    assert (host.lock.lock_dir, host.lock.wait_s, host.guard_interval_s, host.workdir) == (tmp_path, 5.0, 0.5, tmp_path)
    with pytest.raises(ValueError, match="SPECSWEEP_GUARD_INTERVAL_S"):
        JobHost.from_environ({"SPECSWEEP_GUARD_INTERVAL_S": "0"}, tmp_path)
