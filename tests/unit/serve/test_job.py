"""Pieces of the server job that need no engine: provenance read from the live process."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from specsweep.contracts.plan import Plan
from specsweep.serve.launch import collect_provenance, server_environment
from specsweep.serve.server import LaunchError, Server, free_port
from specsweep.testing.doubles import plan_dict


@pytest.fixture
def sleeper(tmp_path):
    env = {"NCCL_ALGO": "allreduce:tree", "NCCL_DEBUG": "INFO"}
    server = Server(argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                    env=server_environment(env, dict(os.environ)), host="127.0.0.1",
                    port=free_port("127.0.0.1"), ready_path="/ready", log_file=(tmp_path / "log").open("wb"))
    server.start()
    deadline = time.monotonic() + 10  # until exec, /proc/<pid>/environ is the fork's copy of ours
    while b"time.sleep" not in Path(f"/proc/{server.proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield server
    server.stop()


def test_provenance_is_read_from_the_server_process_not_the_config(sleeper):
    server = sleeper
    out = collect_provenance(server)
    assert out["env_source"] == f"/proc/{server.proc.pid}/environ"
    assert out["env"]["NCCL_ALGO"] == "allreduce:tree" and out["env"]["NCCL_DEBUG"] == "INFO"


def test_provenance_that_cannot_be_read_fails_the_configuration(sleeper):
    server = sleeper
    with pytest.raises(LaunchError) as info:
        collect_provenance(server, python="/bin/false")
    assert info.value.reason == "provenance_failed"


def test_nccl_debug_file_per_process_in_the_results_dir(tmp_path):
    """NCCL_DEBUG on: each server process logs to its own line-buffered NCCL_DEBUG_FILE (%h.%p) there."""
    from specsweep.serve.launch import NCCL_CONTAINER_DIR, nccl_logs, with_nccl_debug_file

    def plan(**keys):
        return Plan.from_dict(plan_dict(**keys))

    local = with_nccl_debug_file(plan(runtime="local", env={"NCCL_DEBUG": "INFO"}), tmp_path / "nccl")
    assert local.env["NCCL_DEBUG_FILE"] == f"{tmp_path}/nccl/nccl.%h.%p.log"
    docker = with_nccl_debug_file(plan(runtime="docker", env={"NCCL_DEBUG": "INFO"}, volumes=["a:/b:ro"]),
                                  tmp_path / "nccl")
    assert docker.env["NCCL_DEBUG_FILE"] == f"{NCCL_CONTAINER_DIR}/nccl.%h.%p.log"
    assert docker.volumes == ["a:/b:ro", f"{tmp_path}/nccl:{NCCL_CONTAINER_DIR}:rw"]
    assert docker.to_dict()["volumes"] == docker.volumes  # what the plan's container mounts
    # NCCL's log off, or a file chosen by the configuration: left alone.
    assert "NCCL_DEBUG_FILE" not in with_nccl_debug_file(plan(runtime="local", env={}), tmp_path).env
    mine = plan(runtime="local", env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/x/%p"})
    assert with_nccl_debug_file(mine, tmp_path) is mine
    (tmp_path / "nccl").mkdir()
    (tmp_path / "nccl" / "nccl.h.2.log").write_text("b\n")
    (tmp_path / "nccl" / "nccl.h.1.log").write_text("a\n")
    assert nccl_logs(tmp_path) == ["a\n", "b\n"]


def test_missing_volume_fails_the_launch_naming_the_key(tmp_path):
    """Checked before docker is asked for anything: no leftover scan, no container, a clear outcome."""
    import io

    from specsweep.files import read_json
    from specsweep.serve.job import JobPaths, run_config

    plan = plan_dict(name="cfg", engine="sglang", runtime="docker", image="sglang", argv=["python3"],
                     ready_timeout_s=1, volumes=[f"{tmp_path}/no-weights:/models:ro"])
    paths = JobPaths(*(tmp_path / n for n in ("launch.json", "server.log", "w.jsonl", "r.jsonl", "outcome.json")))
    outcome = run_config(plan, paths, {"tag": "x", "name": "sglang", "image_id": "sha256:x"}, io.StringIO())
    assert (outcome["status"], outcome["stage"], outcome["reason"]) == ("failed", "launch", "volume_missing")
    assert outcome["detail"].startswith(f"configurations.cfg.volumes[0]: host path {tmp_path}/no-weights")
    assert read_json(paths.outcome)["reason"] == "volume_missing"
    assert (tmp_path / "nccl").is_dir()  # the NCCL log directory is made fresh for every run
