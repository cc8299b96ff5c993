"""Proof that the build host's proxy CA is in no layer of an image (the Docker tests and records use it).

The CA reaches builds only as a BuildKit secret; this scans what an image
really holds: every file of every layer, the image config and manifest, and
``docker history``.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

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
                            hits += [f"{member.name}:{inner.name}"
                                     for _ in _stream_has(layer.extractfile(inner), needles)]
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
