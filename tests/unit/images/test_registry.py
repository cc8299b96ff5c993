"""specsweep.images.registry: registry references, push with the password on stdin only."""

from __future__ import annotations

import json

import pytest

from specsweep.images import cli, registry
from specsweep.testing.doubles import DockerRecorder


def test_registry_ref():
    ref = registry.registry_ref({"name": "reference", "tag": "specsweep/reference:0123456789ab"},
                              {"url": "127.0.0.1:5000/", "namespace": "/team/"})
    assert ref == "127.0.0.1:5000/team/reference:0123456789ab"


def test_push_login_password_only_on_stdin(tmp_path, monkeypatch):
    rec = DockerRecorder()
    monkeypatch.setattr(cli.subprocess, "run", rec)
    log = tmp_path / "push.log"
    result = registry.push_image(
        {"name": "reference", "tag": "specsweep/reference:0123456789ab", "image_id": "sha256:1"},
        {"url": "127.0.0.1:5000", "namespace": "specsweep", "username": "ci", "password_env": "REG_PW"},
        log, environ={"REG_PW": "s3cr3t-pw"},
    )
    login = [c for c in rec.calls if c[0][1] == "login"]
    assert login == [(["docker", "login", "--password-stdin", "--username", "ci", "127.0.0.1:5000"], "s3cr3t-pw")]
    for argv, _ in rec.calls:
        assert "s3cr3t-pw" not in " ".join(argv)
    assert "s3cr3t-pw" not in log.read_text()
    assert "s3cr3t-pw" not in json.dumps(result)
    assert result["ref"] == "127.0.0.1:5000/specsweep/reference:0123456789ab"
    assert result["repo_digest"] == "127.0.0.1:5000/specsweep/reference@sha256:d"


def test_push_missing_password_env_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.setattr(cli.subprocess, "run", DockerRecorder())
    with pytest.raises(cli.DockerError, match="REG_PW"):
        registry.push_image({"name": "r", "tag": "specsweep/r:0", "image_id": "sha256:1"},
                          {"url": "h:1", "password_env": "REG_PW"}, tmp_path / "l", environ={})
