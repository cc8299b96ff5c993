"""Fixtures of the Docker tests. They FAIL, never skip, when the Docker engine
is unreachable: CI runs .ci/setup-docker.sh first, and a job that silently
skipped its Docker tests would pass while proving nothing."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from specsweep.images import cli
from specsweep.testing.proxy_ca import scan_images_for_proxy_ca
from specsweep.testing.workflow import REPO

BASE_IMAGE = "specsweep/debian:bookworm"
REGISTRY = "127.0.0.1:5000"


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The docker CLI, after checking that the engine answers."""
    if shutil.which("docker") is None:
        pytest.fail("docker CLI not found: run .ci/setup-docker.sh (as root) first")
    proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"Docker engine unreachable (docker info: {proc.stderr.strip()[-500:]}); run .ci/setup-docker.sh")
    return "docker"


@pytest.fixture(scope="session")
def base_image(docker_engine) -> str:
    if not cli.image_exists(BASE_IMAGE):
        pytest.fail(f"{BASE_IMAGE} is missing: run scripts/make_base_image.sh (or .ci/setup-docker.sh)")
    return BASE_IMAGE


def snapshot_sources(dest: Path) -> Path:
    """A frozen copy of what the reference image is built from, so that other
    edits to the working tree during the test do not change the content tag."""
    for rel in ("containers", "specsweep/__init__.py", "specsweep/refengine"):
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def sources_snapshot(tmp_path_factory) -> Path:
    return snapshot_sources(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="session")
def registry_url(docker_engine) -> str:
    """The local registry that .ci/setup-docker.sh starts."""
    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5) as resp:
            assert resp.status == 200
    except OSError as exc:
        pytest.fail(f"no registry on {REGISTRY} ({exc}); run .ci/setup-docker.sh")
    return REGISTRY


# --------------------------------------------------------------------------
# the proxy-CA scan (test_images.py, test_sglang_images.py)


@pytest.fixture(scope="session")
def proxy_ca_scan(docker_engine):
    """``specsweep.testing.proxy_ca.scan_images_for_proxy_ca``, after checking the engine answers."""
    return scan_images_for_proxy_ca
