"""One server per host and nothing left after a kill, with the real workflow and the reference engine.

The scenarios of issue 15, each as a user would cause it:

* two ``snakemake`` invocations in one directory with disjoint targets,
* ``--resources gpu=8`` on the command line (which drops the profile's ``server: 1``),
* ``kill -9`` of Snakemake's whole process group (``timeout -s KILL``, a cancelled CI job),
* ``kill -9`` of the Snakemake process alone (its job would finish late as an orphan),

and what they must show: the servers' lifetimes never overlap, nothing of a killed run is left
running within seconds, and the next run's files all come from that one run. Each test uses its own
lock directory (``SPECSWEEP_LOCK_DIR``), so that other work on this host does not make it wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specsweep.serve import guard, lock
from specsweep.testing.workflow import copy_workflow, launch_path, plain_default_config

pytestmark = pytest.mark.slow

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SMALL = {"num_prompts": 3, "output_len": 16, "repeats": 2,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3}}
KILL_DEADLINE_S = 10.0


EAGLE3_SHM = {
    "description": "EAGLE-style chain draft, all-reduce through shared memory",
    "server_args": {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
                    "speculative-num-draft-tokens": 4, "all-reduce-backend": "shm"},
    "env": {"SGLANG_SIMULATE_ACC_LEN": "2.5"},
}


def workflow(tmp_path: Path, names=("nospec", "eagle3-shm"), **workload) -> tuple[Path, dict]:
    """A copy of the workflow running ``names`` (of nospec, eagle3-shm) on a small workload, and its env."""
    work = copy_workflow(tmp_path / "work")
    config = plain_default_config()
    config["defaults"]["workload"].update(SMALL, **workload)
    config["configurations"] = {n: {"nospec": config["configurations"]["nospec"], "eagle3-shm": EAGLE3_SHM}[n]
                                for n in names}
    config["baseline"] = names[0]
    config["aa_control"] = False  # one launch per configuration: these tests are about the host, not replication
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ, SPECSWEEP_LOCK_DIR=str(tmp_path / "locks"), SPECSWEEP_GUARD_INTERVAL_S="0.5")
    return work, env


def outcome(work: Path, name: str) -> dict:
    return json.loads((launch_path(work, name) / "outcome.json").read_text())


def assert_never_together(work: Path, names) -> list[str]:
    """The servers' lifetimes (start to teardown) do not overlap; returns the names in run order."""
    spans = sorted((outcome(work, n)["server_started_at"], outcome(work, n)["server_stopped_at"], n) for n in names)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        assert end <= start, f"{a} and {b} ran at once: {spans}"
    return [n for _, _, n in spans]


def test_two_invocations_with_disjoint_targets_never_run_two_servers(tmp_path):
    # The targets are the two server jobs' outcomes: a speculative configuration's
    # summary also needs the baseline's requests (output agreement), so its
    # summary and the baseline's would not be disjoint targets (Snakemake's own
    # directory lock would refuse the second invocation).
    work, env = workflow(tmp_path)
    targets = {n: str((launch_path(work, n) / "outcome.json").relative_to(work)) for n in ("nospec", "eagle3-shm")}
    procs = [subprocess.Popen(SNAKEMAKE + ["--cores", "1", target], cwd=work, env=env,  # noqa: S603
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for target in targets.values()]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    first, second = assert_never_together(work, ["nospec", "eagle3-shm"])
    for name in (first, second):
        assert outcome(work, name)["status"] == "ok", outcome(work, name)
        assert outcome(work, name)["host"]["others_seen"] == []
    waited = json.loads((launch_path(work, second) / "launch.json").read_text())["host_lock"]["waited_s"]
    print(f"{second} waited {waited:.1f} s for the host lock held by {first}'s job")
    assert waited > 1.0, "both invocations reached their server jobs together; the later one must have waited"
    log = launch_path(work, second) / "logs" / "benchmark_server.log"
    assert "waiting for the host" in log.read_text()


def test_resources_on_the_command_line_do_not_let_two_servers_run(tmp_path):
    """`--resources gpu=8` replaces the profile's block: Snakemake itself would run both jobs at once."""
    work, env = workflow(tmp_path)
    result = subprocess.run(SNAKEMAKE + ["all", "--cores", "2", "--resources", "gpu=8"], cwd=work, env=env,  # noqa: S603
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    order = assert_never_together(work, ["nospec", "eagle3-shm"])
    waited = json.loads((launch_path(work, order[1]) / "launch.json").read_text())["host_lock"]["waited_s"]
    print(f"{order[1]} waited {waited:.1f} s for the host lock")
    assert waited > 1.0, "both jobs were started together by Snakemake; the later one must have waited"


def _start(work: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(SNAKEMAKE + ["--cores", "1", *args], cwd=work, env=env, start_new_session=True,  # noqa: S603
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_measuring(work: Path, proc: subprocess.Popen, name: str) -> str:
    """The run id of ``name``'s server once it is measuring."""
    job_log = launch_path(work, name) / "logs" / "benchmark_server.log"
    deadline = time.monotonic() + 300
    while not (job_log.exists() and "[measured" in job_log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the server never started measuring"
        time.sleep(0.2)
    return json.loads((launch_path(work, name) / "launch.json").read_text())["run_id"]


def _left_running(run_id: str, lock_dir: Path) -> list:
    left = [o for o in guard.labelled_processes(None) if o["run_id"] == run_id]
    return left + (["host lock held"] if lock.is_held(lock_dir / "host.lock") else [])


def _assert_nothing_left(run_id: str, lock_dir: Path) -> float:
    t0 = time.monotonic()
    while _left_running(run_id, lock_dir):
        assert time.monotonic() - t0 < KILL_DEADLINE_S, f"left running: {_left_running(run_id, lock_dir)}"
        time.sleep(0.1)
    return time.monotonic() - t0


def test_kill_9_of_the_snakemake_group_leaves_nothing_running(tmp_path):
    work, env = workflow(tmp_path, names=("nospec",), num_prompts=400)
    proc = _start(work, env, "all")
    run_id = _wait_measuring(work, proc, "nospec")
    assert _left_running(run_id, tmp_path / "locks"), "the server runs before the kill"
    os.killpg(proc.pid, signal.SIGKILL)  # what `timeout -s KILL` or a cancelled CI job does
    proc.wait()
    took = _assert_nothing_left(run_id, tmp_path / "locks")
    print(f"nothing of run {run_id} left {took:.1f} s after kill -9 of the Snakemake group")


def test_kill_9_of_snakemake_alone_leaves_no_orphan_and_the_rerun_is_one_run(tmp_path):
    work, env = workflow(tmp_path, names=("nospec",), num_prompts=400)
    proc = _start(work, env, "all")
    run_id = _wait_measuring(work, proc, "nospec")
    os.kill(proc.pid, signal.SIGKILL)  # the shell and the job it runs survive this
    proc.wait()
    took = _assert_nothing_left(run_id, tmp_path / "locks")
    print(f"nothing of run {run_id} left {took:.1f} s after kill -9 of Snakemake alone")
    killed = outcome(work, "nospec")
    assert killed["run_id"] == run_id and killed["reason"] == "interrupted", killed
    assert killed["stage"] == "benchmark" and "(Snakemake) died" in killed["detail"], killed
    # Snakemake's own lock survives its kill -9 (it cannot tell a dead holder): --unlock, then a plain rerun.
    unlock = subprocess.run(SNAKEMAKE + ["--unlock"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert unlock.returncode == 0, unlock.stderr[-3000:]
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["defaults"]["workload"]["num_prompts"] = SMALL["num_prompts"]  # the rerun need not be long
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    rerun = subprocess.run(SNAKEMAKE + ["--cores", "1", "all"], cwd=work, env=dict(env), capture_output=True,
                           text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    [summary] = json.loads((work / "results" / "nospec" / "summary.json").read_text())["points"]
    assert summary["status"] == "ok" and summary["run_id"] not in (None, run_id)
    for name in ("launch.json", "server.log", "requests.jsonl", "outcome.json"):
        text = (launch_path(work, "nospec") / name).read_text()
        assert run_id not in text, f"{name} still holds the killed run's data"
        assert summary["run_id"] in text, name
