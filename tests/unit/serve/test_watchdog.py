"""Nothing outlives a killed job: the server dies with it (PR_SET_PDEATHSIG), the reaper ends what
ignores that, and a job whose Snakemake died tears down by itself. Real processes, real SIGKILLs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from specsweep.serve import watchdog

# A "job": starts a server through the exec wrapper (and, with "reap", a reaper told its group), prints
# the server's pid, then waits to be killed.
JOB = r"""
import subprocess, sys, time
from specsweep.serve import watchdog
server_code = sys.argv[2]
argv = watchdog.exec_argv(__import__("os").getpid(), [sys.executable, "-c", server_code])
server = subprocess.Popen(argv, start_new_session=True)
if sys.argv[1] == "reap":
    r = watchdog.Reaper(None, None, grace_s=1.0)
    r.watch_group(server.pid)
    print("REAPER", r.proc.pid, flush=True)
print("SERVER", server.pid, flush=True)
time.sleep(600)
"""
SLEEPER = "import time; time.sleep(600)"
# Ignores SIGTERM (so PR_SET_PDEATHSIG does not end it) and has a child in its group.
STUBBORN = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); time.sleep(600)")


def _alive(pid: int) -> bool:
    return watchdog.proc_info(pid) is not None


def _group(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                out.append(int(entry.name))
    return out


def _wait_gone(check, timeout_s: float) -> float:
    t0 = time.monotonic()
    while check():
        assert time.monotonic() - t0 < timeout_s, "still running"
        time.sleep(0.05)
    return time.monotonic() - t0


def _start_job(mode: str, server_code: str) -> tuple[subprocess.Popen, dict[str, int]]:
    job = subprocess.Popen([sys.executable, "-c", JOB, mode, server_code], stdout=subprocess.PIPE, text=True)
    pids = {}
    while "SERVER" not in pids:
        word, pid = job.stdout.readline().split()
        pids[word] = int(pid)
    deadline = time.monotonic() + 10  # until the wrapper has exec'd the server (same pid, the server's argv)
    while True:
        info = watchdog.proc_info(pids["SERVER"])
        if info and info.argv[1:3] == ("-c", server_code):
            return job, pids
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_the_server_dies_within_a_second_when_its_job_is_killed():
    job, pids = _start_job("plain", SLEEPER)
    job.send_signal(signal.SIGKILL)
    job.wait()
    took = _wait_gone(lambda: _alive(pids["SERVER"]), 5)
    print(f"server gone {took:.2f} s after kill -9 of its job")
    assert took < 2


def test_the_reaper_ends_a_server_group_that_ignores_sigterm():
    job, pids = _start_job("reap", STUBBORN)
    pgid = pids["SERVER"]
    deadline = time.monotonic() + 10
    while len(_group(pgid)) < 2:
        assert time.monotonic() < deadline, "the server's child never started"
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
    job.wait()
    took = _wait_gone(lambda: _group(pgid), 10)
    print(f"server group gone {took:.2f} s after kill -9 of its job (grace 1 s)")
    assert took < 5
    _wait_gone(lambda: _alive(pids["REAPER"]), 5)


def test_a_reaper_told_done_ends_nothing(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        r = watchdog.Reaper(None, None, grace_s=0.1)
        r.watch_group(server.pid)
        assert r.done() == 0
        time.sleep(0.3)
        assert server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_the_wrapper_refuses_to_start_when_its_parent_is_already_gone():
    # Parent pid 1 is not our parent: exactly what the wrapper sees when the job died before the exec.
    proc = subprocess.run(watchdog.exec_argv(1, [sys.executable, "-c", "print('started')"]), capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == watchdog.PARENT_GONE_EXIT and "started" not in proc.stdout


# A fake Snakemake (a script named "snakemake") runs a shell that runs the job, as Snakemake does: kill -9 of
# the fake leaves the shell and the job behind, and the job must notice.
FAKE_SNAKEMAKE = r"""
import subprocess, sys, time
subprocess.Popen(["bash", "-c", f"{sys.executable} -c '{sys.argv[1]}' ; true"])
time.sleep(600)
"""
WATCHED_JOB = (
    "import signal, sys, time; from specsweep.serve import watchdog; "
    "w = watchdog.ParentWatch(watchdog.watched_chain(), None, poll_s=0.1).start(); "
    "print(\"CHAIN\", [p.pid for p in w.chain], flush=True); "
    "signal.signal(signal.SIGTERM, lambda *a: (print(\"FIRED\", w.fired, flush=True), sys.exit(0))); "
    "time.sleep(600)"
)


def test_a_job_whose_snakemake_died_gets_sigterm(tmp_path):
    fake = tmp_path / "snakemake"
    fake.write_text(FAKE_SNAKEMAKE)
    out = tmp_path / "job.out"
    with out.open("w") as fh:
        snake = subprocess.Popen([sys.executable, str(fake), WATCHED_JOB], stdout=fh,
                                 env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3])))
        deadline = time.monotonic() + 30
        while "CHAIN" not in out.read_text():
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.05)
        chain = eval(out.read_text().split("CHAIN", 1)[1].splitlines()[0])  # noqa: S307 - our own print
        assert chain[-1] == snake.pid and len(chain) == 2, "watched: the shell, then the Snakemake process"
        snake.send_signal(signal.SIGKILL)
        snake.wait()
        deadline = time.monotonic() + 5
        while "FIRED" not in out.read_text():
            assert time.monotonic() < deadline, "the job did not notice that Snakemake died"
            time.sleep(0.05)
    assert f"parent process {snake.pid} (Snakemake) died" in out.read_text()


def test_without_snakemake_only_the_direct_parent_is_watched():
    chain = watchdog.watched_chain()
    assert [p.pid for p in chain] == [os.getppid()] or watchdog.is_snakemake(chain[-1].argv)


def test_snakemake_is_recognised_however_it_was_started():
    assert watchdog.is_snakemake(["/usr/bin/python3", "-m", "snakemake", "--cores", "1"])
    assert watchdog.is_snakemake(["/opt/venv/bin/snakemake", "all"])
    assert watchdog.is_snakemake(["python3", "/opt/venv/bin/snakemake", "all"])
    assert not watchdog.is_snakemake(["bash", "-c", "snakemake all"])
