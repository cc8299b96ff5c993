"""Fixtures of the Docker tests (imported by name from each test module: a
conftest.py here would shadow tests/conftest.py, which other tests import as
`conftest`). They FAIL, never skip, when the Docker engine
is unreachable: CI runs .ci/setup-docker.sh first, and a job that silently
skipped its Docker tests would pass while proving nothing."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from specsweep import docker

REPO = Path(__file__).resolve().parents[2]
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
    if not docker.image_exists(BASE_IMAGE):
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
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5) as resp:
            assert resp.status == 200
    except OSError as exc:
        pytest.fail(f"no registry on {REGISTRY} ({exc}); run .ci/setup-docker.sh")
    return REGISTRY


# --------------------------------------------------------------------------
# the proxy-CA scan (test_images.py, test_sglang_images.py)

HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_CHUNK = 8 << 20


def _pem_blocks(text: str) -> set[str]:
    import re

    return set(re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text, re.S))


def proxy_cert_lines(base_image: str) -> list[bytes]:
    """Distinctive base64 lines of the certificates the build host trusts beyond
    the Debian bundle (its intercepting proxy's CA). Empty if there are none."""
    if not HOST_BUNDLE.is_file():
        return []
    image_bundle = subprocess.run(["docker", "run", "--rm", base_image, "cat", str(HOST_BUNDLE)],
                                  capture_output=True, text=True, check=True).stdout
    extra = _pem_blocks(HOST_BUNDLE.read_text()) - _pem_blocks(image_bundle)
    lines = []
    for block in extra:
        body = block.splitlines()[1:-1]
        lines.append(body[len(body) // 2].encode())  # a full 64-char line from the middle
    return lines


def _stream_has(fh, needles: list[bytes]) -> list[bytes]:
    """Needles found in a file object read in chunks (with an overlap, so a
    needle across a chunk boundary is found too)."""
    keep = max((len(n) for n in needles), default=1) - 1
    found: set[bytes] = set()
    tail = b""
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        window = tail + chunk
        found.update(n for n in needles if n in window)
        tail = window[-keep:] if keep else b""
    return sorted(found)


def scan_images_for_proxy_ca(tags: list[str], base_image: str) -> dict:
    """Scan every file of every layer of ``tags`` (one ``docker save``, so a
    layer shared by several images is read once, streamed: no temporary
    archive, no layer in memory), the image configs and manifests, and
    ``docker history``, for the proxy CA. Returns counts and hits."""
    import tarfile

    needles = proxy_cert_lines(base_image)
    hits: list[str] = []
    files = layers = 0
    nbytes = 0
    proc = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
            for member in outer:
                if not member.isfile():
                    continue
                fh = outer.extractfile(member)
                if member.name.endswith(".tar"):
                    layers += 1
                    with tarfile.open(fileobj=fh, mode="r|") as layer:
                        for inner in layer:
                            if not inner.isfile():
                                continue
                            files += 1
                            nbytes += inner.size
                            if inner.name.startswith("run/secrets"):
                                hits.append(f"{member.name}:{inner.name} (secret mount leaked)")
                            hits += [f"{member.name}:{inner.name}" for _ in _stream_has(layer.extractfile(inner), needles)]
                else:  # image config, manifest: history and labels
                    data = fh.read()
                    hits += [member.name for n in needles if n in data]
                    if b"BEGIN CERTIFICATE" in data:
                        hits.append(f"{member.name} (a PEM block in image metadata)")
    finally:
        proc.stdout.close()
        rc = proc.wait()
    assert rc == 0, f"docker save {' '.join(tags)} exited {rc}"
    for tag in tags:
        history = subprocess.run(["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", tag],
                                 capture_output=True, text=True, check=True).stdout
        if "BEGIN CERTIFICATE" in history or any(n.decode() in history for n in needles):
            hits.append(f"{tag}: docker history")
    return {"needles": len(needles), "layers": layers, "files": files, "bytes": nbytes, "hits": hits}
