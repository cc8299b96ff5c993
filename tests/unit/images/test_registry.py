"""specsweep.images.registry: registry references, push with the password on stdin only."""

from __future__ import annotations

import json

import pytest

from specsweep.images import cli, registry


class _Recorder:
    """Stands in for subprocess.run and records argv and stdin."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, **kw):
        import subprocess

        self.calls.append((list(argv), kw.get("input")))
        out = ""
        if argv[1:3] == ["image", "inspect"]:
            out = json.dumps([{"Id": "sha256:1", "RepoDigests": [argv[3].rsplit(":", 1)[0] + "@sha256:d"]}])
        stdout = kw.get("stdout")
        if stdout is not None and hasattr(stdout, "write"):
            stdout.write("ok\n")
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")


def test_registry_ref():
    ref = registry.registry_ref({"name": "reference", "tag": "specsweep/reference:0123456789ab"},
                              {"url": "127.0.0.1:5000/", "namespace": "/team/"})
    assert ref == "127.0.0.1:5000/team/reference:0123456789ab"


def test_push_login_password_only_on_stdin(tmp_path, monkeypatch):
    rec = _Recorder()
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
    monkeypatch.setattr(cli.subprocess, "run", _Recorder())
    with pytest.raises(cli.DockerError, match="REG_PW"):
        registry.push_image({"name": "r", "tag": "specsweep/r:0", "image_id": "sha256:1"},
                          {"url": "h:1", "password_env": "REG_PW"}, tmp_path / "l", environ={})


