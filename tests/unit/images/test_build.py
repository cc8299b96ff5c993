"""specsweep.images.build: golden build argv, staged contexts, manifests written only when their content changes."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from specsweep.images import build, tag
from specsweep.testing.doubles import mini_repo
from specsweep.workflow.jobs import build_image_job


def _manifest(**kw):
    m = {"format_version": 1, "name": "ref", "tag": "specsweep/ref:0123456789ab", "image_id": "sha256:1",
         "created": "2026-01-01T00:00:00Z", "build_seconds": 1.0, "reused": False, "builder": "docker build"}
    m.update(kw)
    return m


def test_build_argv_golden(tmp_path):
    argv = build.build_argv(
        ["docker", "build"], "specsweep/reference:0123456789ab", {"target": "runtime"},
        tmp_path / "Dockerfile", tmp_path / "ctx", tmp_path / "iid",
        {"TORCH_VERSION": "2.13.0+cpu", "BASE_IMAGE": "specsweep/debian:bookworm"},
        {"io.specsweep.image": "reference"}, {"proxy_ca": Path("/etc/ssl/certs/ca-certificates.crt")},
    )
    assert argv == [
        "docker", "build", "--progress=plain",
        "--file", str(tmp_path / "Dockerfile"),
        "--tag", "specsweep/reference:0123456789ab",
        "--iidfile", str(tmp_path / "iid"),
        "--target", "runtime",
        "--build-arg", "BASE_IMAGE=specsweep/debian:bookworm",
        "--build-arg", "TORCH_VERSION=2.13.0+cpu",
        "--label", "io.specsweep.image=reference",
        "--secret", "id=proxy_ca,src=/etc/ssl/certs/ca-certificates.crt",
        str(tmp_path / "ctx"),
    ]


def test_stage_context_holds_exactly_the_hashed_files(tmp_path):
    root, spec = mini_repo(tmp_path)
    record = tag.content_record("ref", spec, root)
    dest = tmp_path / "staged"
    dest.mkdir()
    dockerfile = build.stage_context(spec, root, record, dest)
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == sorted([".specsweep.Dockerfile", "pkg/mod.py", "_contexts/wheels/w-1.whl"])
    assert dockerfile.read_text() == (root / "Dockerfile").read_text()


def test_write_manifest_only_when_content_changes(tmp_path):
    path = tmp_path / "images" / "ref.json"
    assert build.write_manifest(_manifest(), path)
    os.utime(path, (1_000_000, 1_000_000))
    assert not build.write_manifest(_manifest(created="2027-01-01T00:00:00Z", build_seconds=0.1, reused=True), path)
    assert path.stat().st_mtime == 1_000_000
    assert build.write_manifest(_manifest(image_id="sha256:2"), path)
    assert json.loads(path.read_text())["image_id"] == "sha256:2"
    assert not list(path.parent.glob(".ref.json.*")), "no temporary file left behind"


def test_publish_with_state_restores_old_mtime(tmp_path):
    path = tmp_path / "ref.json"
    state = build.state_path_for(path)
    build._publish_with_state(_manifest(), path, state)
    os.utime(state, (2_000_000, 2_000_000))
    path.unlink()  # what Snakemake does before rerunning the job
    out = build._publish_with_state(_manifest(created="later", reused=True), path, state)
    assert path.stat().st_mtime == 2_000_000
    assert json.loads(path.read_text())["created"] == "2026-01-01T00:00:00Z"
    assert out["reused"] is True
    build._publish_with_state(_manifest(image_id="sha256:new"), path, state)
    assert path.stat().st_mtime != 2_000_000
    assert json.loads(state.read_text())["image_id"] == "sha256:new"


def test_a_docker_without_buildx_ends_the_build_job_in_one_line(tmp_path, monkeypatch):
    """A docker CLI of 23 or later without the buildx plugin (what `docker` says on such a host): the job says
    which image, what is missing and where its log is, in one line (a SystemExit: no traceback)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text('#!/bin/sh\ncase "$1" in\n  buildx) echo "docker: unknown command: docker buildx" >&2; exit 1;;\n'
                      '  version) echo 29.1.0;;\n  *) exit 1;;\nesac\n')
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    root, spec = mini_repo(tmp_path)
    log = tmp_path / "build.log"
    with pytest.raises(SystemExit) as info:
        build_image_job("cpu", json.dumps(spec), "unused", root, tmp_path / "m.json", log, io.StringIO())
    message = str(info.value.code)
    assert "\n" not in message and message.startswith("specsweep: build_image cpu: no BuildKit-capable docker CLI")
    assert "without buildx" in message and "docker-buildx-plugin" in message and f"(log {log})" in message
