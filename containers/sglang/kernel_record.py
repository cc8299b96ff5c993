"""Print what an SGLang image carries for its kernels, as JSON (the image's /opt/cuda-toolchain/record.json).

Run at build time, inside the image (``jit`` stage of containers/sglang/Dockerfile), with nvcc on PATH:
the compiler's release and the GPU code it can emit are read from nvcc itself, the package versions
from the installed distributions (no import of torch: no GPU is needed).

Format history:
  1  format_version, cuda_home (as set and resolved), toolkit_from (the cuda-toolchain stage's
     CUDA_TOOLKIT_FROM: "base" or the wheels), nvcc_release, nvcc_version, gpu_code (nvcc
     --list-gpu-code), packages (sglang, flashinfer-python, flashinfer-cubin, flashinfer-jit-cache,
     apache-tvm-ffi, nvidia-cuda-nvcc: version or null), prebuilt (kernels compiled ahead of time:
     none), jit (which libraries compile on first use, and where their cache goes), cache_dir,
     include_links (the toolkit include directory's entries linked in from elsewhere: the venv's
     CUDA library headers, with the directory they come from).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys

FORMAT_VERSION = 1
PACKAGES = ("sglang", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "apache-tvm-ffi",
            "nvidia-cuda-nvcc")


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def nvcc(*args: str) -> str:
    return subprocess.run(["nvcc", *args], capture_output=True, text=True, check=True).stdout


def record(toolkit_from: str, cache_dir: str) -> dict:
    version_text = nvcc("--version")
    release = re.search(r"release (\d+\.\d+)", version_text)
    build = re.search(r"\bV(\d+\.\d+\.\d+)", version_text)
    if release is None or build is None:
        raise SystemExit(f"kernel_record: cannot read nvcc's release from: {version_text!r}")
    cuda_home = os.environ.get("CUDA_HOME")
    return {
        "format_version": FORMAT_VERSION,
        "cuda_home": cuda_home,
        "cuda_home_resolved": os.path.realpath(cuda_home) if cuda_home else None,
        "toolkit_from": toolkit_from,
        "nvcc_release": release.group(1),
        "nvcc_version": build.group(1),
        "gpu_code": nvcc("--list-gpu-code").split(),
        "packages": {dist: version_of(dist) for dist in PACKAGES},
        # Nothing is compiled ahead of time: FlashInfer 0.7.2 has no kernel package on PyPI
        # (flashinfer-cubin's newest is 0.6.13; flashinfer-jit-cache is not there), and both
        # libraries compile for the GPU they find at run time.
        "prebuilt": [],
        "jit": {
            "sglang": {"env": "SGLANG_JIT_CACHE_DIR", "dir": os.environ.get("SGLANG_JIT_CACHE_DIR")},
            "flashinfer": {"env": "FLASHINFER_WORKSPACE_BASE", "dir": os.environ.get("FLASHINFER_WORKSPACE_BASE")},
        },
        "cache_dir": cache_dir,
        "include_links": include_links(cuda_home),
    }


def include_links(cuda_home: str | None) -> dict:
    """``{"from": [directories], "names": [...]}`` of the symbolic links in ``$CUDA_HOME/include``."""
    if not cuda_home:
        return {"from": [], "names": []}
    include = os.path.join(cuda_home, "include")
    names = sorted(n for n in os.listdir(include) if os.path.islink(os.path.join(include, n)))
    sources = sorted({os.path.dirname(os.readlink(os.path.join(include, n))) for n in names})
    return {"from": sources, "names": names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolkit-from", required=True)
    parser.add_argument("--cache-dir", required=True)
    args = parser.parse_args(argv)
    json.dump(record(args.toolkit_from, args.cache_dir), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
