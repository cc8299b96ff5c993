"""JIT-compile SGLang's and FlashInfer's kernels on a GPU, run them, and compare them with torch.

Each kernel is built through its library's own JIT entry for the local GPU, as a server reaches
it on first use (SGLang 0.5.23: ``activation_module`` and ``_jit_fused_add_rmsnorm_module``,
which call ``load_jit``; FlashInfer 0.7.2: ``get_act_and_mul_module``, which calls
``JitSpec.build_and_load``), timed, then run on random bfloat16 inputs of the models' own shapes
(``config/models/*/config.json``) and compared with a float32 torch reference cast to bfloat16.

SGLang is imported without running ``sglang/__init__.py``, which imports the front end
(``sglang/__init__.py:21-52``: HF transformers patches, ``sglang.lang.api``); the kernel modules
import only ``sglang.kernels`` and part of ``sglang.srt`` (``utils``, ``environ``, ``platforms``).

Usage (GPU host):       python3 gpu_kernel_run.py --out result.json
Usage (no GPU, nvcc):   python3 gpu_kernel_run.py --compile-only --arch 90 --out result.json
Exit: 0 all kernels within tolerance, 1 a mismatch or a failed build, 2 no GPU or bad arguments.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
# Kimi-K2.5's language model (DeepSeek-V3 architecture) and Llama-3.1-8B, as the workflow serves them.
MODELS = ("kimi-k25-text", "llama31-8b-instruct")
TOKENS = (1, 7, 512)
# torch.testing.assert_close's defaults for bfloat16 (torch/testing/_comparison.py:85): rtol 1.6e-2
# is two bfloat16 ulps at the top of a binade (8 significand bits: one ulp is 2^-8 to 2^-7 of
# the value). Kernel and reference both compute in float32 and round to bfloat16 once, so a
# float32 difference in the order of operations (fast-math expf, another reduction order) moves
# a result by at most the one ulp its rounding flips.
RTOL, ATOL = 1.6e-2, 1e-5


def model_shapes(models=MODELS) -> list[dict]:
    """Each model's hidden, MLP intermediate and (MoE) expert intermediate sizes and RMSNorm eps."""
    shapes = []
    for name in models:
        path = REPO / "config" / "models" / name / "config.json"
        config = json.loads(path.read_text())
        config = config.get("text_config", config)
        sizes = ("intermediate_size", "moe_intermediate_size")
        try:
            shapes.append({"model": name, "hidden": int(config["hidden_size"]), "eps": float(config["rms_norm_eps"]),
                           "intermediate": sorted({int(config[k]) for k in sizes if config.get(k)})})
        except KeyError as exc:
            raise SystemExit(f"gpu_kernel_run: {path}: key {exc} missing "
                             "(needed: hidden_size, intermediate_size, rms_norm_eps)") from None
    return shapes


def silu_and_mul_ref(x):
    """``silu(x[..., :d]) * x[..., d:]`` in float32, cast to the input's dtype."""
    import torch

    d = x.shape[-1] // 2
    return (torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()).to(x.dtype)


def fused_add_rmsnorm_ref(x, residual, weight, eps: float):
    """(normed, new residual): ``r = x + residual``, ``r / sqrt(mean(r^2) + eps) * weight``, float32 then cast."""
    import torch

    r = x.float() + residual.float()
    normed = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return normed.to(x.dtype), r.to(x.dtype)


def compare(out, ref, rtol: float = RTOL, atol: float = ATOL) -> dict:
    """Max absolute and relative error of ``out`` against ``ref`` and how many exceed ``atol + rtol * |ref|``."""
    import torch

    if out.shape != ref.shape or out.dtype != ref.dtype:
        return {"ok": False, "error": f"shape/dtype {tuple(out.shape)}/{out.dtype} != {tuple(ref.shape)}/{ref.dtype}"}
    o, r = out.float(), ref.float()
    err = (o - r).abs()
    finite = bool(torch.isfinite(o).all())
    bad = int((err > atol + rtol * r.abs()).sum()) if finite else out.numel()
    rel = err / r.abs().clamp_min(atol)
    return {"ok": finite and bad == 0, "max_abs": float(err.max()), "max_rel": float(rel.max()),
            "exact": float((err == 0).float().mean()), "n_bad": bad, "numel": out.numel()}


def bare_sglang() -> None:
    """Register the ``sglang`` package without running its ``__init__`` (the front end's imports)."""
    if "sglang" in sys.modules:
        return
    spec = importlib.util.find_spec("sglang")
    if spec is None:
        raise ModuleNotFoundError("sglang is not importable (install the wheels or set PYTHONPATH)")
    sys.modules["sglang"] = importlib.util.module_from_spec(spec)


def _run(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
        return (out.stdout or out.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"


def _release(text: str) -> str:
    """nvcc --version's "Cuda compilation tools, release 13.0, V13.0.88" line."""
    return next((line for line in text.splitlines() if "release" in line), text.splitlines()[-1] if text else "")


def versions() -> dict:
    import torch

    def dist(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    nvcc = shutil.which("nvcc", path=str(pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin")) \
        or shutil.which("nvcc")
    info = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "nvcc_path": nvcc, "nvcc": _release(_run([nvcc, "--version"])) if nvcc else None,
            "cuda_home": os.environ.get("CUDA_HOME"),
            "sglang": dist("sglang"), "flashinfer": dist("flashinfer-python"), "tvm_ffi": dist("apache-tvm-ffi"),
            "triton": dist("triton"), "ninja": dist("ninja"),
            "ninja_on_path": shutil.which("ninja"),  # both libraries run `ninja` from PATH
            "host_compiler": _run(["c++", "--version"]).splitlines()[0] if shutil.which("c++") else None,
            # torch's own DLPack C exchange API; without it tvm-ffi builds an addon on import
            # (tvm_ffi/_optional_torch_c_dlpack.py:92-180)
            "torch_dlpack_c_exchange_api": hasattr(torch.Tensor, "__dlpack_c_exchange_api__")}
    if shutil.which("nvidia-smi"):
        info["nvidia_smi"] = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                   "--format=csv,noheader"])
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
        info["cuda_driver"] = getattr(torch._C, "_cuda_getDriverVersion", lambda: None)()
    return info


def libcuda_for_link(scratch: pathlib.Path) -> str:
    """Make ``-lcuda`` resolvable: FlashInfer links every module with it (flashinfer/jit/cpp_ext.py:276-278,
    ``-L$cuda_home/lib64/stubs``). A toolkit without ``lib64/stubs`` and a driver without the unversioned
    ``libcuda.so`` leave the link failing; then a ``libcuda.so`` naming the loaded driver's file goes on
    ``LIBRARY_PATH``. Returns what the link uses."""
    stub = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64" / "stubs" / "libcuda.so"
    dirs = [str(stub.parent), *os.environ.get("LIBRARY_PATH", "").split(":"), "/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
    link = next((pathlib.Path(d) / "libcuda.so" for d in dirs if d and (pathlib.Path(d) / "libcuda.so").exists()), None)
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:  # no driver (--compile-only): a module linked with the stub then loads against it
        if link is None:
            return "none (no libcuda.so to link, no driver)"
        ctypes.CDLL(str(link), mode=ctypes.RTLD_GLOBAL)
        return f"{link} (no driver: preloaded as libcuda.so.1)"
    if link is not None:
        return str(link)
    driver = next((line.split()[-1] for line in pathlib.Path("/proc/self/maps").read_text().splitlines()
                   if re.search(r"/libcuda\.so(\.[\d.]+)?$", line)), None)
    if driver is None:
        return "none (libcuda.so.1 loaded but not found in /proc/self/maps)"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "libcuda.so").symlink_to(driver)
    os.environ["LIBRARY_PATH"] = ":".join(p for p in (str(scratch), os.environ.get("LIBRARY_PATH", "")) if p)
    return f"{scratch / 'libcuda.so'} -> {driver}"


def build(arch: str | None) -> tuple[list[dict], dict]:
    """Build (or load) the three modules through the libraries' JIT entries. Returns entries and callables."""
    import contextlib

    import torch

    bare_sglang()
    import flashinfer.activation
    from sglang.kernels.jit.utils import override_jit_cuda_arch
    from sglang.kernels.ops.activation.activation import activation_module
    from sglang.kernels.ops.layernorm.norm import _jit_fused_add_rmsnorm_module

    override = override_jit_cuda_arch(int(arch[:-1]), int(arch[-1])) if arch else contextlib.nullcontext()
    entries, modules = [], {}
    steps = (  # layers/activation.py:92-99 and layers/layernorm.py:607-611 reach these on a server
        ("sglang", "silu_and_mul", lambda: activation_module(torch.bfloat16)),
        ("sglang", "fused_add_rmsnorm", lambda: _jit_fused_add_rmsnorm_module(torch.bfloat16, False)),
        ("flashinfer", "silu_and_mul", lambda: flashinfer.activation.get_act_and_mul_module("silu")),
    )
    with override:
        for library, kernel, make in steps:
            entry = {"library": library, "kernel": kernel}
            t0 = time.monotonic()
            try:
                modules[(library, kernel)] = make()
                entry.update(ok=True, compile_s=round(time.monotonic() - t0, 1))
            except Exception as exc:  # noqa: BLE001 - a failed build is this kernel's result
                entry.update(ok=False, compile_s=round(time.monotonic() - t0, 1),
                             error=f"{type(exc).__name__}: {exc}"[-3000:], traceback=traceback.format_exc()[-3000:])
            entries.append(entry)
            print(json.dumps({k: entry.get(k) for k in ("library", "kernel", "compile_s", "ok")}), file=sys.stderr,
                  flush=True)
    return entries, modules


def libraries_built(cache: pathlib.Path) -> list[dict]:
    """Every ``.so`` under the JIT caches with its cubin targets (``kernel_check.elf_archs``, cuobjdump)."""
    spec = importlib.util.spec_from_file_location("kernel_check", pathlib.Path(__file__).with_name("kernel_check.py"))
    kernel_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernel_check)
    found = []
    for so in sorted(cache.rglob("*.so")):
        item = {"path": str(so.relative_to(cache)), "bytes": so.stat().st_size}
        try:
            item["elf"] = kernel_check.elf_archs(so) if shutil.which("cuobjdump") else None
        except RuntimeError as exc:
            item["elf_error"] = str(exc)
        found.append(item)
    return found


def run_checks(modules: dict, shapes: list[dict], seed: int) -> list[dict]:
    """Each built kernel on each model shape and token count, against its torch reference."""
    import flashinfer.activation
    import torch
    from sglang.kernels.ops.layernorm.norm import fused_add_rmsnorm

    gen = torch.Generator(device="cuda").manual_seed(seed)
    checks = []

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)

    def sglang_silu(x, ref):  # kernels/ops/activation/activation.py:63-67
        out = torch.empty_like(ref)
        modules[("sglang", "silu_and_mul")].run_activation(x, out, "silu")
        return compare(out, ref)

    def flashinfer_silu(x, ref):  # flashinfer/activation.py:91-130 (its public entry)
        return compare(flashinfer.activation.silu_and_mul(x), ref)

    def sglang_add_rmsnorm(hidden, n, eps):  # kernels/ops/layernorm/norm.py:138-148: in place
        x, res, w = randn(n, hidden), randn(n, hidden), randn(hidden)
        ref_out, ref_res = fused_add_rmsnorm_ref(x, res, w, eps)
        fused_add_rmsnorm(x, res, w, eps)
        out_cmp, res_cmp = compare(x, ref_out), compare(res, ref_res)
        return {**out_cmp, "residual": res_cmp, "ok": out_cmp["ok"] and res_cmp["ok"]}

    def check(library, kernel, model, shape, fn, *args):
        if (library, kernel) not in modules:
            return
        entry = {"library": library, "kernel": kernel, "model": model, "shape": shape}
        try:
            entry.update(fn(*args))
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a failed run is this check's result
            entry.update(ok=False, error=f"{type(exc).__name__}: {exc}"[-2000:],
                         traceback=traceback.format_exc()[-3000:])
        checks.append(entry)

    for s in shapes:
        for n in TOKENS:
            for inter in s["intermediate"]:
                x = randn(n, 2 * inter)
                ref = silu_and_mul_ref(x)
                check("sglang", "silu_and_mul", s["model"], [n, 2 * inter], sglang_silu, x, ref)
                check("flashinfer", "silu_and_mul", s["model"], [n, 2 * inter], flashinfer_silu, x, ref)
            check("sglang", "fused_add_rmsnorm", s["model"], [n, s["hidden"]], sglang_add_rmsnorm,
                  s["hidden"], n, s["eps"])
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON result is written here")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: build for --arch and list the cubins, run nothing")
    parser.add_argument("--arch", default=None, help="with --compile-only: compute capability, e.g. 90")
    parser.add_argument("--cache-dir", default=None,
                        help="JIT caches (SGLANG_JIT_CACHE_DIR, FLASHINFER_WORKSPACE_BASE); default: a new "
                             "temporary directory, so every kernel compiles")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.compile_only != bool(args.arch) or (args.arch and not re.fullmatch(r"\d{2,3}", args.arch)):
        print("gpu_kernel_run: --compile-only and --arch go together; --arch is a compute capability "
              "such as 90", file=sys.stderr)
        return 2
    import torch

    if not args.compile_only and not torch.cuda.is_available():
        print(f"gpu_kernel_run: no CUDA device (torch {torch.__version__}, CUDA {torch.version.cuda}: "
              "torch.cuda.is_available() is False); without a GPU use --compile-only --arch 90", file=sys.stderr)
        return 2
    shapes = model_shapes()
    cache = pathlib.Path(args.cache_dir or tempfile.mkdtemp(prefix="gpu-kernel-jit-")).resolve()
    os.environ["SGLANG_JIT_CACHE_DIR"] = str(cache / "sglang")
    os.environ["FLASHINFER_WORKSPACE_BASE"] = str(cache / "flashinfer")
    if args.arch:  # read when flashinfer is imported (flashinfer/compilation_context.py:114-115)
        os.environ["FLASHINFER_CUDA_ARCH_LIST"] = f"{args.arch[:-1]}.{args.arch[-1]}"
    result = {"versions": versions(), "shapes": shapes, "tokens": list(TOKENS),
              "tolerance": {"rtol": RTOL, "atol": ATOL, "dtype": "bfloat16"},
              "cache_dir": str(cache), "compile_only": args.compile_only, "arch": args.arch}
    result["libcuda_link"] = libcuda_for_link(cache / "link")
    result["builds"], result["checks"] = [], []
    t0 = time.monotonic()
    try:
        result["builds"], modules = build(args.arch)
        result["build_total_s"] = round(time.monotonic() - t0, 1)
        result["libraries"] = libraries_built(cache)
        if not args.compile_only:
            result["checks"] = run_checks(modules, shapes, args.seed)
    except Exception as exc:  # noqa: BLE001 - an import or setup failure still leaves its JSON
        result["error"] = f"{type(exc).__name__}: {exc}"[-2000:]
        result["traceback"] = traceback.format_exc()[-4000:]
        print(result["traceback"], file=sys.stderr)
    result["ok"] = ("error" not in result and bool(result["builds"]) and all(b["ok"] for b in result["builds"])
                    and all(c["ok"] for c in result["checks"]))
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for c in result["checks"]:
        print(f"{c['library']:10} {c['kernel']:18} {c['model']:20} {str(c['shape']):14} "
              f"max_abs {c.get('max_abs', float('nan')):.3g} max_rel {c.get('max_rel', float('nan')):.3g} "
              f"bad {c.get('n_bad')} {'ok' if c['ok'] else 'MISMATCH'}")
    print(f"gpu_kernel_run: {'ok' if result['ok'] else 'FAILED'}: {len(result['builds'])} builds, "
          f"{len(result['checks'])} checks (rtol {RTOL}, atol {ATOL}); {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
