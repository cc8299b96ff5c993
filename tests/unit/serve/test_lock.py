"""The host lock: one holder at a time across processes, a waiter says whom it waits for, and the
lock dies with its holder (also on kill -9) or lives on in a process that inherited it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsweep.serve import lock

HOLDER = r"""
import sys, time
from pathlib import Path
from specsweep.serve.lock import LockSettings, acquire
held = acquire(LockSettings(lock_dir=Path(sys.argv[1]), wait_s=0), {"config": "holder-config", "checkout": "/x",
               "run_id": "feedfacecafe"}, gpu_ids=sys.argv[3:])
print("HELD", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(lock_dir: Path, seconds: float, *gpus: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_dir), str(seconds), *gpus],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "HELD"
    return proc


def test_a_second_job_waits_then_fails_naming_the_holder(tmp_path):
    holder = _hold(tmp_path, 60)
    log = io.StringIO()
    try:
        t0 = time.monotonic()
        with pytest.raises(lock.HostBusy) as info:
            lock.acquire(lock.LockSettings(tmp_path, wait_s=1.0), {"config": "other"}, log=log)
        assert 1.0 <= time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert f"pid {holder.pid}" in message and "'holder-config'" in message and "feedfacecafe" in message
    assert info.value.holder["run_id"] == "feedfacecafe"
    assert "waiting for the host" in log.getvalue() and f"pid {holder.pid}" in log.getvalue()


def test_the_terminal_hears_of_the_wait_and_the_log_of_its_end(tmp_path):
    """The waiting line goes to the log at once and to the terminal once the wait is long; how long it waited
    to the log only (the job says it on the terminal with its launching line: a short wait costs no line)."""
    for notice_after, seen in ((0.0, True), (lock.NOTICE_AFTER_S, False)):
        holder = _hold(tmp_path, 1.5)
        log, term = io.StringIO(), io.StringIO()
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(lock, "NOTICE_AFTER_S", notice_after)
                held = lock.acquire(lock.LockSettings(tmp_path, wait_s=30.0), {"config": "other"}, log=log,
                                    notice=term)
            held.release()
        finally:
            holder.kill()
            holder.wait()
        assert "waiting for the host (configuration 'other')" in log.getvalue()
        assert ("waiting for the host (configuration 'other')" in term.getvalue()) is seen, notice_after
        assert "host lock acquired after" in log.getvalue() and "acquired" not in term.getvalue()
        assert held.waited_s > 0.5


def test_a_long_wait_is_a_few_lines_on_the_terminal(tmp_path, monkeypatch):
    """The log hears of the wait every MESSAGE_EVERY_S, the terminal every NOTICE_EVERY_S (a clock that runs
    200 s a look: 2000 s of waiting in ten looks)."""
    holder = _hold(tmp_path, 60)
    log, term = io.StringIO(), io.StringIO()
    ticks = iter(range(0, 10_000, 200))
    monkeypatch.setattr(lock, "POLL_S", 0.01)
    try:
        with pytest.raises(lock.HostBusy):
            lock.acquire(lock.LockSettings(tmp_path, wait_s=2000.0), {"config": "other"}, log=log, notice=term,
                         clock=lambda: float(next(ticks)))
    finally:
        holder.kill()
        holder.wait()
    logged, told = log.getvalue().count("waiting for the host"), term.getvalue().count("waiting for the host")
    # looks at 200 .. 1800 s (at 2000 s it gives up): each one logged (60 s apart at most), the terminal told at
    # 200 s (past NOTICE_AFTER_S), then at 600, 1000, 1400 and 1800 s (NOTICE_EVERY_S = 300 s after each)
    assert lock.NOTICE_EVERY_S == 300.0 and (logged, told) == (9, 5)


def test_the_lock_dies_with_its_holder_on_kill_9(tmp_path):
    holder = _hold(tmp_path, 600)
    assert lock.is_held(tmp_path / "host.lock")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    held = lock.acquire(lock.LockSettings(tmp_path, wait_s=10), {"config": "next"})
    try:
        assert time.monotonic() - t0 < 2, "nothing stale may be left behind by a killed holder"
        assert lock.read_holder(tmp_path / "host.lock")["config"] == "next"
    finally:
        held.release()
    assert not lock.is_held(tmp_path / "host.lock")


def test_a_waiting_job_gets_the_lock_when_the_holder_ends(tmp_path):
    holder = _hold(tmp_path, 1.5)
    held = lock.acquire(lock.LockSettings(tmp_path, wait_s=30), {"config": "next"}, log=io.StringIO())
    try:
        assert held.waited_s >= 0.5
        assert held.waited_for and held.waited_for[0]["config"] == "holder-config"
        assert held.record()["waited_for"][0]["run_id"] == "feedfacecafe"
    finally:
        held.release()
        holder.wait()


def test_a_server_that_inherited_the_lock_keeps_it_after_the_job_closes_its_own(tmp_path):
    """What the job relies on: the lock lasts as long as the server, even when the job is gone first."""
    held = lock.acquire(lock.LockSettings(tmp_path, wait_s=0), {"config": "job"})
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=tuple(held.fds))
    try:
        held.release()
        assert lock.is_held(tmp_path / "host.lock"), "the server's descriptor must keep the lock"
    finally:
        server.kill()
        server.wait()
    assert not lock.is_held(tmp_path / "host.lock")


def test_gpu_locks_are_taken_besides_the_host_lock(tmp_path):
    assert lock.lock_names(["1", "0", "GPU-3a/b"]) == ["host.lock", "gpu-0.lock", "gpu-1.lock", "gpu-GPU-3a_b.lock"]
    holder = _hold(tmp_path, 60, "0", "1")
    try:
        held_now = {h["lock"] for h in lock.current_holders(tmp_path)}
        assert held_now == {"host.lock", "gpu-0.lock", "gpu-1.lock"}
    finally:
        holder.kill()
        holder.wait()
    assert lock.current_holders(tmp_path) == []


def test_lock_files_are_usable_by_every_user(tmp_path):
    held = lock.acquire(lock.LockSettings(tmp_path / "locks", wait_s=0), {"config": "x"})
    held.release()
    assert (tmp_path / "locks").stat().st_mode & 0o7777 == 0o1777
    assert (tmp_path / "locks" / "host.lock").stat().st_mode & 0o777 == 0o666


def test_settings_from_the_environment():
    assert lock.LockSettings.from_environ({}) == lock.LockSettings(lock.DEFAULT_LOCK_DIR, lock.DEFAULT_WAIT_S)
    got = lock.LockSettings.from_environ({"SPECSWEEP_LOCK_DIR": "/run/x", "SPECSWEEP_LOCK_WAIT_S": "0"})
    assert got == lock.LockSettings(Path("/run/x"), 0.0)
    for bad in ("soon", "-1"):
        with pytest.raises(ValueError, match="SPECSWEEP_LOCK_WAIT_S"):
            lock.LockSettings.from_environ({"SPECSWEEP_LOCK_WAIT_S": bad})


def test_default_lock_dir_is_host_wide():
    assert lock.DEFAULT_LOCK_DIR.parent == Path("/tmp")
    assert os.access("/tmp", os.W_OK)
