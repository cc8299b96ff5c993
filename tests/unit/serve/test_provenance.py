"""Provenance: effective environment of a process, hooks, versions, GPU state (no GPU needed)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsweep.engines.variants import packages as variant_packages
from specsweep.serve import provenance
from specsweep.testing.workflow import REPO

SOURCE = Path(provenance.__file__)


def test_stdlib_only_and_self_contained():
    """It is piped into `python -` in a container: only stdlib imports, no specsweep."""
    tree = ast.parse(SOURCE.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(sys.stdlib_module_names)


def test_env_of_another_process_is_read_from_proc():
    env = {"PATH": os.environ["PATH"], "NCCL_ALGO": "allreduce:tree", "SGLANG_SIMULATE_ACC_LEN": "2.0",
           "HF_TOKEN": "hf_not_a_real_token", "NCCL_IB_PASSWORD": "x", "UNRELATED": "1"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        # Until the child has exec'd, /proc/<pid>/environ is still the fork's copy of ours.
        deadline = time.monotonic() + 10
        while b"time.sleep" not in Path(f"/proc/{child.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out = provenance.collect(child.pid)
    finally:
        child.kill()
        child.wait()
    assert out["env_source"] == f"/proc/{child.pid}/environ"
    assert out["env"]["NCCL_ALGO"] == "allreduce:tree"
    assert out["env"]["SGLANG_SIMULATE_ACC_LEN"] == "2.0"
    assert "HF_TOKEN" not in out["env"] and "UNRELATED" not in out["env"]
    assert out["env"]["NCCL_IB_PASSWORD"] == "<redacted>"
    json.dumps(out)


def test_piped_into_python_stdin(tmp_path):
    """The way the orchestrator runs it inside a container: `python - --pid N --packages {...}` with the source
    on stdin; the packages are the backend variants' (their registry entries), besides the script's own."""
    packages = {k: list(v) for k, v in variant_packages().items()}
    proc = subprocess.run([sys.executable, "-", "--pid", str(os.getpid()), "--packages", json.dumps(packages)],
                          input=SOURCE.read_text(), capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          check=True)
    out = json.loads(proc.stdout)
    assert out["format_version"] == provenance.FORMAT_VERSION and out["pid"] == os.getpid()
    assert set(out["packages"]) == set(provenance.PACKAGES) | set(packages)
    assert set(out["packages"]) >= {"sglang", "torch", "flashinfer", "mscclpp", "deep_ep", "sglang-kernel", "nccl"}
    if out["gpus"] is None:
        assert out["gpus_reason"] and out["topology_reason"]


def test_customize_hooks_are_found_with_the_env_they_set(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        'import os\nos.environ["NCCL_PROTO"] = "LL128"\nos.environ.setdefault("NCCL_ALGO", "Tree")\n'
        'os.putenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")\n'
    )
    hooks = provenance.customize_hooks([str(tmp_path)])
    assert len(hooks) == 1
    assert hooks[0]["sets_env"] == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO", "NCCL_PROTO"]
    assert len(hooks[0]["sha256"]) == 64


def test_nccl_conf_files(tmp_path):
    (tmp_path / ".nccl.conf").write_text("NCCL_PROTO=LL128\n")
    conf = provenance.nccl_conf_files(str(tmp_path))
    assert conf[str(tmp_path / ".nccl.conf")] == "NCCL_PROTO=LL128\n"
    assert "/etc/nccl.conf" in conf


def test_gpu_busy_without_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert provenance.gpu_busy() == []
    assert provenance.gpus()["gpus"] is None
    assert "nvidia-smi not found" in provenance.gpus()["gpus_reason"]


def test_gpu_busy_parses_nvidia_smi(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU-1234, 4242, python3, 81234'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    busy = provenance.gpu_busy()
    assert busy == [{"gpu_uuid": "GPU-1234", "pid": 4242, "process_name": "python3", "used_memory": "81234"}]
    msg = provenance.busy_message(busy)
    assert "pid 4242" in msg and "does not kill" in msg
    assert provenance.busy_message([]) is None


@pytest.mark.parametrize("argv", [["--busy"], []])
def test_module_cli(argv):
    proc = subprocess.run([sys.executable, "-m", "specsweep.serve.provenance", *argv], capture_output=True, text=True,
                          timeout=120, check=True, cwd=REPO)
    json.loads(proc.stdout)


def test_workers_show_what_the_launcher_set_after_exec(tmp_path):
    """SGLang sets NCCL_* in os.environ after exec and starts its TP workers; only the workers show it."""
    launcher = (
        "import os, subprocess, sys, time\n"
        "os.environ['NCCL_CUMEM_ENABLE'] = '0'\n"
        "os.environ['CUDA_DEVICE_MAX_CONNECTIONS'] = '8'\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True,
                            env={"PATH": os.environ["PATH"], "NCCL_DEBUG": "INFO"})
    try:
        child = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while b"time.sleep" not in Path(f"/proc/{child}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out = provenance.collect(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert "NCCL_CUMEM_ENABLE" not in out["env"]  # the launcher's /proc environ: as exec'd
    assert [w["pid"] for w in out["workers"]] == [child]
    assert out["workers"][0]["env"]["NCCL_CUMEM_ENABLE"] == "0"
    assert out["worker_env_set_after_launch"] == {"CUDA_DEVICE_MAX_CONNECTIONS": ["8"], "NCCL_CUMEM_ENABLE": ["0"]}
