"""The toolchain that compiles MSCCL++ into the SGLang mscclpp image, on a
reduced input: the `cuda-toolchain-check` target of containers/sglang/Dockerfile
on the local base, with the architectures the local-base overlay gives
sglang-mscclpp. Its build takes nvcc, the CUDA headers and CCCL from the pinned
wheels (the local base has no /usr/local/cuda), makes the driver link stubs,
compiles containers/sglang/toolchain_check.cu for each architecture and links
it against the stubs, in the same stage the mscclpp target uses. The MSCCL++
compile itself is not here (its source cannot be fetched in CI, and it took
39 minutes on two shared cores): docs/measurements/2026-12-02-sglang-images/
records it.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from specsweep.images import build, cli
from specsweep.plan.config import load_configs
from specsweep.testing.workflow import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECK = REPO / "containers/sglang/check_device_code.sh"


def _mscclpp_build_args() -> dict[str, str]:
    specs = load_configs([REPO / "config/kimi-k25-8gpu.yaml", REPO / "config/kimi-k25-8gpu-local-base.yaml"])["images"]
    args = dict(specs["sglang-mscclpp"]["build_args"])
    args.pop("MSCCLPP_SOURCE")  # the check stage reads no MSCCL++ source
    return {k: str(v) for k, v in args.items()}


ARGS = _mscclpp_build_args()
ARCHS = ARGS["MSCCLPP_GPU_ARCHS"].split(";")
SPEC = {"dockerfile": "containers/sglang/Dockerfile", "target": "cuda-toolchain-check", "context": ".",
        "build_args": ARGS}


def run_in(image: str, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", image, *argv],
                          input=stdin, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def image(tmp_path_factory, base_image, sources_snapshot) -> str:
    out = tmp_path_factory.mktemp("toolchain")
    log = out / "build.log"
    try:
        manifest = build.build_image("cuda-toolchain-check", SPEC, sources_snapshot, out / "manifest.json", log)
    except cli.DockerError as exc:
        pytest.fail(f"cuda-toolchain-check did not build: {exc}\n{log.read_text()[-4000:] if log.exists() else ''}")
    return manifest["image_id"]


def test_the_overlay_asks_for_hopper_and_blackwell():
    assert {"90", "120"} <= set(ARCHS)


def test_wheel_nvcc_compiled_a_cubin_for_each_configured_architecture(image):
    env = ". /opt/cuda-toolchain/env; "
    got = run_in(image, "sh", "-c",
                 env + 'echo "$CUDA_TOOLKIT_FROM"; nvcc --version; cuobjdump --list-elf /tmp/toolchain_check')
    assert got.returncode == 0, got.stderr[-2000:]
    # the local base has no toolkit
    assert got.stdout.startswith("wheels: nvidia-cuda-nvcc==13.0.88 "), got.stdout[:300]
    assert "release 13.0, V13.0.88" in got.stdout
    cubins = re.findall(r"\.sm_(\d+[a-z]?)\.cubin", got.stdout)
    assert sorted(set(cubins)) == sorted(ARCHS), got.stdout
    # the stage's check (the one the mscclpp target runs on its libraries) refuses an architecture that is not there
    missing = run_in(image, "sh", "-c", env + "sh -s -- '90;100;120' /tmp/toolchain_check", stdin=CHECK.read_text())
    assert missing.returncode != 0
    assert "holds no sm_100 cubin" in missing.stderr


def test_linked_against_link_stubs_with_the_drivers_sonames(image):
    got = run_in(image, "sh", "-c",
                 "readelf -d /opt/cuda-toolchain/stubs/libcuda.so /opt/cuda-toolchain/stubs/libnvidia-ml.so"
                 " /tmp/toolchain_check | grep -E 'SONAME|NEEDED'; LD_LIBRARY_PATH=/tmp/so1 /tmp/toolchain_check;"
                 " /tmp/toolchain_check; echo rc=$?")
    assert got.returncode == 0, got.stderr[-2000:]
    out = got.stdout + got.stderr
    assert "Library soname: [libcuda.so.1]" in out and "Library soname: [libnvidia-ml.so.1]" in out
    assert "Shared library: [libcuda.so.1]" in out and "Shared library: [libnvidia-ml.so.1]" in out
    # through the stubs (the build's own check): every driver call answers 999
    assert re.search(r"^cuInit 999 nvmlInit 999 cudaMalloc \d+$", out, re.M), out
    # without them there is no driver in the image: the binary cannot start (a GPU host's runtime mounts it)
    assert "libcuda.so.1: cannot open shared object file" in out and "rc=127" in out, out
