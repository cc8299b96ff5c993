"""The reference engine's image for real: built, rebuilt as a no-op, free of
the proxy CA, pushed to the local registry, removed, pulled back and run."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request

import pytest

from specsweep.contracts.plan import Plan
from specsweep.images import build, cli, registry, tag
from specsweep.serve import container, launch
from specsweep.testing.doubles import plan_dict

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC = {
    "dockerfile": "containers/reference/Dockerfile",
    "target": "runtime",
    "context": ".",
    "build_args": {
        "BASE_IMAGE": "specsweep/debian:bookworm",
        "TORCH_VERSION": "2.13.0+cpu",
        "NUMPY_VERSION": "2.4.6",
        "AIOHTTP_VERSION": "3.14.5",
        "PROMETHEUS_CLIENT_VERSION": "0.26.0",
    },
    "build_contexts": {"wheels": "/opt/wheels"},
    "patches": [],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory, base_image, sources_snapshot):
    """First build (or reuse of an identical earlier one), then a no-op rebuild."""
    root = sources_snapshot
    out = tmp_path_factory.mktemp("results")
    manifest_path = out / "images" / "reference.json"
    t0 = time.monotonic()
    first = build.build_image("reference", SPEC, root, manifest_path, out / "build.log")
    first_s = time.monotonic() - t0
    mtime = manifest_path.stat().st_mtime_ns
    t0 = time.monotonic()
    second = build.build_image("reference", SPEC, root, manifest_path, out / "build.log")
    second_s = time.monotonic() - t0
    return {"root": root, "first": first, "second": second, "first_s": first_s, "second_s": second_s,
            "manifest_path": manifest_path, "mtime_before": mtime, "log": out / "build.log"}


def test_base_image_exists(base_image):
    info = cli.image_inspect(base_image)
    assert info["Os"] == "linux"


def test_reference_image_builds(built):
    m = built["first"]
    assert re.fullmatch(r"specsweep/reference:[0-9a-f]{12}", m["tag"])
    assert m["tag"] == tag.image_tag("reference", SPEC, built["root"])
    info = cli.image_inspect(m["tag"])
    assert info["Id"] == m["image_id"]
    labels = info["Config"]["Labels"]
    assert labels["io.specsweep.variant"] == "reference"
    assert labels["io.specsweep.torch.version"] == "2.13.0+cpu"
    assert labels["org.opencontainers.image.revision"]
    assert info["Size"] < 2_000_000_000, f"image is {info['Size'] / 1e9:.1f} GB: CUDA torch?"
    on_disk = json.loads(built["manifest_path"].read_text())
    assert on_disk["tag"] == m["tag"] and on_disk["image_id"] == m["image_id"]


def test_second_build_is_a_fast_noop(built):
    first, second = built["first"], built["second"]
    assert second["reused"] is True
    assert second["tag"] == first["tag"] and second["image_id"] == first["image_id"]
    assert built["second_s"] < 15, f"no-op rebuild took {built['second_s']:.1f} s"
    assert built["manifest_path"].stat().st_mtime_ns == built["mtime_before"], "unchanged manifest was rewritten"


def test_build_arg_change_gives_a_new_tag(built):
    changed = {**SPEC, "build_args": {**SPEC["build_args"], "NUMPY_VERSION": "2.4.5"}}
    assert tag.image_tag("reference", changed, built["root"]) != built["first"]["tag"]


def test_torch_in_image_is_cpu_build(built):
    out = subprocess.run(
        ["docker", "run", "--rm", built["first"]["tag"], "python3", "-c",
         "import torch, aiohttp, numpy, prometheus_client; print(torch.__version__, torch.version.cuda)"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout.split()
    assert out == ["2.13.0+cpu", "None"]


def test_proxy_ca_is_in_no_layer_of_the_final_image(built, base_image, proxy_ca_scan):
    scan = proxy_ca_scan([built["first"]["tag"]], base_image)
    assert scan["files"] > 1000
    assert not scan["hits"], f"proxy CA found in the published image: {scan['hits']}"


def test_push_remove_pull_and_run(built, unique, registry_url):
    manifest = built["first"]
    reg = {"url": registry_url, "namespace": f"specsweep-test-{unique}"}
    log = built["log"].with_name("push.log")
    pushed = registry.push_image(manifest, reg, log)
    ref = pushed["ref"]
    assert ref == f"{registry_url}/specsweep-test-{unique}/reference:{manifest['tag'].split(':')[1]}"
    assert pushed["repo_digest"] and pushed["repo_digest"].startswith(ref.rsplit(":", 1)[0] + "@sha256:")

    # Remove every local name of the image, so the pull really fetches it.
    subprocess.run(["docker", "rmi", ref, manifest["tag"]], check=True, capture_output=True)
    assert not cli.image_exists(manifest["image_id"])
    assert registry.pull_image(ref) == manifest["image_id"]
    subprocess.run(["docker", "tag", ref, manifest["tag"]], check=True)

    plan = Plan.from_dict(plan_dict(
        name=f"test-run-{unique}", runtime="docker",
        argv=["python3", "-m", "specsweep.refengine", "--model-path", "/app/specsweep/refengine/configs/tiny",
              "--tp-size", "1", "--device", "cpu", "--host", "0.0.0.0", "--port", "30000"],
        env={"OMP_NUM_THREADS": "1"}, gpus=0))
    port = _free_port()
    name = f"specsweep-test-{unique}"
    argv = container.run_argv(plan, ref, "127.0.0.1", port, 30000, name)
    proc = subprocess.Popen(argv, env=launch.server_environment(plan.env, dict(__import__("os").environ)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        status = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"container exited: {proc.stdout.read().decode()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
                    status = resp.status
                    break
            except OSError:
                time.sleep(1)
        assert status == 200
        assert name in container.containers_with_label(f"io.specsweep.config={plan.name}")
    finally:
        container.remove_container(name)
        proc.wait(timeout=60)
        subprocess.run(["docker", "rmi", ref], capture_output=True)
    assert container.containers_with_label(f"io.specsweep.config={plan.name}") == []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
