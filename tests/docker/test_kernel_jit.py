"""The stock SGLang image on the local base compiles and loads its JIT kernels with no GPU, into a mounted cache.

SGLang 0.5.23 and FlashInfer 0.7.2 compile kernels with nvcc the first time a server uses them
(containers/sglang/Dockerfile, stage ``jit``). Here, in the image that
config/kimi-k25-8gpu.yaml + config/kimi-k25-8gpu-local-base.yaml build as `sglang`, with
`--network none` and no GPU, containers/sglang/kernel_check.py compiles one kernel of each library
through the library's own JIT entry (SGLang's ``silu_and_mul`` module, FlashInfer's ``silu_and_mul``)
for sm_90 and sm_120, loads it and reads its cubins; the cache directory is the one a launch mounts
(serve.kernel_cache, from the image's label), so the builds must land on the host. A second run
finds them there. It fails when the image has no nvcc or when no cache is mounted.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specsweep.images import build, cli
from specsweep.plan.config import load_configs
from specsweep.serve import kernel_cache
from specsweep.testing.workflow import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECK = REPO / "containers/sglang/kernel_check.py"
KERNELS = "sglang:silu_and_mul,flashinfer:silu_and_mul"
ARCHS = ("90", "120")  # Hopper, and the matrix's RTX PRO 6000 Blackwell


@pytest.fixture(scope="module")
def stock(tmp_path_factory, base_image, sources_snapshot) -> dict:
    """The `sglang` image of the GPU matrix on the local base (found by its content tag when built)."""
    specs = load_configs([REPO / "config/kimi-k25-8gpu.yaml", REPO / "config/kimi-k25-8gpu-local-base.yaml"])
    spec = specs["images"]["sglang"]
    out = tmp_path_factory.mktemp("stock")
    log = out / "build.log"
    try:
        return build.build_image("sglang", spec, sources_snapshot, out / "manifest.json", log)
    except cli.DockerError as exc:
        pytest.fail(f"sglang (stock) did not build: {exc}\n{log.read_text()[-4000:] if log.exists() else ''}")


def kernel_check(image: str, *docker_args: str, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{CHECK}:/opt/kernel_check.py:ro", *docker_args,
            image, "python3", "/opt/kernel_check.py", "--archs", ",".join(ARCHS), "--kernels", KERNELS, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="module")
def cache(stock, tmp_path_factory) -> dict:
    """The kernel cache a launch of this image on an sm90 host would mount (serve.kernel_cache.prepare)."""
    record = kernel_cache.prepare(stock, tmp_path_factory.mktemp("kernels"), runtime="docker", plan_arch="sm90",
                                  detected_arch=None)
    assert record["mounted"] and not record["warm"], record
    return record


def test_the_image_names_its_toolchain_and_its_cache(stock):
    labels = cli.image_inspect(stock["image_id"])["Config"]["Labels"]
    assert labels[kernel_cache.KERNEL_CACHE_LABEL] == "/var/cache/specsweep-kernels"
    assert labels["io.specsweep.kernels.prebuilt"] == "none"
    got = subprocess.run(["docker", "run", "--rm", "--network", "none", stock["image_id"], "sh", "-c",
                          "cat /opt/cuda-toolchain/record.json; command -v nvcc; echo $CUDA_HOME"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert got.returncode == 0, got.stderr[-2000:]
    record_text, _, rest = got.stdout.rpartition("}\n")
    record = json.loads(record_text + "}")
    assert rest.split() == ["/opt/cuda-toolchain/cuda/bin/nvcc", "/opt/cuda-toolchain/cuda"]
    assert record["nvcc_version"] == "13.0.88"  # the wheels of the cuda-toolchain stage: no toolkit in this base
    assert record["toolkit_from"].startswith("wheels: nvidia-cuda-nvcc==13.0.88 ")
    assert {"sm_90", "sm_120"} <= set(record["gpu_code"])
    assert record["prebuilt"] == [] and record["packages"]["flashinfer-python"] == "0.7.2"
    assert record["jit"]["sglang"]["dir"] == "/var/cache/specsweep-kernels/sglang"


def test_compiles_and_loads_one_kernel_of_each_library_for_hopper_and_blackwell_into_the_mounted_cache(stock, cache):
    host = cache["host_dir"]
    got = kernel_check(stock["image_id"], "-v", cache["volume"], args=("--require-mount", cache["container_dir"]))
    assert got.returncode == 0, got.stdout[-4000:] + got.stderr[-4000:]
    report = json.loads(got.stdout)
    assert report["nvcc_version"].startswith("Build cuda_13.0"), report["nvcc_version"]
    done = {(r["library"], r["arch"]): r for r in report["results"]}
    assert set(done) == {(lib, a) for lib in ("sglang", "flashinfer") for a in ARCHS}, sorted(done)
    for (library, arch), r in done.items():
        assert r["ok"] and r["loaded"] and not r["cached"], r
        assert any(e.startswith(f"sm_{arch}") for e in r["elf"]), r
        assert r["library_path"].startswith(cache["container_dir"] + "/"), r  # in the mounted cache
    # the arch-specific and family targets SGLang and FlashInfer pick (sglang/kernels/jit/utils/arch.py:82-101,
    # flashinfer/compilation_context.py _normalize_cuda_arch): compute_90a, and compute_120f with nvcc >= 12.9,
    # whose cubin cuobjdump lists as sm_120; each in the directory a server on that GPU looks in
    for library in ("sglang", "flashinfer"):
        assert done[(library, "90")]["elf"] == ["sm_90a"] and done[(library, "120")]["elf"] == ["sm_120"]
    assert "/sglang/sm90a/" in done[("sglang", "90")]["library_path"]
    assert "/sglang/sm120f/" in done[("sglang", "120")]["library_path"]
    assert "/flashinfer/0.7.2/90a/cached_ops/" in done[("flashinfer", "90")]["library_path"]
    assert "/flashinfer/0.7.2/120f/cached_ops/" in done[("flashinfer", "120")]["library_path"]
    libraries = sorted(p.relative_to(host).parts[0] for p in Path(host).rglob("*.so"))
    assert libraries.count("sglang") == 2 and libraries.count("flashinfer") == 2, libraries
    # a later launch finds them: nothing compiled again
    again = kernel_check(stock["image_id"], "-v", cache["volume"])
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert all(r["cached"] for r in json.loads(again.stdout)["results"]), again.stdout[-4000:]
    after = kernel_cache.prepare(stock, Path(host).parents[1], runtime="docker",
                                 plan_arch="sm90", detected_arch=None)
    assert after["warm"] and after["files_before"] > 0


def test_refuses_to_run_without_a_mounted_cache_or_without_nvcc(stock, cache):
    unmounted = kernel_check(stock["image_id"], args=("--require-mount", cache["container_dir"]))
    assert unmounted.returncode == 2 and "is not a mount point" in unmounted.stderr, unmounted.stderr[-2000:]
    no_nvcc = kernel_check(stock["image_id"], "-e", "PATH=/opt/venv/bin:/usr/bin:/bin", "-v", cache["volume"])
    assert no_nvcc.returncode == 2 and "nvcc is not on PATH" in no_nvcc.stderr, no_nvcc.stderr[-2000:]
