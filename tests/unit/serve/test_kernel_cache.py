"""Kernel caches on the host (serve.kernel_cache): where they go, when one is warm, and the -v a launch adds."""

from __future__ import annotations

from pathlib import Path

from specsweep.contracts.plan import Plan
from specsweep.serve import kernel_cache
from specsweep.serve.jobspec import JobHost
from specsweep.serve.launch import build_launch
from specsweep.testing.doubles import plan_dict

MANIFEST = {"name": "sglang", "tag": "specsweep/sglang:2e7ff668e928", "image_id": "sha256:1",
            "labels": {kernel_cache.KERNEL_CACHE_LABEL: "/var/cache/specsweep-kernels"}}


def test_the_root_comes_from_the_job_environment_and_can_be_turned_off(tmp_path):
    assert kernel_cache.default_root({"SPECSWEEP_KERNEL_CACHE_DIR": str(tmp_path / "k")}) == tmp_path / "k"
    assert kernel_cache.default_root({"SPECSWEEP_KERNEL_CACHE_DIR": "off"}) is None
    assert kernel_cache.default_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "specsweep" / "kernels"
    assert kernel_cache.default_root({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "specsweep" / "kernels"
    host = JobHost.from_environ({"SPECSWEEP_KERNEL_CACHE_DIR": str(tmp_path)}, tmp_path)
    assert host.kernel_cache_root == tmp_path
    assert JobHost().kernel_cache_root is None  # a job made in code mounts nothing unless told


def test_keyed_by_image_tag_and_arch_cold_then_warm(tmp_path):
    first = kernel_cache.prepare(MANIFEST, tmp_path, runtime="docker", plan_arch="sm120", detected_arch="sm90")
    host_dir = tmp_path / "sglang-2e7ff668e928" / "sm90"
    assert first == {"mounted": True, "host_dir": str(host_dir), "container_dir": "/var/cache/specsweep-kernels",
                     "gpu_arch": "sm90", "gpu_arch_from": "nvidia-smi", "warm": False, "files_before": 0,
                     "bytes_before": 0, "volume": f"{host_dir}:/var/cache/specsweep-kernels:rw"}
    assert host_dir.is_dir()  # made before docker could make it as an empty root-owned directory
    (host_dir / "sglang" / "sm_90a").mkdir(parents=True)
    (host_dir / "sglang" / "sm_90a" / "activation.so").write_bytes(b"x" * 10)
    second = kernel_cache.prepare(MANIFEST, tmp_path, runtime="docker", plan_arch="sm120", detected_arch="sm90")
    assert (second["warm"], second["files_before"], second["bytes_before"]) == (True, 1, 10)
    # another arch, another image tag: other directories, cold
    other = kernel_cache.prepare(MANIFEST, tmp_path, runtime="docker", plan_arch="sm120", detected_arch=None)
    assert (other["host_dir"], other["gpu_arch_from"], other["warm"]) == \
        (str(tmp_path / "sglang-2e7ff668e928" / "sm120"), "plan gpu_arch", False)
    rebuilt = dict(MANIFEST, tag="specsweep/sglang:0123456789ab")
    unknown = kernel_cache.prepare(rebuilt, tmp_path, runtime="docker", plan_arch=None, detected_arch=None)
    assert unknown["host_dir"] == str(tmp_path / "sglang-0123456789ab" / "unknown-arch")


def test_nothing_is_mounted_without_a_label_a_container_or_a_root(tmp_path):
    unlabelled = dict(MANIFEST, labels={})
    for manifest, runtime, root, why in (
        (unlabelled, "docker", tmp_path, "has no io.specsweep.kernel-cache label"),
        (MANIFEST, "local", tmp_path, "runtime local"),
        (MANIFEST, "docker", None, "SPECSWEEP_KERNEL_CACHE_DIR=off"),
    ):
        record = kernel_cache.prepare(manifest, root, runtime=runtime, plan_arch="sm90", detected_arch=None)
        assert record["mounted"] is False and why in record["why"], record
        assert kernel_cache.volumes(record) == []
    assert list(tmp_path.iterdir()) == []


def test_the_launch_mounts_the_cache_read_write(tmp_path):
    record = kernel_cache.prepare(MANIFEST, tmp_path, runtime="docker", plan_arch="sm90", detected_arch=None)
    plan = Plan.from_dict(plan_dict(name="cfg", engine="sglang", runtime="docker", image="sglang",
                                    argv=["python3", "-m", "sglang.launch_server"], gpus=1,
                                    volumes=["/models:/models:ro"]))
    argv, _name = build_launch(plan, 30001, MANIFEST, extra_volumes=kernel_cache.volumes(record))
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert mounts == ["/models:/models:ro", f"{tmp_path}/sglang-2e7ff668e928/sm90:/var/cache/specsweep-kernels:rw"]
    assert argv.index(MANIFEST["tag"]) > argv.index("-v")  # docker options before the image


def test_survey_counts_files_not_directories(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_bytes(b"123")
    (tmp_path / "g").write_bytes(b"")
    assert kernel_cache.survey(tmp_path) == {"files": 2, "bytes": 3}
    assert kernel_cache.survey(Path(tmp_path / "missing")) == {"files": 0, "bytes": 0}


def test_the_job_phase_records_the_cache_and_logs_it(tmp_path):
    """phases.kernel_caches: the job's host root, the plan's arch when no GPU answers, launch.json's part."""
    import io

    from specsweep.serve import phases
    from specsweep.serve.jobspec import Job, JobPaths

    plan = Plan.from_dict(plan_dict(name="cfg", engine="sglang", runtime="docker", image="sglang", gpus=0,
                                    argv=["python3"], gpu_arch="sm120"))
    paths = JobPaths(*(tmp_path / n for n in ("launch.json", "server.log", "w.jsonl", "r.jsonl", "outcome.json")))
    log = io.StringIO()

    def job(root: Path | None, manifest: dict) -> Job:
        return Job(plan=plan, paths=paths, host=JobHost(workdir=tmp_path, kernel_cache_root=root), run_id="r",
                   launch_id="1", log=log, console=None, image_manifest=manifest, registry=None, identity={},
                   checkout="c", nccl_dir=tmp_path / "nccl")

    part = phases.kernel_caches(job(tmp_path / "k", MANIFEST))["kernel_cache"]
    assert part["host_dir"] == str(tmp_path / "k" / "sglang-2e7ff668e928" / "sm120") and part["warm"] is False
    assert f"kernel cache: {part['host_dir']} -> /var/cache/specsweep-kernels (cold: 0 files)" in log.getvalue()
    assert phases.kernel_caches(job(None, MANIFEST))["kernel_cache"]["mounted"] is False
