"""The kernel names of the trace fixtures, found in the libraries the SGLang image really ships.

``tests/fixtures/traces/kernels/`` (``make_kernel_fixtures.py``) gives every
all-reduce implementation's communication kernels the names their sources give
them, and ``analysis.kernels.PATTERNS`` classifies traces by those names. Here
each fixture kernel's qualified name is looked up in the stock SGLang image of
config/kimi-k25-8gpu.yaml (built by the workflow's own ``build_image`` rule on
the local base, or found by its content tag), in the artifact the profiler
would take it from:

* compiled libraries (NCCL 2.30.7's ``libnccl.so.2``, torch 2.14.1's
  ``libtorch_cuda.so``, sgl-deep-ep 0.1.2.post1's ``deep_ep/_C*.so``,
  sglang-kernel 0.4.10's ``common_ops*.so``): the Itanium-mangled form of the
  name (``_Z<len><name>`` or ``N<len><part>...``) among the library's bytes;
* JIT-compiled kernels (FlashInfer 0.7.2's headers under
  ``flashinfer/data/include``, SGLang 0.5.23's own ``custom_all_reduce.cuh``):
  a ``__global__`` function of that name inside the nested namespaces.

MSCCL++ is not in any image CI builds (the ``mscclpp`` target compiles it from a
source CI cannot fetch; docs/measurements/2026-12-02-sglang-images/ has the
build), so its names are not checked here (tests/fixtures/traces/README.md says
where they were read).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specsweep.analysis.kernels import classify_kernel
from specsweep.images import tag
from specsweep.plan.config import load_configs
from specsweep.testing.workflow import REPO

sys.path.insert(0, str(REPO / "tests/fixtures/traces"))
import make_kernel_fixtures  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CONFIGS = ["config/kimi-k25-8gpu.yaml", "config/kimi-k25-8gpu-local-base.yaml"]

#: Implementation -> (kind, glob under site-packages) of the artifact that defines its kernels.
ARTIFACTS = {
    "nccl": ("symbol", "nvidia/nccl/lib/libnccl.so*"),
    "torch_symm_mem": ("symbol", "torch/lib/libtorch_cuda.so"),
    "deepep": ("symbol", "deep_ep/_C*.so"),
    "custom_allreduce:legacy": ("symbol", "sgl_kernel/*/common_ops*.so"),
    "custom_allreduce": ("header", "sglang/kernels/jit/csrc/distributed/custom_all_reduce.cuh"),
    "flashinfer_fusion": ("header", "flashinfer/data/include/flashinfer/comm/*.cuh"),
    "pcie_ipc_allreduce": ("header", "flashinfer/data/include/flashinfer/comm/pcie_ipc_*.cuh"),
}

# Runs inside the image (stdin): checks from argv[1] (JSON), answers JSON on stdout.
FINDER = r'''
import glob, json, os, re, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
out = []
for check in json.loads(sys.argv[1]):
    parts = check["name"].split("::")
    files = sorted(glob.glob(os.path.join(site, check["glob"])))
    found = []
    for path in files:
        data = open(path, "rb").read()
        if check["kind"] == "symbol":
            if parts[0] == "(anonymous namespace)":  # _ZN<..>_GLOBAL__N_<..><len><name>I...
                keys = ["_GLOBAL__N_".encode(), f"{len(parts[-1])}{parts[-1]}I".encode()]
            elif len(parts) == 1:
                keys = [f"_Z{len(parts[0])}{parts[0]}".encode()]
            else:
                keys = [("_ZN" + "".join(f"{len(p)}{p}" for p in parts)).encode()]
            if all(k in data for k in keys):
                found.append(path)
        else:
            text = data.decode("utf-8", "replace")
            spaces = all(re.search(r"\bnamespace\s+" + re.escape(p) + r"\s*\{", text) for p in parts[:-1])
            kernel = re.search(r"__global__[^;{}]*?\b" + re.escape(parts[-1]) + r"\s*\(", text)
            if spaces and kernel:
                found.append(path)
    out.append({**check, "files": len(files), "found": [os.path.relpath(p, site) for p in found]})
print(json.dumps(out))
'''


def qualified(kernel: str) -> str:
    """``void ns::name<T, 8>(args)`` -> ``ns::name`` (template arguments and parameters dropped)."""
    name = kernel.removeprefix("void ")
    cut = len(name)
    for i, ch in enumerate(name):
        if ch in "<(" and not name.startswith("(anonymous namespace)", i):
            cut = i
            break
    return name[:cut]


def fixture_kernels() -> list[tuple[str, str, str]]:
    """(fixture, implementation key of ARTIFACTS, kernel name) of every communication kernel in the fixtures."""
    out = []
    for fixture, spec in make_kernel_fixtures.FIXTURES.items():
        calls = [name for name, _us, cat in spec["call"] if cat == "kernel"]
        calls += [name for name, *_ in spec.get("moe") or []]
        for name in calls:
            got = classify_kernel(name)
            assert got is not None, f"{fixture}: {name} is no communication kernel by PATTERNS"
            key = f"{got.impl}:legacy" if fixture == "custom_allreduce_legacy" else got.impl
            out.append((fixture, key, name))
    return out


@pytest.fixture(scope="module")
def stock_image(tmp_path_factory, base_image) -> str:
    work = tmp_path_factory.mktemp("kernel-names")
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
            "--cores", "1", "results/images/sglang.json", "--configfile", *[str(REPO / c) for c in CONFIGS]]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=3600)  # noqa: S603
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    manifest = json.loads((work / "results/images/sglang.json").read_text())
    assert manifest["tag"] == tag.image_tag("sglang", load_configs([REPO / c for c in CONFIGS])["images"]["sglang"],
                                            REPO)
    return manifest["image_id"]


def test_every_fixture_kernel_is_defined_in_the_library_the_image_ships(stock_image):
    kernels = fixture_kernels()
    checks = []
    for fixture, key, name in kernels:
        if key == "mscclpp":
            continue
        kind, pattern = ARTIFACTS[key]
        checks.append({"fixture": fixture, "impl": key, "kernel": name, "name": qualified(name), "kind": kind,
                       "glob": pattern})
    assert {c["impl"] for c in checks} == set(ARTIFACTS)
    got = subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", stock_image, "python3", "-",
                          json.dumps(checks)], input=FINDER, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    results = json.loads(got.stdout)
    assert all(r["files"] > 0 for r in results), [r for r in results if not r["files"]]
    missing = [(r["fixture"], r["name"], r["glob"]) for r in results if not r["found"]]
    assert missing == [], missing


def test_the_lookup_can_fail(stock_image):
    """A name no library defines is not found (the check above is not vacuous)."""
    checks = [{"name": "flashinfer::comm::pcie_ipc::no_such_kernel", "kind": "header",
               "glob": ARTIFACTS["pcie_ipc_allreduce"][1]},
              {"name": "ncclDevKernel_AllReduce_Sum_bf17_RING_LL", "kind": "symbol", "glob": ARTIFACTS["nccl"][1]},
              {"name": "deep_ep::legacy::intranode::no_such_kernel", "kind": "symbol", "glob": ARTIFACTS["deepep"][1]}]
    got = subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", stock_image, "python3", "-",
                          json.dumps(checks)], input=FINDER, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    assert [r["found"] for r in json.loads(got.stdout)] == [[], [], []]


@pytest.mark.parametrize(("kernel", "expected"), [
    ("void sglang::all_reduce_1shot_push_kernel<__nv_bfloat16, 8u, true>(sglang::AllReducePushParams<8u>)",
     "sglang::all_reduce_1shot_push_kernel"),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel<c10::BFloat16, 16, 8, true, false>(c10::BFloat16**)",
     "(anonymous namespace)::two_shot_all_reduce_kernel"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
])
def test_qualified_name(kernel, expected):
    assert qualified(kernel) == expected


def test_fixture_kernels_cover_every_implementation():
    assert {key for _f, key, _n in fixture_kernels()} == {*ARTIFACTS, "mscclpp"}
