"""Write link stubs of the NVIDIA driver libraries from the CUDA headers.

Usage: python3 cuda_link_stubs.py INCLUDE_DIR OUT_DIR

What the CUDA toolkit ships as lib64/stubs/libcuda.so and libnvidia-ml.so, for
a toolkit assembled from PyPI wheels, which ship neither (nvidia-cuda-runtime
has cuda.h, nvidia-nvml-dev has nvml.h, no wheel has the stubs). Each stub is a
shared library with the driver's SONAME (libcuda.so.1, libnvidia-ml.so.1) that
defines every function the header declares, so a library linked against it
records DT_NEEDED on the SONAME and the real driver, mounted by the NVIDIA
container runtime on a GPU host, provides the functions at run time. A stub
function does nothing and returns 999 (CUDA_ERROR_UNKNOWN, NVML_ERROR_UNKNOWN);
a function returning a string returns "driver link stub".

The names are read from the preprocessed headers (gcc -E), three times: as a
program compiles them (cuMemAlloc is #defined to cuMemAlloc_v2), with
__CUDA_API_VERSION_INTERNAL / NVML_NO_UNVERSIONED_FUNC_DEFS (the unversioned
names) and with CUDA_API_PER_THREAD_DEFAULT_STREAM (the _ptds/_ptsz names);
the stub defines the union.
"""

import re
import subprocess
import sys
from pathlib import Path

# header -> (library file, SONAME, name prefix, error-returning types)
LIBRARIES = {
    "cuda.h": ("libcuda.so", "libcuda.so.1", "cu", ("CUresult",)),
    "nvml.h": ("libnvidia-ml.so", "libnvidia-ml.so.1", "nvml", ("nvmlReturn_t",)),
}
PASSES = ((), ("-D__CUDA_API_VERSION_INTERNAL", "-DNVML_NO_UNVERSIONED_FUNC_DEFS"),
          ("-DCUDA_API_PER_THREAD_DEFAULT_STREAM",))


def declared(include: Path, header: str, prefix: str, error_types: tuple[str, ...]) -> dict[str, str]:
    """{function name: 'error' | 'string'} of the functions the header declares."""
    names: dict[str, str] = {}
    for defines in PASSES:
        text = subprocess.run(
            ["gcc", "-E", "-P", "-x", "c", f"-I{include}", *defines, "-"],
            input=f"#include <{header}>\n", capture_output=True, text=True, check=True,
        ).stdout
        text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", text)
        for m in re.finditer(rf"\b({'|'.join(error_types)})\s+({prefix}[A-Za-z0-9_]+)\s*\(", text):
            names[m.group(2)] = "error"
        for m in re.finditer(rf"\bconst\s+char\s*\*\s*({prefix}[A-Za-z0-9_]+)\s*\(", text):
            names[m.group(1)] = "string"
    return names


def main(include: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for header, (filename, soname, prefix, error_types) in LIBRARIES.items():
        names = declared(include, header, prefix, error_types)
        if len(names) < 20:
            sys.exit(f"cuda_link_stubs.py: {include / header}: only {len(names)} functions found; not a CUDA header?")
        body = "".join(
            f'const char *{n}(void) {{ return "driver link stub"; }}\n' if kind == "string"
            else f"int {n}(void) {{ return 999; }}\n"
            for n, kind in sorted(names.items())
        )
        source = out / f"{filename}.c"
        source.write_text(body)
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", "-o", str(out / filename), str(source)],
            check=True,
        )
        source.unlink()
        print(f"{out / filename}: SONAME {soname}, {len(names)} functions of {header} (stubs: each returns 999)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: cuda_link_stubs.py INCLUDE_DIR OUT_DIR")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
