"""The measurement-time guard finds other runs' servers by their label, never its own, and keeps a record."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from specsweep.serve import guard


def _labelled(run_id: str, config: str = "other-config") -> subprocess.Popen:
    env = dict(os.environ, SPECSWEEP_RUN_ID=run_id, SPECSWEEP_CONFIG=config, SPECSWEEP_CHECKOUT="/elsewhere")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    deadline = time.monotonic() + 10  # until the child's environ is its own (after exec)
    while guard._environ(str(proc.pid)).get(guard.RUN_ENV) != run_id:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return proc


def test_other_runs_servers_are_found_and_our_own_is_not():
    other, mine = _labelled("0ther0ther00"), _labelled("m1nem1nem1ne", config="mine")
    try:
        seen = {o["run_id"]: o for o in guard.labelled_processes("m1nem1nem1ne")}
        assert "m1nem1nem1ne" not in seen
        assert seen["0ther0ther00"]["pids"] == [other.pid]
        assert seen["0ther0ther00"]["config"] == "other-config" and seen["0ther0ther00"]["checkout"] == "/elsewhere"
        assert "0ther0ther00" in guard.describe(list(seen.values()))
    finally:
        for p in (other, mine):
            p.kill()
            p.wait()
    assert "0ther0ther00" not in {o["run_id"] for o in guard.labelled_processes(None)}


def test_a_sample_records_the_load():
    s = guard.sample(None, with_docker=False)
    assert s["cpus"] == os.cpu_count() and s["load1"] >= 0 and s["running"] >= 0
    assert s["docker"] == "not checked"


def test_the_sampler_runs_beside_the_job_and_keeps_every_sample(tmp_path):
    sampler = guard.Sampler("abcabcabcabc", tmp_path / "samples.jsonl", interval_s=0.2)
    other = None
    try:
        time.sleep(0.5)
        other = _labelled("1ate1ate1ate")
        time.sleep(0.6)
    finally:
        samples = sampler.stop()
        if other is not None:
            other.kill()
            other.wait()
    assert len(samples) >= 4
    record = guard.summarize(samples)
    assert record["samples"] == len(samples) and record["cpus"] == os.cpu_count()
    late = [o for o in record["others_seen"] if o["run_id"] == "1ate1ate1ate"]
    assert late and late[0]["first_seen"] > samples[0]["t"], "seen only once it started"
    assert sampler.proc.poll() is not None


def test_summarize_without_samples():
    assert guard.summarize([]) == {"samples": 0, "others_seen": []}
