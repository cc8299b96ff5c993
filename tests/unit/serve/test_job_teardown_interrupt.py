"""A Ctrl-C that lands while the job stops its server still leaves the launch's outcome.json and its outcome line,
nothing after that line on the terminal, and no traceback.

The job runs as under Snakemake: its own process, inside ``job_log``, with Python's own SIGINT handler, its
terminal lines on stderr. The server is the loopback streaming server behind a wrapper that takes seconds to
stop on SIGTERM (as a real server does while it frees its GPUs) and leaves a file when the SIGTERM arrives, so the
test's SIGINT lands inside the teardown.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from specsweep.files import read_json
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO

# The loopback server; SIGTERM leaves ``marker`` and exits after ``stop_s`` seconds.
SLOW_TO_STOP = r"""
import os, signal, sys, time
from pathlib import Path
from specsweep.testing import loopback
marker, stop_s = Path(sys.argv[1]), float(sys.argv[2])
def stop(signum, frame):
    marker.write_text("SIGTERM")
    time.sleep(stop_s)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
loopback.main(sys.argv[3:])
"""

# The job as the script runs it (scripts/benchmark_server.py): job_log, the terminal on stderr.
JOB = r"""
import json, signal, sys
from pathlib import Path
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.lock import LockSettings
from specsweep.workflow.jobs import job_log
# Python's own Ctrl-C handler, as under Snakemake (a test started in the background inherits SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
out, lock_dir, plan = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
(out / "logs").mkdir(parents=True, exist_ok=True)
paths = JobPaths(*(out / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json")))
host = JobHost(lock=LockSettings(lock_dir=lock_dir, wait_s=60), workdir=out, guard_interval_s=0.3, notice=sys.stderr)
with job_log(out / "logs" / "job.log", buffering=1) as log:
    run_config(plan, paths, None, log, host=host)
"""


def slow_plan(marker: Path, stop_s: float, num_prompts: int) -> dict:
    return plan_dict(
        name="slow", engine="reference", runtime="local",
        argv=[sys.executable, "-c", SLOW_TO_STOP, str(marker), str(stop_s), "--ttft-ms", "5", "--itl-ms", "2"],
        workload={"endpoint": "generate", "num_prompts": num_prompts, "input_len": 8, "output_len": 8,
                  "concurrency": 1, "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0,
                  "request_timeout_s": 30,
                  "warmup": {"window": 1, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}})


def start_job(out: Path, lock_dir: Path, plan: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", JOB, str(out), str(lock_dir), json.dumps(plan)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(condition, job: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert job.poll() is None, f"job ended before {what}: {job.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what}"
        time.sleep(0.02)


def ctrl_c_at(job: subprocess.Popen, *moments: tuple) -> str:
    """A SIGINT at each moment ``(condition, what)`` in turn; the job's stderr once it has ended."""
    try:
        for condition, what in moments:
            wait_for(condition, job, what)
            job.send_signal(signal.SIGINT)
        return job.communicate(timeout=60)[1]
    finally:
        job.kill()
        job.wait()


def test_ctrl_c_while_the_server_stops_keeps_the_measured_outcome(tmp_path):
    """Every point was measured: the result stands (status ok), written, said last, and the job ends with it
    (exit status 0: Snakemake keeps a finished job's files); its log says the server was ended at once."""
    out, marker = tmp_path / "r", tmp_path / "sigterm"
    job = start_job(out, tmp_path / "locks", slow_plan(marker, stop_s=5, num_prompts=4))
    err = ctrl_c_at(job, (marker.exists, "SIGTERM to the server (the teardown)"))
    assert "Traceback" not in err, err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("specsweep slow launch-1: [measured 2/2] 4/4 requests"), err
    assert last.endswith("; outcome: ok"), err
    outcome = read_json(out / "outcome.json")
    assert outcome["status"] == "ok" and outcome["points"]["default"]["status"] == "ok", outcome
    assert outcome["exit_code"] == -signal.SIGKILL, "ended at once, not after its 5 s"
    log = (out / "logs" / "job.log").read_text().rstrip().splitlines()
    assert log[-2:] == ["received SIGINT during the teardown: the server was ended at once; the outcome stands",
                        "outcome: ok"], log[-5:]
    assert job.returncode == 0, err


def test_a_second_ctrl_c_while_the_server_stops_keeps_the_interrupted_outcome(tmp_path):
    """Ctrl-C during measurement, then another while the server stops (a user pressing it twice): outcome.json
    still says where the first one stopped the launch."""
    out, marker = tmp_path / "r", tmp_path / "sigterm"
    job = start_job(out, tmp_path / "locks", slow_plan(marker, stop_s=5, num_prompts=300))
    log = out / "logs" / "job.log"
    err = ctrl_c_at(job, (lambda: log.exists() and "[measured 1/2]" in log.read_text(), "measurement"),
                    (marker.exists, "SIGTERM to the server (the teardown)"))
    assert "Traceback" not in err, err
    assert err.rstrip().splitlines()[-1] == "specsweep slow launch-1: outcome: failed benchmark interrupted", err
    outcome = read_json(out / "outcome.json")
    assert (outcome["status"], outcome["stage"], outcome["reason"]) == ("failed", "benchmark", "interrupted"), outcome
    assert outcome["exit_code"] == -signal.SIGKILL
    log = (out / "logs" / "job.log").read_text()
    assert "received SIGINT during the teardown: the server was ended at once; the job stops as interrupted" in log
    assert log.rstrip().splitlines()[-1] == "interrupted (SIGINT): the job stopped here", log[-2000:]
    assert job.returncode == 130, err
