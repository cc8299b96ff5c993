"""The server job's Slurm side without a scheduler: its identity from the
environment Slurm sets, and the watch that turns "Slurm ended the job" into a
real SIGTERM (tests/slurm checks both against a live Slurm)."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time

from specsweep.serve.slurm import ENDED_STATES, EndWatch, job_state, slurm_job


def test_outside_slurm_there_is_no_job():
    assert slurm_job({"PATH": "/usr/bin"}) is None
    assert slurm_job({"SLURM_JOB_ID": ""}) is None


def test_the_job_id_node_and_step_come_from_slurms_environment():
    env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gpu07", "SLURM_STEP_ID": "0", "SLURM_JOBID": "4242"}
    assert slurm_job(env) == {"job_id": "4242", "node": "gpu07", "step_id": "0"}


def test_an_unreachable_scheduler_is_no_state_not_an_ended_job():
    assert job_state("1", squeue="/nonexistent/squeue") is None
    assert job_state("1", squeue="false") is None


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_the_watch_sends_sigterm_once_slurm_reports_the_job_ended():
    states = iter(["RUNNING", None, "RUNNING", "CANCELLED"])
    target = _sleeper()
    log = io.StringIO()
    try:
        watch = EndWatch("77", log, poll_s=0.05, state=lambda _id: next(states, "CANCELLED"), pid=target.pid).start()
        assert target.wait(timeout=10) == -signal.SIGTERM
        watch.stop()
    finally:
        target.kill()
    assert watch.ended == "CANCELLED"
    assert "Slurm job 77 is CANCELLED: ending the server" in log.getvalue()


def test_a_stopped_watch_sends_nothing():
    target = _sleeper()
    try:
        watch = EndWatch("78", io.StringIO(), poll_s=0.05, state=lambda _id: "RUNNING", pid=target.pid).start()
        time.sleep(0.3)
        watch.stop()
        assert target.poll() is None and watch.ended is None
    finally:
        target.kill()


def test_timeouts_and_preemption_count_as_ended_and_running_does_not():
    assert {"CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "COMPLETING"} <= ENDED_STATES
    assert not {"RUNNING", "PENDING", "CONFIGURING", "SUSPENDED"} & ENDED_STATES
