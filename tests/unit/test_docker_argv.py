"""Pure functions of specsweep.docker: golden argv, content tags, manifests."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from specsweep import docker

REPO = Path(__file__).resolve().parents[2]


def _plan(**overrides):
    plan = {
        "name": "eagle3-shm",
        "argv": ["python3", "-m", "specsweep.refengine", "--tp-size", "2", "--host", "0.0.0.0", "--port", "30000"],
        "env": {"SGLANG_SIMULATE_ACC_LEN": "2.5", "OMP_NUM_THREADS": "1"},
        "gpus": 0,
    }
    plan.update(overrides)
    return plan


def test_run_argv_cpu_golden():
    argv = docker.run_argv(_plan(), "specsweep/reference:0123456789ab", "127.0.0.1", 41234, 30000, "specsweep-eagle3-shm")
    assert argv == [
        "docker", "run", "--rm",
        "--name", "specsweep-eagle3-shm",
        "--label", "io.specsweep.config=eagle3-shm",
        "--label", "io.specsweep.project=specsweep",
        "-p", "127.0.0.1:41234:30000",
        "--init",
        "-e", "OMP_NUM_THREADS",
        "-e", "SGLANG_SIMULATE_ACC_LEN",
        "specsweep/reference:0123456789ab",
        "python3", "-m", "specsweep.refengine", "--tp-size", "2", "--host", "0.0.0.0", "--port", "30000",
    ]


def test_run_argv_gpu_golden():
    plan = _plan(name="mscclpp-tp8", gpus=8, env={"NCCL_DEBUG": "INFO"},
                 argv=["python3", "-m", "sglang.launch_server", "--tp-size", "8"])
    argv = docker.run_argv(plan, "specsweep/sglang-mscclpp:abcdefabcdef", "127.0.0.1", 30001, 30000, "c1")
    assert argv == [
        "docker", "run", "--rm", "--name", "c1",
        "--label", "io.specsweep.config=mscclpp-tp8",
        "--label", "io.specsweep.project=specsweep",
        "-p", "127.0.0.1:30001:30000",
        "--init",
        "-e", "NCCL_DEBUG",
        "--gpus", "8", "--ipc=host", "--shm-size", "16g",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "specsweep/sglang-mscclpp:abcdefabcdef",
        "python3", "-m", "sglang.launch_server", "--tp-size", "8",
    ]


def test_run_argv_never_carries_env_values():
    plan = _plan(env={"HF_TOKEN": "hf_secret_value"})
    argv = docker.run_argv(plan, "img:1", "127.0.0.1", 1, 2, "c")
    assert "hf_secret_value" not in " ".join(argv)
    assert ["-e", "HF_TOKEN"] == argv[argv.index("-e"):argv.index("-e") + 2]
    assert docker.run_env(plan, {"PATH": "/bin"}) == {"PATH": "/bin", "HF_TOKEN": "hf_secret_value"}


def test_run_argv_defaults_to_loopback():
    argv = docker.run_argv(_plan(), "img:1", "", 5, 6, "c")
    assert "127.0.0.1:5:6" in argv


def test_build_argv_golden(tmp_path):
    argv = docker.build_argv(
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


def test_context_sources_parses_copy_add_and_bind_mounts():
    text = """
    FROM base AS b
    COPY --chown=1:1 a.txt dir/ /dst/
    COPY --from=b /opt/venv /opt/venv
    ADD ["sp ace.txt", "/x/"]
    RUN --mount=type=secret,id=proxy_ca,target=/s \\
        --mount=type=bind,source=containers/x.patch,target=/p \\
        --mount=type=bind,from=b,source=/wheels,target=/w \\
        --mount=type=bind,source=_contexts/wheels,target=/wheels \\
        echo hi
    # COPY commented.txt /nope
    """
    assert docker.context_sources(text) == ["a.txt", "dir/", "sp ace.txt", "containers/x.patch"]


def test_reference_dockerfile_sources():
    text = (REPO / "containers/reference/Dockerfile").read_text()
    assert docker.context_sources(text) == [
        "containers/reference/constraints.txt", "specsweep/__init__.py", "specsweep/refengine",
    ]


def _mini_repo(tmp_path: Path) -> tuple[Path, dict]:
    root = tmp_path / "repo"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"junk")
    (root / "other.py").write_text("unrelated\n")
    (root / "p.patch").write_text("--- a/x\n+++ b/x\n")
    (root / "Dockerfile").write_text("FROM base\nCOPY pkg /app/pkg\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "w-1.whl").write_bytes(b"wheel")
    spec = {"dockerfile": "Dockerfile", "target": "runtime", "context": ".", "description": "d",
            "build_args": {"A": "1", "REVISION": "abc"}, "patches": ["p.patch"],
            "build_contexts": {"wheels": str(wheels)}}
    return root, spec


def test_image_tag_format_and_stability(tmp_path):
    root, spec = _mini_repo(tmp_path)
    tag = docker.image_tag("ref", spec, root)
    assert tag.startswith("specsweep/ref:") and len(tag.split(":")[1]) == 12
    assert docker.image_tag("ref", dict(spec), root) == tag
    # Not content: description, label-only args, unrelated files, bytecode.
    assert docker.image_tag("ref", {**spec, "description": "other"}, root) == tag
    assert docker.image_tag("ref", {**spec, "build_args": {"A": "1", "REVISION": "def", "CREATED": "now"}}, root) == tag
    (root / "other.py").write_text("changed\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"other junk")
    assert docker.image_tag("ref", spec, root) == tag
    # Build-arg order does not matter (canonical JSON).
    assert docker.image_tag("ref", {**spec, "build_args": {"REVISION": "abc", "A": "1"}}, root) == tag


@pytest.mark.parametrize("change", ["build_arg", "target", "dockerfile", "patch", "source", "wheel", "new_source"])
def test_image_tag_changes_with_content(tmp_path, change):
    root, spec = _mini_repo(tmp_path)
    before = docker.image_tag("ref", spec, root)
    if change == "build_arg":
        spec = {**spec, "build_args": {"A": "2"}}
    elif change == "target":
        spec = {**spec, "target": "other"}
    elif change == "dockerfile":
        (root / "Dockerfile").write_text("FROM base\nCOPY pkg /app/pkg\nRUN true\n")
    elif change == "patch":
        (root / "p.patch").write_text("--- a/y\n+++ b/y\n")
    elif change == "source":
        (root / "pkg" / "mod.py").write_text("x = 2\n")
    elif change == "wheel":
        (tmp_path / "wheels" / "w-1.whl").write_bytes(b"wheel2")
    elif change == "new_source":
        (root / "pkg" / "new.py").write_text("")
    assert docker.image_tag("ref", spec, root) != before


def test_stage_context_holds_exactly_the_hashed_files(tmp_path):
    root, spec = _mini_repo(tmp_path)
    record = docker.content_record("ref", spec, root)
    dest = tmp_path / "staged"
    dest.mkdir()
    dockerfile = docker.stage_context(spec, root, record, dest)
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == sorted([".specsweep.Dockerfile", "pkg/mod.py", "_contexts/wheels/w-1.whl"])
    assert dockerfile.read_text() == (root / "Dockerfile").read_text()


def test_content_spec_json_drops_description():
    a = docker.content_spec_json({"dockerfile": "D", "description": "x", "build_args": {"B": 1, "A": 2}})
    b = docker.content_spec_json({"build_args": {"A": 2, "B": 1}, "dockerfile": "D"})
    assert a == b


def _manifest(**kw):
    m = {"format_version": 1, "name": "ref", "tag": "specsweep/ref:0123456789ab", "image_id": "sha256:1",
         "created": "2026-01-01T00:00:00Z", "build_seconds": 1.0, "reused": False, "builder": "docker build"}
    m.update(kw)
    return m


def test_write_manifest_only_when_content_changes(tmp_path):
    path = tmp_path / "images" / "ref.json"
    assert docker.write_manifest(_manifest(), path)
    os.utime(path, (1_000_000, 1_000_000))
    assert not docker.write_manifest(_manifest(created="2027-01-01T00:00:00Z", build_seconds=0.1, reused=True), path)
    assert path.stat().st_mtime == 1_000_000
    assert docker.write_manifest(_manifest(image_id="sha256:2"), path)
    assert json.loads(path.read_text())["image_id"] == "sha256:2"
    assert not list(path.parent.glob(".ref.json.*")), "no temporary file left behind"


def test_publish_with_state_restores_old_mtime(tmp_path):
    path = tmp_path / "ref.json"
    state = docker.state_path_for(path)
    docker._publish_with_state(_manifest(), path, state)
    os.utime(state, (2_000_000, 2_000_000))
    path.unlink()  # what Snakemake does before rerunning the job
    out = docker._publish_with_state(_manifest(created="later", reused=True), path, state)
    assert path.stat().st_mtime == 2_000_000
    assert json.loads(path.read_text())["created"] == "2026-01-01T00:00:00Z"
    assert out["reused"] is True
    docker._publish_with_state(_manifest(image_id="sha256:new"), path, state)
    assert path.stat().st_mtime != 2_000_000
    assert json.loads(state.read_text())["image_id"] == "sha256:new"


def test_registry_ref():
    ref = docker.registry_ref({"name": "reference", "tag": "specsweep/reference:0123456789ab"},
                              {"url": "127.0.0.1:5000/", "namespace": "/team/"})
    assert ref == "127.0.0.1:5000/team/reference:0123456789ab"


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


def test_push_login_password_only_on_stdin(tmp_path, monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(docker.subprocess, "run", rec)
    log = tmp_path / "push.log"
    result = docker.push_image(
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
    monkeypatch.setattr(docker.subprocess, "run", _Recorder())
    with pytest.raises(docker.DockerError, match="REG_PW"):
        docker.push_image({"name": "r", "tag": "specsweep/r:0", "image_id": "sha256:1"},
                          {"url": "h:1", "password_env": "REG_PW"}, tmp_path / "l", environ={})


def test_remove_leftovers_uses_config_label(monkeypatch):
    rec = _Recorder()

    def fake(argv, **kw):
        rec(argv, **kw)
        import subprocess
        out = "specsweep-a\nspecsweep-b\n" if argv[1] == "ps" else ""
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    monkeypatch.setattr(docker.subprocess, "run", fake)
    assert docker.remove_leftovers("nospec") == ["specsweep-a", "specsweep-b"]
    assert rec.calls[0][0] == ["docker", "ps", "--all", "--filter", "label=io.specsweep.config=nospec",
                               "--format", "{{.Names}}"]
    assert [c[0] for c in rec.calls[1:] if c[0][1] == "rm"] == [
        ["docker", "rm", "-f", "specsweep-a"], ["docker", "rm", "-f", "specsweep-b"]]


def test_make_base_image_script_is_strict():
    text = (REPO / "scripts/make_base_image.sh").read_text()
    assert "set -euo pipefail" in text and "docker import" in text.replace('"$DOCKER" import', "docker import")
    assert shutil.which("bash")


def test_run_argv_mounts_volumes_with_absolute_host_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = _plan(volumes=["config/models:/specsweep-models:ro", "/data/w:/weights"])
    argv = docker.run_argv(plan, "img:1", "127.0.0.1", 41234, 30000, "c")
    i = argv.index("-v")
    assert argv[i : i + 4] == ["-v", f"{tmp_path}/config/models:/specsweep-models:ro", "-v", "/data/w:/weights"]
    assert argv.index("img:1") > i
