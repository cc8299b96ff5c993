"""Verify-path profiling with the docker runtime: config/docker-cpu.yaml's eagle3-shm with profiling on.

The micro-benchmark runs in a container of the configuration's image (the
script mounted read-only, the run's labels on it, so the job's reaper would
remove it), the server writes its traces into the mounted
results/<config>/launch-<launch>/profile/ (handed back to this user), every profiling file
carries the job's run id, and no container outlives the job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specsweep.serve import container
from specsweep.serve.profile import CONTAINER_BENCH_SCRIPT, CONTAINER_PROFILE_DIR
from specsweep.testing.workflow import copy_workflow, launch_path

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DOCKER_CPU = ["config/docker-cpu.yaml"]

SMALL = {"num_prompts": 2, "input_len": 8, "output_len": 8, "repeats": 1,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 1}}


def shm_launch(work: Path) -> Path:
    """Launch 1 of the plan docker-cpu.yaml gives eagle3-shm."""
    return launch_path(work, "eagle3-shm", configfiles=DOCKER_CPU)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory, request) -> Path:
    request.getfixturevalue("base_image")
    work = copy_workflow(tmp_path_factory.mktemp("work"))
    path = work / "config/docker-cpu.yaml"
    config = yaml.safe_load(path.read_text())
    config["defaults"]["workload"].update(SMALL)
    config["burn_in"] = {"enabled": False}  # about profiling, not the host's warm-up
    config["configurations"]["eagle3-shm"]["profile"] = {"enabled": True, "requests": 1, "allreduce_iters": 50}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "2",
            "results/eagle3-shm/summary.json"]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=1800)  # noqa: S603
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return work


def test_micro_benchmark_ran_in_the_image(profiled):
    bench = json.loads((shm_launch(profiled) / "allreduce_bench.json").read_text())
    assert bench["status"] == "ok", bench
    manifest = json.loads((profiled / "results/images/reference.json").read_text())
    argv = bench["argv"]
    assert argv[:3] == ["docker", "run", "--rm"] and manifest["tag"] in argv
    assert argv[argv.index(manifest["tag"]) + 1:][:2] == ["python3", CONTAINER_BENCH_SCRIPT]
    outcome = json.loads((shm_launch(profiled) / "outcome.json").read_text())
    assert bench["run_id"] == outcome["run_id"]
    assert f"io.specsweep.run={outcome['run_id']}" in argv  # the reaper removes the run's containers
    size = bench["result"]["sizes"][0]
    assert (bench["result"]["runner"], bench["result"]["backend"], size["bytes"], size["correct"]) == \
        ("refengine", "shm", 256 * 4 * 4, True)
    # timed between the layers of the model, which the image's copy of the engine holds (containers/reference)
    assert size["timing"] == "in_forward" and size["calls_per_forward"] == 20 and size["back_to_back"]["median_us"] > 0


def test_traces_land_in_the_mounted_directory_and_are_analysed(profiled):
    prof = json.loads((shm_launch(profiled) / "profile.json").read_text())
    assert prof["status"] == "ok", prof
    assert prof["start_body"]["output_dir"] == CONTAINER_PROFILE_DIR
    traces = sorted((shm_launch(profiled) / "profile").glob("*-TP-*.trace.json.gz"))
    assert [p.name for p in traces] == sorted(prof["files"]) and len(traces) == 2
    assert all(p.stat().st_uid == os.getuid() for p in traces)  # handed back from the container's root
    s = json.loads((profiled / "results/eagle3-shm/summary.json").read_text())["points"][0]
    assert s["status"] == "ok" and s["metrics"]["trace_allreduce_per_verify"]["value"] == 20
    assert prof["run_id"] == s["run_id"]
    profiled_requests = [json.loads(line) for line in
                         (shm_launch(profiled) / "profile/requests.jsonl").read_text().splitlines()]
    assert profiled_requests and {r["run_id"] for r in profiled_requests} == {s["run_id"]}
    assert s["metrics"]["trace_allreduce_impl"]["value"] == "shm"
    assert container.containers_with_label("io.specsweep.config=eagle3-shm") == []
