"""Kernel caches that outlive a launch: a host directory per image and GPU architecture, mounted into
each server's container where the image keeps its JIT caches.

SGLang 0.5.23 and FlashInfer 0.7.2 compile kernels with nvcc the first time a server uses them
(containers/sglang/Dockerfile, stage ``jit``, cites the lines). In a ``docker run --rm`` container
their caches die with it, so every launch would compile again: startup time, and maybe noise, in
every launch. An image says where its caches are with the label :data:`KERNEL_CACHE_LABEL` (the
SGLang images: ``/var/cache/specsweep-kernels``, holding ``SGLANG_JIT_CACHE_DIR`` and
``FLASHINFER_WORKSPACE_BASE``); a launch mounts ``<root>/<image>-<content tag>/<arch>/`` there.
The first launch on a host fills it, later launches of the same image on the same architecture
reuse it. Keyed by the content tag, a rebuilt image never meets another image's kernels; keyed by
the architecture, a shared file system (a cluster's home) holds one cache per kind of node. Both
libraries key their own entries further (SGLang by target, flags and a compiler fingerprint,
``sglang/kernels/jit/utils/compile/cache.py:275-305``; FlashInfer by version and architecture list,
``flashinfer/jit/env.py:382-396``), and both publish a build by an atomic rename under a lock, so
concurrent launches (the ranks of one server, two servers of one node) share one directory safely
(``sglang/kernels/jit/utils/compile/loader.py:158-201``).

How to run, not what to measure: the root comes from the job's environment
(:data:`ROOT_ENV`), never from the plan, so moving it reruns nothing. launch.json's
``kernel_cache`` says where the cache was, whether it was warm (anything in it before the launch),
and how much it held before.

Compile time is not split from the readiness time: SGLang 0.5.23 logs a JIT build only at debug
level (``cache.py:415-416``, "Rebuilding JIT module", with ``SGLANG_JIT_CACHE_DEBUG``), and
FlashInfer 0.7.2 logs the start of a cold build ("Building JIT module ...",
``flashinfer/jit/core.py:593-597``) but not its end, so the server log gives no compile duration.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The image label naming the container directory that holds the image's JIT caches.
KERNEL_CACHE_LABEL = "io.specsweep.kernel-cache"
#: The job's environment variable naming the host root of the caches; ``off`` turns them off.
ROOT_ENV = "SPECSWEEP_KERNEL_CACHE_DIR"
OFF = "off"
UNKNOWN_ARCH = "unknown-arch"


def default_root(environ: Mapping[str, str]) -> Path | None:
    """The host root: ``$SPECSWEEP_KERNEL_CACHE_DIR`` (``off``: None), else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, then ``specsweep/kernels``."""
    raw = environ.get(ROOT_ENV)
    if raw is not None and raw.strip():
        return None if raw.strip().lower() == OFF else Path(os.path.abspath(os.path.expanduser(raw.strip())))
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(os.path.abspath(base)) / "specsweep" / "kernels"


def container_dir(manifest: Mapping[str, Any] | None) -> str | None:
    """Where the image keeps its JIT caches (its :data:`KERNEL_CACHE_LABEL`), or None."""
    labels = (manifest or {}).get("labels") or {}
    value = labels.get(KERNEL_CACHE_LABEL)
    return str(value) if value else None


def image_key(manifest: Mapping[str, Any]) -> str:
    """``<image>-<content tag>`` (``specsweep/sglang:2e7ff668e928`` -> ``sglang-2e7ff668e928``)."""
    repo, _, tag = str(manifest["tag"]).rpartition(":")
    name = repo.rsplit("/", 1)[-1] or str(manifest.get("name") or "image")
    return _safe(f"{name}-{tag}")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def detect_arch() -> str | None:
    """``sm<major><minor>`` of this host's first GPU, from ``nvidia-smi``; None without one. A host with
    GPUs of several kinds takes the first (their caches still key each build by its own target)."""
    argv = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader,nounits"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        if m := re.fullmatch(r"(\d+)\.(\d+)", line.strip()):
            return f"sm{m.group(1)}{m.group(2)}"
    return None


def survey(path: Path) -> dict[str, int]:
    """How many files, and bytes, a directory holds (symbolic links not followed)."""
    files = size = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            files += 1
            size += st.st_size
    return {"files": files, "bytes": size}


def prepare(manifest: Mapping[str, Any] | None, root: Path | None, *, runtime: str, plan_arch: str | None,
            detected_arch: str | None) -> dict[str, Any]:
    """The launch's cache: made if missing and surveyed before the server starts (launch.json's
    ``kernel_cache``). ``volume`` (``host:container:rw``) is there when a directory is mounted;
    otherwise ``mounted`` is false and ``why`` says why not."""
    where = container_dir(manifest)
    if runtime != "docker" or manifest is None:
        return {"mounted": False, "why": f"runtime {runtime}: no container to mount a cache into"}
    if where is None:
        return {"mounted": False, "why": f"image {manifest.get('tag')} has no {KERNEL_CACHE_LABEL} label"}
    if root is None:
        return {"mounted": False, "why": f"{ROOT_ENV}={OFF}", "container_dir": where}
    arch, arch_from = ((detected_arch, "nvidia-smi") if detected_arch else
                       (plan_arch, "plan gpu_arch") if plan_arch else (UNKNOWN_ARCH, "none"))
    host_dir = root / image_key(manifest) / _safe(str(arch).lower())
    host_dir.mkdir(parents=True, exist_ok=True)
    before = survey(host_dir)
    return {"mounted": True, "host_dir": str(host_dir), "container_dir": where, "gpu_arch": arch,
            "gpu_arch_from": arch_from, "warm": before["files"] > 0, "files_before": before["files"],
            "bytes_before": before["bytes"], "volume": f"{host_dir}:{where}:rw"}


def volumes(record: Mapping[str, Any]) -> list[str]:
    """The ``-v`` entries a launch adds for its cache (none when nothing is mounted)."""
    return [str(record["volume"])] if record.get("mounted") else []
