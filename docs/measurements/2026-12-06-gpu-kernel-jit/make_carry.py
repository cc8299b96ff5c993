"""Build, or verify, what the GPU run carries: small wheels, and the files of the sglang and
flashinfer wheels that the kernels use.

The two big wheels do not fit what a run may carry (sglang 0.5.23: 39 MB, most of it Rust
extensions the kernels never load; flashinfer-python 0.7.2: 65 MB, most of it other kernels'
sources), so the run carries their files that the three kernels reach, unchanged, with each
wheel's METADATA and RECORD: the Python modules ``gpu_kernel_run.py --compile-only`` imports and
the sources and headers the compiler read (its dependency files). ``verify`` checks every
carried file against the wheel's RECORD (sha256), on the GPU host before the run.

    python3 make_carry.py build DEST --python PY   # PY: an interpreter with torch, nvcc on PATH
    python3 make_carry.py verify DEST
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
SCRIPT = REPO / "containers" / "sglang" / "gpu_kernel_run.py"
CONSTRAINTS = REPO / "containers" / "sglang" / "constraints.txt"
BIG = ("sglang", "flashinfer-python")
# What the kernels' import path needs besides torch, numpy and triton (which the GPU host has):
# found by importing in an environment that had only torch and adding the missing one each time.
SMALL = ("apache-tvm-ffi", "ninja", "msgspec", "orjson", "psutil", "pybase64", "requests", "urllib3", "idna",
         "certifi", "charset-normalizer", "packaging", "pillow", "starlette", "anyio", "pydantic_core", "pyzmq",
         "nvidia-ml-py", "tqdm")
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64", "manylinux_2_34_x86_64")
TOP = {"sglang": "sglang", "flashinfer-python": "flashinfer"}


def pins(names) -> list[str]:
    lines = {re.split(r"==", line)[0].lower().replace("_", "-"): line.strip()
             for line in CONSTRAINTS.read_text().splitlines() if "==" in line and not line.startswith("#")}
    missing = [n for n in names if n.lower().replace("_", "-") not in lines]
    if missing:
        raise SystemExit(f"make_carry: {CONSTRAINTS}: no pin for {missing}")
    return [lines[n.lower().replace("_", "-")] for n in names]


def download(requirements: list[str], dest: pathlib.Path) -> None:
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--python-version", "3.12", "-d", str(dest)]
    for p in PLATFORMS:
        argv += ["--platform", p]
    subprocess.run(argv + requirements, check=True)


def used_files(python: str, site: pathlib.Path, scratch: pathlib.Path) -> set[str]:
    """Paths (relative to ``site``) the compile-only run imports or compiles from."""
    probe = ("import json, runpy, sys\n"
             f"sys.argv = [{str(SCRIPT)!r}, '--compile-only', '--arch', '90', '--out', {str(scratch / 'r.json')!r},"
             f" '--cache-dir', {str(scratch / 'cache')!r}]\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
             f"json.dump([getattr(m, '__file__', None) for m in list(sys.modules.values())],"
             f" open({str(scratch / 'modules.json')!r}, 'w'))\nsys.exit(code)\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(site)}
    subprocess.run([python, "-c", probe], check=True, env=env)
    paths = [p for p in json.loads((scratch / "modules.json").read_text()) if p]
    for d in (scratch / "cache").rglob("*.o.d"):  # SGLang keeps the compiler's dependency files
        paths += d.read_text().replace("\\\n", " ").split(":", 1)[1].split()
    for build in (scratch / "cache").rglob("build.ninja"):  # FlashInfer's ninja keeps them in .ninja_deps
        out = subprocess.run(["ninja", "-C", str(build.parent), "-t", "deps"], capture_output=True, text=True,
                             check=True).stdout
        paths += [line.strip() for line in out.splitlines() if line.startswith("    ")]
    used = set()
    for p in paths:
        resolved = pathlib.Path(p).resolve()
        if resolved.is_relative_to(site.resolve()):
            used.add(str(resolved.relative_to(site.resolve())))
    return used


def build(dest: pathlib.Path, python: str) -> None:
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    download(pins(SMALL), wheels)
    with tempfile.TemporaryDirectory(prefix="make-carry-") as tmp:
        tmp = pathlib.Path(tmp)
        download(pins(BIG), tmp / "big")
        full = tmp / "site"
        for whl in sorted((tmp / "big").glob("*.whl")):
            zipfile.ZipFile(whl).extractall(full)
        used = used_files(python, full, tmp)
        site = dest / "site"
        shutil.rmtree(site, ignore_errors=True)
        keep = {u for u in used if u.split("/")[0] in TOP.values()}
        keep |= {str(p.relative_to(full)) for p in full.glob("*.dist-info/*") if p.name in ("METADATA", "RECORD")}
        keep |= {str(p.relative_to(full)) for t in TOP.values() for p in (full / t).rglob("__init__.py")
                 if any(u.startswith(str(p.parent.relative_to(full)) + "/") for u in keep)}
        for rel in sorted(keep):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(full / rel, site / rel)
        (dest / "wheels.sha256").write_text("".join(
            f"{hashlib.sha256(w.read_bytes()).hexdigest()}  {w.name}\n"
            for w in sorted([*wheels.glob("*.whl"), *(tmp / "big").glob("*.whl")])))
    print(f"make_carry: {len(keep)} files of {', '.join(BIG)} in {site}; {len(list(wheels.glob('*.whl')))} wheels")


def verify(dest: pathlib.Path) -> int:
    """Every carried file of the big wheels has the sha256 its wheel's RECORD gives."""
    site = dest / "site"
    bad, checked = [], 0
    for record in sorted(site.glob("*.dist-info/RECORD")):
        rows = {row[0]: row[1] for row in csv.reader(io.StringIO(record.read_text())) if len(row) >= 2 and row[1]}
        for path, digest in rows.items():
            f = site / path
            if not f.exists():
                continue
            got = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(f.read_bytes()).digest()).rstrip(b"=").decode()
            checked += 1
            if got != digest:
                bad.append(path)
    strays = [p for p in site.rglob("*") if p.is_file() and "__pycache__" not in p.parts
              and p.parent.suffix != ".dist-info"
              and not any(str(p.relative_to(site)) in (r.read_text()) for r in site.glob("*.dist-info/RECORD"))]
    print(f"make_carry verify: {checked} files match their wheel's RECORD, {len(bad)} differ, "
          f"{len(strays)} not in any RECORD")
    for p in bad + [str(s) for s in strays]:
        print(f"  {p}")
    return 1 if bad or strays or not checked else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dest", type=pathlib.Path)
    b.add_argument("--python", default=sys.executable, help="interpreter with torch for the compile-only probe")
    v = sub.add_parser("verify")
    v.add_argument("dest", type=pathlib.Path)
    args = parser.parse_args()
    if args.cmd == "build":
        build(args.dest, args.python)
        return 0
    return verify(args.dest)


if __name__ == "__main__":
    sys.exit(main())
