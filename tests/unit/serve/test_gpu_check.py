"""The check before a launch that no one else holds the GPUs: a partner's server that is on its way out does not
fail the launch (it waits for it to go), a process of someone else does, at once."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

from specsweep.serve import guard, phases
from specsweep.testing.doubles import plan_dict
from specsweep.testing.rounds import bare_job


def _job(tmp_path):
    plan = plan_dict(name="gpu-config", gpus=1)
    return bare_job(plan, "1", tmp_path / "locks", tmp_path / "out", io.StringIO())


def _row(pid: int) -> dict:
    return {"gpu_uuid": "GPU-0", "pid": pid, "process_name": "[No data]", "used_memory": "3006"}


def test_a_process_is_exiting_when_gone_or_a_zombie_and_not_while_it_runs():
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    done = subprocess.Popen(["true"])
    try:
        time.sleep(0.5)
        assert not guard.exiting(os.getpid()) and not guard.exiting(live.pid)
        assert guard.exiting(done.pid)  # a zombie until waited for
    finally:
        live.kill()
        live.wait()
        done.wait()
    assert guard.exiting(done.pid)  # gone


def test_an_exiting_process_still_listed_on_the_gpu_is_waited_for_not_called_busy(tmp_path, monkeypatch):
    done = subprocess.Popen(["true"])
    time.sleep(0.3)
    listed_until = time.monotonic() + 1.0  # the driver lists it a moment longer
    monkeypatch.setattr(phases, "gpu_busy", lambda: [_row(done.pid)] if time.monotonic() < listed_until else [])
    try:
        t0 = time.monotonic()
        seen = phases.gpus_in_use(_job(tmp_path), known=lambda: set())
        assert seen == {"gpus_busy_before_launch": []}
        assert time.monotonic() - t0 >= 0.9
    finally:
        done.wait()


def test_a_live_process_of_someone_else_is_busy_at_once_and_a_partners_is_not(tmp_path, monkeypatch):
    env = dict(os.environ, SPECSWEEP_RUN_ID="partner00000")
    partner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10  # until the partner's environ is its own (after exec)
        while guard.run_id_of(partner.pid) != "partner00000":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        monkeypatch.setattr(phases, "gpu_busy", lambda: [_row(partner.pid), _row(other.pid)])
        t0 = time.monotonic()
        seen = phases.gpus_in_use(_job(tmp_path), known=lambda: {"partner00000"})
        assert [b["pid"] for b in seen["gpus_busy_before_launch"]] == [other.pid]
        assert time.monotonic() - t0 < phases.GPU_SETTLE_S / 2
    finally:
        for p in (partner, other):
            p.kill()
            p.wait()
