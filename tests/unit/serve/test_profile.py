"""The profiling stages of the server job: files, argv, the micro-benchmark stage (its trace stage against a real
reference engine is in tests/e2e/test_profile_stage.py)."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
import time

import pytest

from specsweep.contracts.plan import Plan
from specsweep.engines.registry import get_engine
from specsweep.files import read_json
from specsweep.records import MixedRunsError, run_header, run_id_of_log
from specsweep.serve import lock
from specsweep.serve import profile as prof
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.launch import server_environment
from specsweep.testing.doubles import plan_dict
from specsweep.testing.refengine import PROFILE_SETTINGS as SETTINGS
from specsweep.testing.refengine import ref_plan
from specsweep.testing.workflow import REPO
from specsweep.workflow.jobs import one_run_id, profile_run_ids


def test_reset_writes_off_records_and_clears_old_traces(tmp_path):
    pj, bj = tmp_path / "profile.json", tmp_path / "allreduce_bench.json"
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "old-TP-0.trace.json.gz").write_bytes(b"stale")
    plan = ref_plan()
    plan.pop("profile")
    prof.reset(Plan.from_dict(plan), pj, bj)
    assert read_json(pj)["enabled"] is False and read_json(bj)["status"] == "off"
    assert not (tmp_path / "profile").exists()
    prof.reset(Plan.from_dict(ref_plan()), pj, bj)
    assert read_json(pj)["status"] == "not_run" and (tmp_path / "profile").is_dir()


def test_reset_and_finish_give_every_stage_file_this_runs_id(tmp_path):
    pj, bj = tmp_path / "profile.json", tmp_path / "allreduce_bench.json"
    prof.reset(Plan.from_dict(ref_plan()), pj, bj, "run-a")
    assert (read_json(pj)["run_id"], read_json(bj)["run_id"]) == ("run-a", "run-a")
    assert read_json(pj)["format_version"] == prof.FORMAT_VERSION == 2
    done = dict(read_json(pj), status="ok")
    pj.write_text(json.dumps(done))
    prof.finish(Plan.from_dict(ref_plan()), pj, bj, "run-a")
    assert read_json(pj) == done, "this run's own result is kept"
    prof.finish(Plan.from_dict(ref_plan()), pj, bj, "run-b")  # a job that never owned its files (host_busy)
    assert read_json(pj)["status"] == read_json(bj)["status"] == "not_run"
    assert read_json(pj)["run_id"] == read_json(bj)["run_id"] == "run-b"


def test_a_job_that_never_got_the_host_leaves_its_own_profile_files(tmp_path):
    """host_busy before the lock: profile.json and allreduce_bench.json exist (Snakemake's outputs) and are
    this run's, not the previous run's left in place."""
    out = tmp_path / "r"
    (out / "logs").mkdir(parents=True)
    names = ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl", "outcome.json")
    paths = JobPaths(*(out / n for n in names), profile=out / "profile.json",
                     allreduce_bench=out / "allreduce_bench.json")
    for path in (paths.profile, paths.allreduce_bench):
        path.write_text(json.dumps({"format_version": 2, "enabled": True, "run_id": "previous", "status": "ok"}))
    settings = lock.LockSettings(tmp_path / "locks", wait_s=0.5)
    held = lock.acquire(settings, {"config": "other"})
    try:
        outcome = run_config(ref_plan(), paths, None, io.StringIO(),
                             host=JobHost(lock=settings, workdir=tmp_path, guard_interval_s=0.3))
    finally:
        held.release()
    assert outcome["reason"] == "host_busy", outcome
    for path in (paths.profile, paths.allreduce_bench):
        assert (read_json(path)["run_id"], read_json(path)["status"]) == (outcome["run_id"], "not_run")


def test_profiling_files_join_the_one_run_check(tmp_path):
    pj = tmp_path / "profile.json"
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "requests.jsonl").write_text(json.dumps({"run_id": "a0a0a0a0a0a0"}) + "\n")
    header = run_header("a0a0a0a0a0a0", "p")
    ids = profile_run_ids({"run_id": "a0a0a0a0a0a0"}, {"run_id": "a0a0a0a0a0a0"}, pj)
    assert set(ids) == {"profile.json", "allreduce_bench.json", "profile/requests.jsonl"}
    assert run_id_of_log(header) == "a0a0a0a0a0a0"
    assert one_run_id({"run_id": "a0a0a0a0a0a0"}, {"run_id": "a0a0a0a0a0a0"}, header, [], [], ids) == "a0a0a0a0a0a0"
    stale = profile_run_ids({"run_id": "0b0b0b0b0b0b"}, {"run_id": "a0a0a0a0a0a0"}, pj)
    with pytest.raises(MixedRunsError, match=r"run 0b0b0b0b0b0b: profile.json"):
        one_run_id({"run_id": "a0a0a0a0a0a0"}, {"run_id": "a0a0a0a0a0a0"}, header, [], [], stale)


def _sglang(server_args: dict, env: dict | None = None) -> Plan:
    return Plan.from_dict(plan_dict(engine="sglang", server_args=server_args, env=env or {}))


def test_comm_profile_of_both_engines():
    ref = get_engine("reference").comm_profile(Plan.from_dict(ref_plan()))
    assert (ref["runner"], ref["backend"], ref["world_size"], ref["draft_tokens"], ref["dtype"], ref["timing"]) == \
        ("refengine", "shm", 2, 4, "float32", "in_forward")
    assert "skip" in get_engine("reference").comm_profile(Plan.from_dict(ref_plan(tp=1)))
    sg = get_engine("sglang").comm_profile(_sglang({"model-path": "/models/kimi-k2.5", "tp-size": 8,
                                                    "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3}))
    assert (sg["runner"], sg["backend"], sg["world_size"], sg["draft_tokens"], sg["dtype"], sg["timing"]) == \
        ("torch", "nccl", 8, 4, "config", "back_to_back")
    assert (sg["allreduces_per_layer"], sg["allreduces_outside_layers"]) == (2, 1)
    sg = get_engine("sglang").comm_profile(_sglang({"model-path": "/m", "tp-size": 8},
                                                   {"SGLANG_ENABLE_EMBED_REPLICATION": "1"}))
    assert sg["draft_tokens"] == 1 and sg["allreduces_outside_layers"] == 0
    deepep = get_engine("sglang").comm_profile(_sglang({"model-path": "/m", "tp-size": 8,
                                                        "moe-a2a-backend": "deepep"}))
    assert deepep["allreduces_per_layer"] is None


def test_bench_argv_local_and_docker():
    comm = get_engine("reference").comm_profile(Plan.from_dict(ref_plan()))
    args = prof.bench_script_args(comm, concurrency=2, iters=50)
    assert args == ["--runner", "refengine", "--backend", "shm", "--world-size", "2", "--device", "cpu",
                    "--timing", "in_forward", "--model-path", "specsweep/refengine/configs/tiny", "--dtype", "float32",
                    "--tokens", "8", "--iters", "50"]
    local = prof.bench_argv(Plan.from_dict(ref_plan()), args, None, None)
    assert local[:3] == [sys.executable, "-P", str(prof.BENCH_SCRIPT)] and local[3:] == args
    plan = ref_plan(runtime="docker", image="sglang", gpus=8, env={"NCCL_ALGO": "Ring"},
                    volumes=["/data/kimi:/models/kimi-k2.5:ro"])
    argv = prof.bench_argv(Plan.from_dict(plan), args, {"tag": "specsweep/sglang:abc"}, "specsweep-p-1234-bench")
    assert argv[:5] == ["docker", "run", "--rm", "--name", "specsweep-p-1234-bench"]
    assert "io.specsweep.config=p" in argv and argv[argv.index("NCCL_ALGO") - 1] == "-e"
    assert f"{prof.BENCH_SCRIPT.resolve()}:{prof.CONTAINER_BENCH_SCRIPT}:ro" in argv
    assert "/data/kimi:/models/kimi-k2.5:ro" in argv and "--gpus" in argv and "--ipc=host" in argv
    image = argv.index("specsweep/sglang:abc")
    assert argv[image + 1:] == ["python3", prof.CONTAINER_BENCH_SCRIPT, *args]


def test_micro_benchmark_stage_writes_its_result(tmp_path):
    plan = ref_plan()
    out = tmp_path / "allreduce_bench.json"
    env = server_environment(plan["env"], {**os.environ, "PYTHONPATH": str(REPO)})
    rec = prof.run_allreduce_bench(Plan.from_dict(plan), plan["profile"], out, None, env, io.StringIO())
    assert rec == read_json(out)
    assert rec["status"] == "ok", rec
    assert rec["result"]["sizes"][0]["bytes"] == 256 * 4 * 4 and rec["result"]["backend"] == "shm"
    assert rec["seconds"] > 0
    skipped = prof.run_allreduce_bench(Plan.from_dict(ref_plan(tp=1)), SETTINGS, out, None, dict(os.environ),
                                       io.StringIO())
    assert skipped["status"] == "skipped" and "tp-size 1" in skipped["reason"]


def test_wait_for_traces_waits_for_every_rank_and_a_whole_gzip(tmp_path):
    good = gzip.compress(b'{"traceEvents": []}')
    (tmp_path / "a-TP-0.trace.json.gz").write_bytes(good)
    (tmp_path / "a-TP-1.trace.json.gz").write_bytes(good[: len(good) // 2])  # still being written
    with pytest.raises(prof.ProfileError) as info:
        prof.wait_for_traces(tmp_path, 2, timeout_s=2.5, poll_s=0.2)
    assert info.value.reason == "traces_missing"
    (tmp_path / "a-TP-1.trace.json.gz").write_bytes(good)
    t0 = time.monotonic()
    files = prof.wait_for_traces(tmp_path, 2, timeout_s=10, poll_s=0.2)
    assert [f.name for f in files] == ["a-TP-0.trace.json.gz", "a-TP-1.trace.json.gz"]
    assert time.monotonic() - t0 >= prof.STABLE_S
