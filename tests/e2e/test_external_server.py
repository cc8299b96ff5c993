"""runtime external: the workflow measures a reference engine that the test started itself, outside it.

Nothing is launched or torn down by the workflow: the server is still there
after `snakemake all`, and the report is a normal one that says what does not
apply (launch noise, the host lock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specsweep.serve import lock
from specsweep.serve.server import free_port, http_get
from specsweep.testing.workflow import REPO, copy_workflow, launch_path, only_point

pytestmark = pytest.mark.slow

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--cores", "1"]
SMALL_WORKLOAD = {"num_prompts": 4, "output_len": 16, "repeats": 3,
                  "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The reference engine, started by hand on 127.0.0.1 (an EAGLE-3 chain draft, as a user would).

    The test holds this host's lock for the server's life, as whoever starts a server on a shared host
    should: the workflow attaches without the lock, and other specsweep runs of this host (other
    tests, other checkouts) would otherwise launch beside it and make its results contaminated."""
    held = lock.acquire(lock.LockSettings.from_environ(os.environ),
                        {"config": "test_external_server", "pid": os.getpid()})
    port = free_port("127.0.0.1")
    log = (tmp_path_factory.mktemp("server") / "server.log").open("wb")
    argv = [sys.executable, "-m", "specsweep.refengine", "--model-path", "specsweep/refengine/configs/tiny",
            "--load-format", "dummy", "--device", "cpu", "--tp-size", "1", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
            "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while http_get(url + "/ready")[0] != 200:
        assert proc.poll() is None, f"the reference engine exited with {proc.returncode}"
        assert time.monotonic() < deadline, "the reference engine was not ready within 120 s"
        time.sleep(0.5)
    yield proc, url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
    held.release()


@pytest.fixture(scope="module")
def pipeline(server, tmp_path_factory) -> Path:
    _, url = server
    work = copy_workflow(tmp_path_factory.mktemp("external"))
    config = yaml.safe_load((REPO / "config" / "external.yaml").read_text())
    config["defaults"]["url"] = url
    config["defaults"]["workload"].update(SMALL_WORKLOAD)
    (work / "external.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = subprocess.run(SNAKEMAKE + ["all", "--configfile", "external.yaml"], cwd=work,  # noqa: S603
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return work


def test_the_report_is_a_normal_one_and_says_what_does_not_apply(pipeline, server):
    point = only_point(pipeline, "served")
    assert point["status"] == "ok", (point["status"], point["reason"], point["detail"])
    # The server's own word for what it runs: the plan has no server flags.
    assert point["plan"]["server_args"] == {} and point["plan"]["argv"] == []
    assert point["speculative_algorithm"] == "EAGLE3"
    assert point["server"]["url"] == server[1] and point["server"]["tp_size"] == 1
    assert 1.0 <= point["metrics"]["accept_length"]["value"] <= 4.0
    report = (pipeline / "results" / "report.md").read_text()
    assert "Launch noise and the host lock do not apply" in report
    assert "served measured again at a random place of round 1 against the same running server" in report
    assert (pipeline / "results" / "summary.csv").read_text().count("\nserved,") == 1


def test_nothing_was_launched_locked_or_torn_down(pipeline, server):
    proc, url = server
    for launch_id in ("1", "aa"):
        launch_dir = launch_path(pipeline, "served", launch_id, configfiles=["external.yaml"])
        launch = json.loads((launch_dir / "launch.json").read_text())
        assert launch["attached"] is True and launch["url"] == url
        assert launch["host_lock"] is None and launch["argv"] is None
        assert launch["provenance"]["source"] == "server_info"
        assert launch["provenance"]["server_versions"]["engine"] == "specsweep-refengine"
        assert launch["server_info"]["pid"] == proc.pid
        assert f"attached to {url}" in (launch_dir / "server.log").read_text()
        assert json.loads((launch_dir / "outcome.json").read_text())["status"] == "ok"
    # Still running and answering: the workflow's end is not the server's.
    assert proc.poll() is None
    assert http_get(url + "/ready")[0] == 200
