"""The docker CLI, run through argv lists: the one runner every docker call goes through.

Why the CLI (``subprocess`` argv lists) and not the docker SDK: the SDK cannot
drive BuildKit (secret mounts are how the build host's proxy CA reaches pip
without landing in a layer), it adds a dependency, and the argv we run is
exactly what a person would type to reproduce a step by hand.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class DockerError(RuntimeError):
    """A docker command failed, or the engine/BuildKit is not usable."""


def run_docker(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run one docker command. With ``log``, output is appended there (the
    argv first, so the log says what ran); otherwise it is captured."""
    full_env = None if env is None else {**os.environ, **env}
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"$ {shlex.join(argv)}\n")
            fh.flush()
            proc = subprocess.run(
                list(argv), stdout=fh, stderr=subprocess.STDOUT, text=True,
                input=input_text, env=full_env, timeout=timeout,
            )
            fh.write(f"[exit {proc.returncode}]\n")
    else:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, input=input_text,
            env=full_env, timeout=timeout,
        )
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip()[-2000:] if log is None else f"see {log}"
        raise DockerError(f"{shlex.join(argv)} exited {proc.returncode}: {detail}")
    return proc


def _docker_candidates(docker: str) -> list[str]:
    seen: list[str] = []
    first = shutil.which(docker) or docker
    seen.append(first)
    for d in os.get_exec_path():
        cand = Path(d) / "docker"
        if cand.is_file() and os.access(cand, os.X_OK) and str(cand) not in seen:
            seen.append(str(cand))
    return seen


def build_command(docker: str = "docker") -> tuple[list[str], dict[str, str]]:
    """The argv prefix and extra env of a BuildKit build.

    BuildKit is required (secret mounts). ``docker buildx build --load`` when
    buildx is installed; otherwise a CLI older than 23 runs BuildKit itself
    with ``DOCKER_BUILDKIT=1`` (Debian's docker.io 20.10). Newer CLIs without
    buildx refuse BuildKit, so other ``docker`` binaries on PATH are tried.
    """
    tried = []
    for exe in _docker_candidates(docker):
        try:
            if run_docker([exe, "buildx", "version"], check=False, timeout=30).returncode == 0:
                return [exe, "buildx", "build", "--load"], {}
            ver = run_docker([exe, "version", "--format", "{{.Client.Version}}"], check=False, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{exe}: {exc}")
            continue
        m = re.match(r"(\d+)\.", (ver.stdout or "").strip())
        if m and int(m.group(1)) < 23:
            return [exe, "build"], {"DOCKER_BUILDKIT": "1"}
        tried.append(f"{exe}: client {(ver.stdout or '?').strip()} without buildx")
    raise DockerError("no BuildKit-capable docker CLI found (" + "; ".join(tried) + "): install Docker's buildx "
                      "plugin (docker-buildx-plugin), which building an image needs")


def image_exists(ref: str, docker: str = "docker") -> bool:
    """Whether an image with this reference exists locally."""
    return run_docker([docker, "image", "inspect", ref], check=False).returncode == 0


def image_inspect(ref: str, docker: str = "docker") -> dict[str, Any]:
    """``docker image inspect`` of one image."""
    return json.loads(run_docker([docker, "image", "inspect", ref]).stdout)[0]
