"""The server job inside a Slurm job: its identity, and hearing that Slurm ended it.

Why a watch and not only the SIGTERM handler of ``specsweep.job``: on
``scancel`` (or at the time limit) Slurm sends SIGTERM only to the tasks of a
step, the direct children of slurmstepd; every other process of the step gets
only the SIGKILL that follows KillWait seconds later (SchedMD/slurm,
src/plugins/proctrack/cgroup/proctrack_cgroup.c, ``proctrack_p_signal``:
"only signal slurm tasks unless signal is SIGKILL"). The task of a server job
is the ``python -m snakemake`` that snakemake-executor-plugin-slurm-jobstep
starts with srun, and Snakemake answers SIGTERM by waiting for its running
jobs (snakemake/scheduling/job_scheduler.py, ``exit_gracefully``). So the
server job would measure on until the SIGKILL, and never tear down: no
outcome is written, and a docker container (a child of dockerd, outside the
job's cgroup) would outlive the job. The watch asks the scheduler instead and
turns "Slurm ended this job" into the SIGTERM that the job already handles.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import TextIO

# How often a running server job asks for its own state. With Slurm's default
# KillWait of 30 s, a 5 s poll plus specsweep.server.TERM_GRACE_S (15 s) ends
# the server before the SIGKILL.
POLL_S = 5.0

# Job states (squeue %T) of a job that Slurm has ended or is ending.
ENDED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "TIMEOUT",
})


def slurm_job(environ: Mapping[str, str]) -> dict[str, str | None] | None:
    """The Slurm job this process runs in, as Slurm set it in the environment
    (None outside Slurm): the job id, the node, the step."""
    if not environ.get("SLURM_JOB_ID"):
        return None
    return {
        "job_id": environ["SLURM_JOB_ID"],
        "node": environ.get("SLURMD_NODENAME"),
        "step_id": environ.get("SLURM_STEP_ID"),
    }


def job_state(job_id: str, squeue: str = "squeue") -> str | None:
    """The job's state as the scheduler reports it (squeue %T), or None when
    it could not be asked (a transient failure is not an ended job)."""
    argv = [squeue, "--noheader", "--jobs", str(job_id), "--format", "%T"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired):
        return None
    state = result.stdout.strip()
    return state if result.returncode == 0 and state else None


class EndWatch:
    """Poll the job's state in a daemon thread; when Slurm reports the job
    ended, send SIGTERM to this process (whose handler tears the server down).

    ``stop()`` before the teardown, so that the watch never interrupts it.
    """

    def __init__(
        self,
        job_id: str,
        log: TextIO,
        *,
        poll_s: float = POLL_S,
        state: Callable[[str], str | None] = job_state,
        pid: int | None = None,
    ) -> None:
        self.job_id = job_id
        self.log = log
        self.poll_s = poll_s
        self.state = state
        self.pid = os.getpid() if pid is None else pid
        self.ended: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"slurm-watch-{job_id}", daemon=True)

    def start(self) -> "EndWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.poll_s + 35)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            state = self.state(self.job_id)
            if state in ENDED_STATES and not self._stop.is_set():
                self.ended = state
                print(f"Slurm job {self.job_id} is {state}: ending the server", file=self.log, flush=True)
                os.kill(self.pid, signal.SIGTERM)
                return
