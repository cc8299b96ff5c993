"""Compile, and load, SGLang's and FlashInfer's JIT kernels inside an SGLang image, with no GPU.

Each kernel goes through its library's own JIT entry, as the server reaches it on first use:
SGLang's ``load_jit`` (sglang/kernels/jit/utils/compile/loader.py) under
``override_jit_cuda_arch`` (sglang/kernels/jit/utils/arch.py:162-185, "to compile for an arch the
local GPU is not"); FlashInfer's ``JitSpec.build`` and ``load`` (flashinfer/jit/core.py) with
``FLASHINFER_CUDA_ARCH_LIST`` (flashinfer/compilation_context.py: CompilationContext.__init__). Each
architecture runs in a process of its own, as a server on that GPU would, so that each build lands
where such a server looks for it. Each built library is then read with
``cuobjdump --list-elf``: it must hold a cubin for every architecture asked for. With no driver
on the host, a library that links it loads against the toolchain's link stub (``driver_or_stub``). The caches are the
image's (``SGLANG_JIT_CACHE_DIR``, ``FLASHINFER_WORKSPACE_BASE``), so a mounted cache directory
receives the builds.

Usage (inside the image):
    python3 kernel_check.py --archs 90,120 [--kernels sglang:silu_and_mul,flashinfer:silu_and_mul]
                            [--require-mount /var/cache/specsweep-kernels]
Prints one JSON object (``results``: one entry per kernel and build); exits 1 when a kernel did not
compile, load, or lacks an architecture, 2 when nvcc or the required mount is missing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback


def _sglang_kernels() -> dict:
    """SGLang 0.5.23's kernels on the default path, each a function of no argument that builds and loads it."""
    import torch

    def silu_and_mul():  # layers/activation.py:92-99 -> kernels/ops/activation/activation.py activation_module
        from sglang.kernels.ops.activation.activation import activation_module
        return activation_module.__wrapped__(torch.bfloat16)

    def fused_add_rmsnorm():  # layers/layernorm.py:607-611 -> kernels/ops/layernorm/norm.py:78-87
        from sglang.kernels.ops.layernorm.norm import _jit_fused_add_rmsnorm_module
        return _jit_fused_add_rmsnorm_module.__wrapped__(torch.bfloat16, False)

    def custom_all_reduce_v2():  # CustomAllReduceV2's kernel: kernels/ops/communication/all_reduce.py:209-218
        from sglang.kernels.ops.communication.all_reduce import get_all_reduce_module
        return get_all_reduce_module.__wrapped__(torch.bfloat16, 8)

    return {"silu_and_mul": silu_and_mul, "fused_add_rmsnorm": fused_add_rmsnorm,
            "custom_all_reduce_v2": custom_all_reduce_v2}


def _flashinfer_specs() -> dict:
    """FlashInfer 0.7.2's JIT specs the configurations reach, each a function returning its JitSpec."""
    def silu_and_mul():
        from flashinfer.jit.activation import gen_act_and_mul_module
        return gen_act_and_mul_module("silu")

    def norm():
        from flashinfer.jit.norm import gen_norm_module
        return gen_norm_module()

    def pcie_ipc():  # SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: flashinfer/jit/comm.py:268-279
        from flashinfer.jit.comm import gen_pcie_ipc_comm_module
        return gen_pcie_ipc_comm_module()

    def trtllm_comm():  # the all-reduce + RMSNorm fusion: flashinfer/jit/comm.py:196-208
        from flashinfer.jit.comm import gen_trtllm_comm_module
        return gen_trtllm_comm_module()

    import torch

    bf16, i32 = torch.bfloat16, torch.int32

    def decode_hd128():  # paged decode attention, head_dim 128 (Llama 3.1 8B): flashinfer/jit/attention/modules.py:949
        from flashinfer.jit.attention.modules import gen_batch_decode_module
        return gen_batch_decode_module(bf16, bf16, bf16, i32, 128, 128, 0, False, False)

    def prefill_hd128():  # paged prefill attention, FA2 (every architecture): modules.py:1133
        from flashinfer.jit.attention.modules import gen_batch_prefill_module
        return gen_batch_prefill_module("fa2", bf16, bf16, bf16, i32, 128, 128, 0, False, False, False)

    def mla():  # MLA attention (Kimi-K2.5, DeepSeek-V3: kv_lora_rank 512, rope dim 64): modules.py:255
        from flashinfer.jit.attention.modules import gen_batch_mla_module
        return gen_batch_mla_module("fa2", bf16, bf16, bf16, i32, 512, 64, False)

    return {"silu_and_mul": silu_and_mul, "norm": norm, "pcie_ipc": pcie_ipc, "trtllm_comm": trtllm_comm,
            "decode_hd128": decode_hd128, "prefill_hd128": prefill_hd128, "mla": mla}


def elf_archs(library: pathlib.Path) -> list[str]:
    """The ``sm_*`` targets of the cubins in ``library`` (``cuobjdump --list-elf``)."""
    out = subprocess.run(["cuobjdump", "--list-elf", str(library)], capture_output=True, text=True, check=False)
    if out.returncode != 0 and "does not contain device code" not in out.stderr:
        raise RuntimeError(f"cuobjdump --list-elf {library}: {out.stderr.strip()[-500:]}")
    return sorted(set(re.findall(r"\.(sm_\d+[a-z]?)\.cubin", out.stdout)))


def _used_library(root: pathlib.Path, before: set[pathlib.Path]) -> tuple[pathlib.Path, bool]:
    """The library SGLang's ``load_jit`` just built or reused under ``root``, and whether it was there before.

    A build publishes a new leaf directory; a cache hit touches its leaf's mtime
    (sglang/kernels/jit/utils/compile/cache.py:400-409), so the newest leaf is the one just used.
    """
    libraries = list(root.rglob("*.so")) if root.is_dir() else []
    if not libraries:
        raise RuntimeError(f"no library under {root} after the build")
    new = [p for p in libraries if p not in before]
    if len(new) > 1:
        raise RuntimeError(f"expected at most one new library under {root}, found {[str(p) for p in new]}")
    if new:
        return new[0], False
    return max(libraries, key=lambda p: p.parent.stat().st_mtime_ns), True


def _wanted(arch: str, got: list[str]) -> bool:
    return any(re.fullmatch(rf"sm_{arch}[a-z]?", g) for g in got)


def _failed(entry: dict, t0: float, exc: BaseException) -> None:
    entry.update(ok=False, seconds=round(time.monotonic() - t0, 1),
                 error=f"{type(exc).__name__}: {exc}"[-3000:], traceback=traceback.format_exc()[-3000:])


def _say(entry: dict) -> None:
    print(json.dumps({k: entry.get(k) for k in ("library", "kernel", "arch", "seconds", "cached", "ok")}),
          file=sys.stderr, flush=True)


def run_sglang(names: list[str], arch: str) -> list[dict]:
    """SGLang's kernels for one architecture. One per process: SGLang fixes its cache's target directory
    on first use (cache.py:214-230 ``_target_tag`` is cached), as a server does on its one GPU."""
    from sglang.kernels.jit.utils import override_jit_cuda_arch

    kernels = _sglang_kernels()
    root = pathlib.Path(os.environ["SGLANG_JIT_CACHE_DIR"])
    results = []
    with override_jit_cuda_arch(int(arch[:-1]), int(arch[-1])):
        for name in names:
            entry = {"library": "sglang", "kernel": name, "arch": arch}
            before = set(root.rglob("*.so")) if root.is_dir() else set()
            t0 = time.monotonic()
            try:
                kernels[name]()
                entry["seconds"] = round(time.monotonic() - t0, 1)
                library, entry["cached"] = _used_library(root, before)
                entry["library_path"] = str(library)
                entry["loaded"] = True  # load_jit loads a build before it publishes it (loader.py:185-190)
                entry["elf"] = elf_archs(library)
                entry["ok"] = _wanted(arch, entry["elf"])
            except Exception as exc:  # noqa: BLE001 - every failure is this kernel's result
                _failed(entry, t0, exc)
            results.append(entry)
            _say(entry)
    return results


def run_flashinfer(names: list[str], arch: str) -> list[dict]:
    """FlashInfer's kernels for one architecture (``FLASHINFER_CUDA_ARCH_LIST``, set before its import):
    the cache directory a server on that GPU uses (flashinfer/jit/env.py:382-396)."""
    specs = _flashinfer_specs()
    results = []
    for name in names:
        entry = {"library": "flashinfer", "kernel": name, "arch": arch}
        t0 = time.monotonic()
        try:
            spec = specs[name]()
            library = pathlib.Path(spec.jit_library_path)
            entry["cached"] = library.exists()
            spec.build()
            entry["seconds"] = round(time.monotonic() - t0, 1)
            entry["library_path"] = str(library)
            spec.load()
            entry["loaded"] = True
            entry["elf"] = elf_archs(library)
            entry["ok"] = _wanted(arch, entry["elf"])
        except Exception as exc:  # noqa: BLE001 - every failure is this kernel's result
            _failed(entry, t0, exc)
        results.append(entry)
        _say(entry)
    return results


def driver_or_stub(scratch: pathlib.Path) -> tuple[dict[str, str], str]:
    """The environment that lets a kernel that links the driver load here, and what it loads against.

    A library linked with ``-lcuda`` (FlashInfer's PCIe IPC kernels, flashinfer/jit/comm.py:268-279)
    needs ``libcuda.so.1`` to load, which only a GPU host's container runtime mounts. Without one the
    child processes get the toolchain's driver link stub (SONAME ``libcuda.so.1``, every call
    failing) on their loader path, so that the load proves the rest of the library resolves. With
    a driver nothing changes: the stub would hide it.
    """
    try:
        ctypes.CDLL("libcuda.so.1")
        return {}, "libcuda.so.1 (a driver)"
    except OSError:
        pass
    stub = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64" / "stubs" / "libcuda.so"
    if not stub.exists():
        return {}, f"none (no driver, and no link stub at {stub})"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "libcuda.so.1").symlink_to(stub.resolve())
    path = ":".join(p for p in (str(scratch), os.environ.get("LD_LIBRARY_PATH", "")) if p)
    return {"LD_LIBRARY_PATH": path}, f"the link stub {stub.resolve()} (no driver here)"


def run_arch(wanted: dict[str, list[str]], arch: str, extra_env: dict[str, str]) -> list[dict]:
    """Every wanted kernel for one architecture, in a process of its own (this script again)."""
    env = dict(os.environ, FLASHINFER_CUDA_ARCH_LIST=f"{arch[:-1]}.{arch[-1]}", **extra_env)
    kernels = ",".join(f"{lib}:{name}" for lib in wanted for name in wanted[lib])
    proc = subprocess.run([sys.executable, __file__, "--one-arch", arch, "--kernels", kernels],
                          stdout=subprocess.PIPE, text=True, env=env, check=False)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return [{"library": lib, "kernel": name, "arch": arch, "ok": False,
                 "error": f"the process for {arch} exited {proc.returncode} without a report"}
                for lib in wanted for name in wanted[lib]]


DEFAULT_KERNELS = ("sglang:silu_and_mul,sglang:fused_add_rmsnorm,sglang:custom_all_reduce_v2,"
                   "flashinfer:silu_and_mul,flashinfer:norm,flashinfer:pcie_ipc,flashinfer:trtllm_comm,"
                   "flashinfer:decode_hd128,flashinfer:prefill_hd128,flashinfer:mla")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="90,120", help="compute capabilities, e.g. 90,120")
    parser.add_argument("--kernels", default=DEFAULT_KERNELS, help="library:kernel, comma-separated")
    parser.add_argument("--require-mount", default=None, help="fail unless this directory is a mount point")
    parser.add_argument("--one-arch", default=None, help=argparse.SUPPRESS)  # the per-architecture process
    args = parser.parse_args(argv)
    wanted: dict[str, list[str]] = {"sglang": [], "flashinfer": []}
    known = {"sglang": set(_sglang_kernels()), "flashinfer": set(_flashinfer_specs())}
    for item in (k.strip() for k in args.kernels.split(",") if k.strip()):
        library, _, name = item.partition(":")
        if name not in known.get(library, ()):
            print(f"kernel_check: --kernels {item!r}: known are "
                  + ", ".join(f"{lib}:{n}" for lib in sorted(known) for n in sorted(known[lib])), file=sys.stderr)
            return 2
        wanted[library].append(name)
    if args.one_arch:
        results = run_sglang(wanted["sglang"], args.one_arch) + run_flashinfer(wanted["flashinfer"], args.one_arch)
        json.dump(results, sys.stdout)
        return 0
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    bad = [a for a in archs if not re.fullmatch(r"\d{2,3}", a)]
    if bad or not archs:
        print(f"kernel_check: --archs {args.archs!r}: expected compute capabilities like 90,120", file=sys.stderr)
        return 2
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("kernel_check: nvcc is not on PATH (CUDA_HOME={})".format(os.environ.get("CUDA_HOME")), file=sys.stderr)
        return 2
    if args.require_mount and not os.path.ismount(args.require_mount):
        print(f"kernel_check: {args.require_mount} is not a mount point (no kernel cache mounted)", file=sys.stderr)
        return 2
    version_text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    version = version_text.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory() as scratch:
        extra_env, driver = driver_or_stub(pathlib.Path(scratch) / "driver")
        results = [entry for arch in archs for entry in run_arch(wanted, arch, extra_env)]
    report = {"nvcc": nvcc, "nvcc_version": version, "cuda_home": os.environ.get("CUDA_HOME"), "archs": archs,
              "loaded_against": driver,
              "cache": {"SGLANG_JIT_CACHE_DIR": os.environ.get("SGLANG_JIT_CACHE_DIR"),
                        "FLASHINFER_WORKSPACE_BASE": os.environ.get("FLASHINFER_WORKSPACE_BASE")},
              "results": results, "ok": bool(results) and all(r.get("ok") for r in results)}
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
