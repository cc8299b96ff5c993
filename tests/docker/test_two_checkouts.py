"""Two checkouts, one configuration name, one Docker engine: neither touches the other's container.

Checkout A has a live server container for configuration ``nospec-<id>`` (labelled as a server job
labels it). A run of the configuration of the same name in checkout B must not remove it as a
"leftover" (the bug: the config label alone matched, and A's run then failed with "Connection reset by
peer"), and must not measure beside it either: B waits until A's server is gone, then runs alone.
(The name carries a unique id so that other workflows sharing this Docker engine never meet it.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from specsweep.serve import container
from specsweep.testing.workflow import copy_workflow, launch_path

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SMALL = {"num_prompts": 2, "input_len": 8, "output_len": 8, "repeats": 2,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3}}


def _state(name: str) -> dict:
    out = subprocess.run(["docker", "inspect", "--format", "{{json .State}}", name], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def test_another_checkouts_container_of_the_same_name_is_left_alone(tmp_path, base_image, unique):
    checkout_a = tmp_path / "a"
    checkout_a.mkdir()
    config_name = f"nospec-{unique}"
    labels = container.run_labels(config_name, container.checkout_id(checkout_a), checkout_a, f"a{unique}")
    name_a = f"specsweep-{config_name}"
    argv = ["docker", "run", "-d", "--init", "--name", name_a, "--label", f"io.specsweep.config={config_name}",
            "--label", container.PROJECT_LABEL]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    subprocess.run([*argv, base_image, "sleep", "900"], check=True, capture_output=True)

    work = copy_workflow(tmp_path / "b")
    path = work / "config/docker-cpu.yaml"
    config = yaml.safe_load(path.read_text())
    config["defaults"]["workload"].update(SMALL)
    config["configurations"] = {config_name: config["configurations"]["nospec"]}
    config["baseline"] = config_name
    config["aa_control"] = False  # one launch: this test is about two checkouts, not replication
    config["burn_in"] = {"enabled": False}  # the wait it checks is launch-1's, not a burn-in unit's
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ, SPECSWEEP_LOCK_DIR=str(tmp_path / "locks"))
    run_b = subprocess.Popen([sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores",
                              "1", f"results/{config_name}/summary.json"], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    launch_dir = launch_path(work, config_name, configfiles=["config/docker-cpu.yaml"])
    job_log = launch_dir / "logs/benchmark_server.log"
    try:
        deadline = time.monotonic() + 1200  # an image build first, when the reference image is not there yet
        while not (job_log.exists() and "waiting: other specsweep servers" in job_log.read_text()):
            assert run_b.poll() is None, run_b.stdout.read()[-4000:]
            assert time.monotonic() < deadline, "checkout B never noticed checkout A's server"
            time.sleep(0.5)
        assert name_a in job_log.read_text()
        time.sleep(3)
        assert _state(name_a).get("Running") is True, "checkout B must not touch checkout A's container"
        # A's run ends: its server goes. Only now may B launch.
        subprocess.run(["docker", "rm", "-f", name_a], check=True, capture_output=True)
        out, _ = run_b.communicate(timeout=900)
        assert run_b.returncode == 0, out[-4000:]
    finally:
        subprocess.run(["docker", "rm", "-f", name_a], capture_output=True)
        if run_b.poll() is None:
            run_b.kill()
    launch = json.loads((launch_dir / "launch.json").read_text())
    assert launch["removed_leftover_containers"] == []
    [summary] = json.loads((work / "results" / config_name / "summary.json").read_text())["points"]
    assert summary["status"] == "ok", summary
    assert summary["host"]["others_seen"] == [], "B measured alone"
    assert "the host is free after" in job_log.read_text()
    assert container.containers_with_label(f"io.specsweep.checkout={container.checkout_id(work)}") == []
