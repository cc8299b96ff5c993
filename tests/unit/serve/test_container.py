"""specsweep.serve.container: golden docker run argv (no env values in it), leftover removal by label."""

from __future__ import annotations

from specsweep.contracts.plan import Plan
from specsweep.images import cli
from specsweep.serve import container, launch
from specsweep.testing.doubles import DockerRecorder, plan_dict


def _keys(**overrides) -> dict:
    plan = {
        "name": "eagle3-shm", "runtime": "docker",
        "argv": ["python3", "-m", "specsweep.refengine", "--tp-size", "2", "--host", "0.0.0.0", "--port", "30000"],
        "env": {"SGLANG_SIMULATE_ACC_LEN": "2.5", "OMP_NUM_THREADS": "1"},
        "gpus": 0,
    }
    plan.update(overrides)
    return plan


def _plan(**overrides) -> Plan:
    return Plan.from_dict(plan_dict(**_keys(**overrides)))


def test_run_argv_cpu_golden():
    argv = container.run_argv(_plan(), "specsweep/reference:0123456789ab", "127.0.0.1", 41234, 30000,
                              "specsweep-eagle3-shm")
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
    argv = container.run_argv(plan, "specsweep/sglang-mscclpp:abcdefabcdef", "127.0.0.1", 30001, 30000, "c1")
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


def test_run_argv_rdma_golden(tmp_path):
    """rdma: true: the host's verbs/RDMA-CM devices, IPC_LOCK and the host's network (RoCE GIDs belong to
    its interfaces); NVSHMEM's IBGDA transport (DeepEP low-latency) opens an HCA through them
    (NVSHMEM v3.4.5 src/host/transport/transport.cpp:282). No -p: the server binds the job's address."""
    plan = _plan(name="deepep", gpus=8, rdma=True, env={"NVSHMEM_DEBUG": "INFO"},
                 argv=["python3", "-m", "sglang.launch_server", "--tp-size", "8"])
    devices = ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"]
    argv = container.run_argv(plan, "specsweep/sglang-deepep:abcdefabcdef", "127.0.0.1", 30001, 30000, "c1",
                              rdma_device_paths=devices)
    assert argv == [
        "docker", "run", "--rm", "--name", "c1",
        "--label", "io.specsweep.config=deepep",
        "--label", "io.specsweep.project=specsweep",
        "--network", "host",
        "--init",
        "-e", "NVSHMEM_DEBUG",
        "--gpus", "8", "--ipc=host", "--shm-size", "16g",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "--device", "/dev/infiniband/rdma_cm",
        "--device", "/dev/infiniband/uverbs0",
        "--device", "/dev/infiniband/uverbs1",
        "--cap-add", "IPC_LOCK",
        "specsweep/sglang-deepep:abcdefabcdef",
        "python3", "-m", "sglang.launch_server", "--tp-size", "8",
    ]
    # rdma false or unknown: as before (a published port, no devices).
    for rdma in (False, None):
        argv = container.run_argv(plan.replace(rdma=rdma), "i", "127.0.0.1", 30001, 30000, "c1",
                                  rdma_device_paths=devices)
        assert "--network" not in argv and "--device" not in argv and "-p" in argv
    # What the host has: uverbs* and rdma_cm, nothing else of /dev/infiniband.
    for name in ("uverbs1", "uverbs0", "rdma_cm", "umad0", "issm0"):
        (tmp_path / name).write_text("")
    assert container.rdma_devices(tmp_path) == [str(tmp_path / n) for n in ("rdma_cm", "uverbs0", "uverbs1")]
    assert container.rdma_devices(tmp_path / "absent") == []


def test_rdma_server_binds_the_job_address_on_the_host_network():
    plan = _plan(name="deepep", gpus=8, rdma=True, runtime="docker", host="127.0.0.1",
                 argv=["python3", "-m", "sglang.launch_server", "--tp-size", "8"], engine="sglang")
    argv, _ = launch.build_launch(plan, 30123, {"tag": "img:1"})
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "30123"]
    assert "--network" in argv and "-p" not in argv


def test_run_argv_never_carries_env_values():
    plan = _plan(env={"HF_TOKEN": "hf_secret_value"})
    argv = container.run_argv(plan, "img:1", "127.0.0.1", 1, 2, "c")
    assert "hf_secret_value" not in " ".join(argv)
    assert ["-e", "HF_TOKEN"] == argv[argv.index("-e"):argv.index("-e") + 2]
    # The values travel through the docker client's environment (``-e KEY`` forwards them).
    env = launch.server_environment(plan.env, {"PATH": "/bin"})
    assert env["PATH"] == "/bin" and env["HF_TOKEN"] == "hf_secret_value"


def test_run_argv_defaults_to_loopback():
    argv = container.run_argv(_plan(), "img:1", "", 5, 6, "c")
    assert "127.0.0.1:5:6" in argv


def test_run_argv_labels_the_checkout_and_the_run(tmp_path):
    labels = container.run_labels("eagle3-shm", container.checkout_id(tmp_path), tmp_path, "0123456789ab")
    argv = container.run_argv(_plan(), "img:1", "127.0.0.1", 1, 2, "c", labels=labels)
    got = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert got == [
        "io.specsweep.config=eagle3-shm",
        "io.specsweep.project=specsweep",
        f"io.specsweep.checkout={container.checkout_id(tmp_path)}",
        "io.specsweep.run=0123456789ab",
        f"io.specsweep.workdir={tmp_path.resolve()}",
    ]


def test_checkout_id_differs_per_directory_and_not_per_spelling(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = container.checkout_id(tmp_path / "a"), container.checkout_id(tmp_path / "b")
    assert a != b and len(a) == 16
    assert container.checkout_id(tmp_path / "a" / ".." / "a") == a


def test_remove_leftovers_uses_config_and_checkout_labels(monkeypatch):
    """Another checkout's container of the same configuration name is not a leftover of this one."""
    rec = DockerRecorder()

    def fake(argv, **kw):
        rec(argv, **kw)
        import subprocess
        out = "specsweep-a\nspecsweep-b\n" if argv[1] == "ps" else ""
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    monkeypatch.setattr(cli.subprocess, "run", fake)
    assert container.remove_leftovers("nospec", "c0ffee") == ["specsweep-a", "specsweep-b"]
    assert rec.calls[0][0] == ["docker", "ps", "--all", "--format", "{{.Names}}",
                               "--filter", "label=io.specsweep.config=nospec",
                               "--filter", "label=io.specsweep.checkout=c0ffee"]
    assert [c[0] for c in rec.calls[1:] if c[0][1] == "rm"] == [
        ["docker", "rm", "-f", "specsweep-a"], ["docker", "rm", "-f", "specsweep-b"]]


def test_run_argv_mounts_volumes_with_absolute_host_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = _plan(volumes=["config/models:/specsweep-models:ro", "/data/w:/weights"])
    argv = container.run_argv(plan, "img:1", "127.0.0.1", 41234, 30000, "c")
    i = argv.index("-v")
    assert argv[i : i + 4] == ["-v", f"{tmp_path}/config/models:/specsweep-models:ro", "-v", "/data/w:/weights"]
    assert argv.index("img:1") > i
