"""What was really in effect for a server: environment, NCCL config files, hooks, versions, GPUs.

Why: the configuration intended is not always the one that ran. NCCL reads
``/etc/nccl.conf`` and ``~/.nccl.conf``; a ``sitecustomize.py`` in the image
can set variables at interpreter start; SGLang sets some itself
(``CUDA_DEVICE_MAX_CONNECTIONS``, ``NCCL_CUMEM_ENABLE``, ``NCCL_NVLS_ENABLE``).
So this is read from *inside* the server's environment: from
``/proc/<pid>/environ`` of the server process when a pid is given, and of every
process below it (``workers``). The launcher's own ``/proc/<pid>/environ`` is
what it was exec'd with and cannot show what SGLang sets in ``os.environ``
afterwards (``entrypoints/engine.py``: ``NCCL_CUMEM_ENABLE``, ``NCCL_NVLS_ENABLE``,
``CUDA_DEVICE_MAX_CONNECTIONS``, ...); the TP scheduler processes, where NCCL
runs, are started after that and inherit it, so ``worker_env_set_after_launch``
lists what the workers have that the launcher was not started with.

STDLIB ONLY and self-contained: the orchestrator pipes this file's source into
``python -`` inside the container (``docker exec -i <c> python3 - --pid 1``)
or runs ``python -m specsweep.serve.provenance`` locally; it must not import
specsweep, torch, or anything that initialises CUDA. Versions come from
``importlib.metadata``; the NCCL version is read from the installed
``nvidia-nccl-*`` distribution or the NCCL library file name, not by loading it.

Nothing that could be a secret is printed: only variables with the prefixes
below (and values of keys that look like credentials are redacted anyway).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# Format history of the provenance record (launch.json "provenance"):
#   1  env, nccl_conf, customize_hooks, versions, GPUs.
#   2  + workers (pid, name, env of every process below the server) and
#      worker_env_set_after_launch.
#   3  env (of the server and of each worker) also keeps SPECSWEEP_ variables:
#      the launch id (SPECSWEEP_LAUNCH), the run's identity, and a test-only
#      fault must show in what was in effect.
#   4  + source: "process" (read from /proc, as in 1-3) or "server_info" (a server this workflow
#      did not start, runtime external: from_server_info, what its own /server_info says; env
#      only where the server reports its environment, else env_source says it is unknown).
FORMAT_VERSION = 4
ENV_PREFIXES = ("NCCL_", "SGLANG_", "TORCH_", "CUDA_", "NVSHMEM_", "MSCCLPP_", "FLASHINFER_", "OMP_", "LD_",
                "SPECSWEEP_")
_SECRET_KEY = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_KEY|_KEY$)", re.IGNORECASE)
# Distribution names to report (first found wins for aliases): every server's own. Those of the backend
# variants (flashinfer, mscclpp, deep_ep, nccl, ...) are their registry entries' (engines.variants), which
# the orchestrator passes as --packages (serve.launch.collect_provenance): this file imports nothing of specsweep.
PACKAGES: dict[str, tuple[str, ...]] = {
    "sglang": ("sglang",),
    "torch": ("torch",),
    "triton": ("triton",),
}
_TIMEOUT_S = 30
# A sitecustomize line that sets a variable: os.environ["X"] = ..., os.environ.setdefault("X", ...), os.putenv("X", ...)
_ENV_WRITE = re.compile(
    r"""(?:os\.environ\s*\[\s*['"](?P<a>\w+)['"]\s*\]\s*=|"""
    r"""os\.environ\.setdefault\(\s*['"](?P<b>\w+)['"]|"""
    r"""os\.putenv\(\s*['"](?P<c>\w+)['"]|"""
    r"""os\.environ\.update\(\s*\{?\s*['"](?P<d>\w+)['"])"""
)


def _filter_env(env: dict[str, str]) -> dict[str, str]:
    out = {}
    for key in sorted(env):
        if key.startswith(ENV_PREFIXES):
            out[key] = "<redacted>" if _SECRET_KEY.search(key) else env[key]
    return out


def process_env(pid: int | None) -> tuple[dict[str, str], str]:
    """The environment of ``pid`` (``/proc/<pid>/environ``) or of this process; and where it came from.

    ``/proc/<pid>/environ`` is the environment the process was started with
    (what NCCL and SGLang read at import), which is what matters here.
    """
    if pid is None:
        return dict(os.environ), "os.environ"
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env, f"/proc/{pid}/environ"


def nccl_conf_files(home: str | None = None) -> dict[str, Any]:
    """Contents of the NCCL config files NCCL itself reads (``/etc/nccl.conf``, ``~/.nccl.conf``)."""
    home = home or os.path.expanduser("~")
    out: dict[str, Any] = {}
    for path in ("/etc/nccl.conf", os.path.join(home, ".nccl.conf")):
        p = Path(path)
        out[path] = p.read_text(errors="replace") if p.is_file() else None
    return out


def customize_hooks(paths: list[str] | None = None) -> list[dict[str, Any]]:
    """``sitecustomize``/``usercustomize`` modules on ``sys.path``: path, sha256, env vars they set.

    The variables are found by a text scan (never by importing the file): a
    hook that sets NCCL_* at interpreter start changes every measurement
    without appearing in any config.
    """
    found = []
    seen = set()
    for entry in paths if paths is not None else sys.path:
        for name in ("sitecustomize", "usercustomize"):
            for candidate in (Path(entry or ".") / f"{name}.py", Path(entry or ".") / name / "__init__.py"):
                if not candidate.is_file():
                    continue
                real = str(candidate.resolve())
                if real in seen:
                    continue
                seen.add(real)
                data = candidate.read_bytes()
                text = data.decode(errors="replace")
                sets = sorted({next(g for g in m.groups() if g) for m in _ENV_WRITE.finditer(text)})
                found.append({"path": str(candidate), "sha256": hashlib.sha256(data).hexdigest(), "sets_env": sets})
    return found


def package_versions(extra: dict[str, list[str]] | None = None) -> dict[str, str | None]:
    """Installed versions by distribution metadata (no imports: importing torch/sglang is slow and touches CUDA),
    of :data:`PACKAGES` and ``extra`` (label -> distribution names, first found wins)."""
    out: dict[str, str | None] = {}
    for label, names in {**PACKAGES, **(extra or {})}.items():
        out[label] = None
        for name in names:
            try:
                out[label] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def nccl_library() -> dict[str, Any]:
    """NCCL shared libraries visible to torch, by file name (``libnccl.so.2.27.5``), without loading them."""
    patterns = ["/usr/lib/x86_64-linux-gnu/libnccl.so.*", "/usr/local/cuda*/lib64/libnccl.so.*"]
    for site in sys.path:
        patterns.append(os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so*"))
    files = sorted({p for pat in patterns for p in glob.glob(pat)})
    versions = sorted({m.group(1) for f in files if (m := re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", f))})
    return {"files": files, "versions": versions}


def _run(argv: list[str]) -> dict[str, Any]:
    """Run a read-only tool; the result says why when there is none."""
    if shutil.which(argv[0]) is None:
        return {"available": False, "reason": f"{argv[0]} not found on PATH", "output": None}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"available": False, "reason": f"{argv!r} failed: {exc}", "output": None}
    if proc.returncode != 0:
        return {"available": False, "reason": f"{argv!r} exited {proc.returncode}: {proc.stderr.strip()[-500:]}",
                "output": None}
    return {"available": True, "reason": None, "output": proc.stdout}


_GPU_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "memory.total", "memory.used",
               "compute_cap", "persistence_mode")


def gpus() -> dict[str, Any]:
    """``nvidia-smi`` GPU table (one dict per GPU) and ``nvidia-smi topo -m``; absent with a reason."""
    q = _run(["nvidia-smi", f"--query-gpu={','.join(_GPU_FIELDS)}", "--format=csv,noheader,nounits"])
    table = None
    if q["available"]:
        table = [dict(zip(_GPU_FIELDS, (c.strip() for c in line.split(",")))) for line in q["output"].splitlines()
                 if line.strip()]
    topo = _run(["nvidia-smi", "topo", "-m"])
    return {
        "gpus": table,
        "gpus_reason": q["reason"],
        "topology": topo["output"],
        "topology_reason": topo["reason"],
    }


def gpu_busy() -> list[dict[str, Any]]:
    """Processes holding GPU memory (``nvidia-smi --query-compute-apps``); [] without a GPU tool.

    The orchestrator refuses to launch on GPUs that others hold (and says
    who) instead of killing them: a stale process skews every number, but it
    may be somebody's job.
    """
    fields = ("gpu_uuid", "pid", "process_name", "used_memory")
    r = _run(["nvidia-smi", f"--query-compute-apps={','.join(fields)}", "--format=csv,noheader,nounits"])
    if not r["available"]:
        return []
    busy = []
    for line in r["output"].splitlines():
        if not line.strip():
            continue
        row = dict(zip(fields, (c.strip() for c in line.split(","))))
        try:
            row["pid"] = int(row["pid"])
        except (KeyError, ValueError):
            pass
        busy.append(row)
    return busy


def busy_message(busy: list[dict[str, Any]]) -> str | None:
    """One line naming the processes that hold GPU memory, or None when the GPUs are free."""
    if not busy:
        return None
    who = ", ".join(f"pid {b.get('pid')} ({b.get('process_name')}, {b.get('used_memory')} MiB on {b.get('gpu_uuid')})"
                    for b in busy)
    return (f"GPUs are in use by other processes: {who}. specsweep does not kill them; "
            f"stop them or wait, then rerun.")


def _proc_stat(pid_dir: Path) -> tuple[int, int] | None:
    """(parent pid, start time) of one /proc entry, or None if it went away."""
    try:
        fields = (pid_dir / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren, ...), oldest first."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for pid_dir in Path("/proc").glob("[0-9]*"):
        stat = _proc_stat(pid_dir)
        if stat is not None:
            parents.setdefault(stat[0], []).append((stat[1], int(pid_dir.name)))
    out: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        for start, child in parents.get(todo.pop(), []):
            out.append((start, child))
            todo.append(child)
    return [child for _, child in sorted(out)]


def workers(pid: int) -> list[dict[str, Any]]:
    """Name and filtered environment of every process below ``pid`` (a process that exits meanwhile is skipped)."""
    out = []
    for child in descendants(pid):
        try:
            name = Path(f"/proc/{child}/comm").read_text().strip()
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            env, _ = process_env(child)
        except OSError:
            continue
        out.append({"pid": child, "name": name,
                    "cmdline": [c.decode(errors="replace") for c in cmdline[:3] if c],
                    "env": _filter_env(env)})
    return out


def env_set_after_launch(launcher_env: dict[str, str], worker_list: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{key: [values seen]}`` for (filtered) variables a worker has with another value than the launcher."""
    out: dict[str, list[str]] = {}
    for worker in worker_list:
        for key, value in worker["env"].items():
            if launcher_env.get(key) != value and value not in out.setdefault(key, []):
                out[key].append(value)
    return {k: v for k, v in sorted(out.items()) if v}


def collect(pid: int | None = None, packages: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything above as one JSON-ready dict (``format_version``: :data:`FORMAT_VERSION`); ``packages``: the
    distributions to report besides :data:`PACKAGES` (``package_versions``)."""
    env, env_source = process_env(pid)
    worker_list = workers(pid) if pid is not None else []
    return {
        "source": "process",
        "workers": worker_list,
        "worker_env_set_after_launch": env_set_after_launch(_filter_env(env), worker_list),
        "format_version": FORMAT_VERSION,
        "pid": pid,
        "env_source": env_source,
        "env": _filter_env(env),
        "nccl_conf": nccl_conf_files(env.get("HOME")),
        "customize_hooks": customize_hooks(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": package_versions(packages),
        "nccl_library": nccl_library(),
        **gpus(),
        "gpu_processes": gpu_busy(),
    }


#: Keys of an info endpoint's answer that say which server software answered (SGLang 0.5.23:
#: ``version``; the reference engine: ``version``, ``engine``, ``versions``).
_INFO_VERSION_KEYS = ("version", "engine", "versions")


def from_server_info(info: dict[str, Any], url: str) -> dict[str, Any]:
    """The provenance of a server that runs without this workflow (runtime external), from its
    ``/server_info`` answer: nothing can be read from its processes, which may be on another host
    or in a container that is not ours.

    SGLang 0.5.23 answers ``/server_info`` (``/get_server_info`` is its deprecated alias) with
    ``server_args.resolved_dict()``, ``launch_command``, the scheduler's info, ``internal_states``
    and ``version`` (``sglang/srt/entrypoints/http_server.py:853-892``,
    ``sglang/srt/utils/common.py:3584-3593``): its flags, not its environment. The reference
    engine adds ``environment`` (the same filtered environment ``collect`` reads).
    """
    env = info.get("environment")
    return {
        "source": "server_info",
        "format_version": FORMAT_VERSION,
        "url": url,
        "pid": info.get("pid"),
        "env_source": "server_info environment" if isinstance(env, dict) else
                      "unknown: the server's info endpoint does not report its environment",
        "env": _filter_env(env) if isinstance(env, dict) else None,
        "server_versions": {k: info[k] for k in _INFO_VERSION_KEYS if k in info},
    }


def first_child(pid: int) -> int | None:
    """The oldest child of ``pid``: the server under an init process (``docker run --init``)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append((int(fields[19]), int(stat.parent.name)))  # (start time, pid)
    return min(children)[1] if children else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print the effective environment and versions as JSON.")
    ap.add_argument("--pid", type=int, default=None, help="read the environment of this process (/proc/PID/environ)")
    ap.add_argument("--child-of", type=int, default=None,
                    help="read the environment of the oldest child of this process (the server under docker's init)")
    ap.add_argument("--busy", action="store_true", help="print only the processes holding GPU memory")
    ap.add_argument("--packages", type=json.loads, default=None,
                    help="JSON {label: [distribution, ...]}: versions to report besides the built-in ones")
    args = ap.parse_args(argv)
    pid = args.pid
    if args.child_of is not None:
        pid = first_child(args.child_of)
        if pid is None:
            ap.error(f"process {args.child_of} has no child")
    out: Any = gpu_busy() if args.busy else collect(pid, args.packages)
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
