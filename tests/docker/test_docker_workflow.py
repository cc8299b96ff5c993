"""The DAG with the docker runtime: config/docker-cpu.yaml (two configurations
of the reference engine in its image) run by Snakemake in a copy of the
repository. Checks results, that no container outlives the run or an
interrupted benchmark, and what a build-arg change reruns."""

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

from specsweep.serve import container
from specsweep.testing.workflow import copy_workflow, job_counts, launch_path

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DOCKER_CPU = ["config/docker-cpu.yaml"]

SMALL = {"num_prompts": 2, "input_len": 8, "output_len": 8, "repeats": 2,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3}}


def snakemake(work: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "2", *args]
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=timeout)  # noqa: S603


def _ours(work: Path, config: str) -> list[str]:
    """This checkout's containers of ``config`` (other checkouts on the same engine may run theirs)."""
    return container.containers_with_labels([f"io.specsweep.config={config}",
                                             f"io.specsweep.checkout={container.checkout_id(work)}"])


def _edit_config(work: Path, mutate) -> None:
    path = work / "config/docker-cpu.yaml"
    config = yaml.safe_load(path.read_text())
    mutate(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory, request):
    request.getfixturevalue("base_image")
    work = copy_workflow(tmp_path_factory.mktemp("work"))
    # No burn-in: its launches would remove the leftover container before launch-1 (and cost minutes).
    _edit_config(work, lambda c: (c["defaults"]["workload"].update(SMALL), c.update(burn_in={"enabled": False})))
    result = snakemake(work, "all")
    return work, result


def test_both_configurations_run_in_containers(workflow_run):
    work, result = workflow_run
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    manifest = json.loads((work / "results/images/reference.json").read_text())
    assert manifest["tag"].startswith("specsweep/reference:")
    for name in ("nospec", "eagle3-shm"):
        summary = json.loads((work / f"results/{name}/summary.json").read_text())
        assert summary["status"] == "ok", summary
        launch = json.loads((launch_path(work, name, configfiles=DOCKER_CPU) / "launch.json").read_text())
        assert launch["argv"][:3] == ["docker", "run", "--rm"]
        assert launch["image"]["tag"] == manifest["tag"]
        # Provenance is read from the server inside the container (the child of docker's init), not from config.
        provenance = launch["provenance"]
        assert provenance["env_source"] != "/proc/1/environ"
        assert provenance["env"]["OMP_NUM_THREADS"] == "1"
        assert _ours(work, name) == [], "no container of this checkout outlives the run"


def test_nothing_to_do_after_a_complete_run(workflow_run):
    work, _ = workflow_run
    result = snakemake(work, "-n", "all")
    assert result.returncode == 0, result.stderr
    assert job_counts(result.stdout) == {}, result.stdout


def test_image_description_edit_reruns_nothing(workflow_run):
    work, _ = workflow_run
    path = work / "config/docker-cpu.yaml"
    original = path.read_text()
    try:
        _edit_config(work, lambda c: c["images"]["reference"].update(description="edited"))
        result = snakemake(work, "-n", "all")
        assert job_counts(result.stdout) == {}, result.stdout
    finally:
        path.write_text(original)


def test_build_arg_change_rebuilds_the_image_and_reruns_its_users(workflow_run):
    work, _ = workflow_run
    path = work / "config/docker-cpu.yaml"
    original = path.read_text()
    try:
        _edit_config(work, lambda c: c["images"]["reference"]["build_args"].update(UNUSED_TEST_ARG="1"))
        counts = job_counts(snakemake(work, "-n", "all").stdout)
        assert counts.get("build_image") == 1
        assert counts.get("benchmark_server") == 3  # both configurations and the baseline's A/A control
        assert "resolve_plan" not in counts  # the plan does not depend on how the image is built
    finally:
        path.write_text(original)


def _outcome_of(work: Path, name: str) -> str:
    """Launch 1's outcome.json of the plan docker-cpu.yaml gives ``name``, relative to ``work`` (a target)."""
    return str((launch_path(work, name, configfiles=DOCKER_CPU) / "outcome.json").relative_to(work))


def test_interrupted_benchmark_leaves_no_container(workflow_run):
    work, _ = workflow_run
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "2",
            "--forcerun", "benchmark_server", _outcome_of(work, "nospec")]
    proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,  # noqa: S603
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _ours(work, "nospec"):
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            time.sleep(0.5)
        assert _ours(work, "nospec"), "the benchmark container never started"
        time.sleep(5)  # mid-benchmark: readiness wait or requests in flight
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _ours(work, "nospec"):
        time.sleep(1)
    assert _ours(work, "nospec") == []
    outcome = json.loads((launch_path(work, "nospec", configfiles=DOCKER_CPU) / "outcome.json").read_text()) \
        if (launch_path(work, "nospec", configfiles=DOCKER_CPU) / "outcome.json").exists() else None
    if outcome is not None:
        assert outcome["status"] in ("failed", "ok")


def test_leftover_container_is_removed_before_the_next_launch(workflow_run, base_image, unique):
    work, _ = workflow_run
    name = f"specsweep-nospec-leftover-{unique}"
    subprocess.run(["docker", "run", "-d", "--name", name, "--label", "io.specsweep.config=nospec",
                    "--label", container.PROJECT_LABEL,
                    "--label", f"io.specsweep.checkout={container.checkout_id(work)}",
                    base_image, "sleep", "600"], check=True, capture_output=True)
    try:
        result = snakemake(work, "--forcerun", "benchmark_server", _outcome_of(work, "nospec"))
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        launch = json.loads((launch_path(work, "nospec", configfiles=DOCKER_CPU) / "launch.json").read_text())
        assert name in launch.get("removed_leftover_containers", [])
        assert _ours(work, "nospec") == []
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
