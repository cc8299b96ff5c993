"""A plan's ``volumes:`` (``host:container[:mode]``, one ``docker run -v`` each) and their host paths.

Below the engines on purpose: an engine's preflight maps the paths its argv
names inside the container back to the host (to load a model directory before
launch), and ``serve.container`` turns the same entries into ``-v`` flags, so
both read them with :func:`parse_volume`. Relative host paths are taken from
``base`` (the workflow's working directory: the repository root).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from specsweep.contracts.plan import Plan


@dataclass(frozen=True)
class Volume:
    key: str  # configurations.<name>.volumes[i]
    spec: str
    host: Path  # absolute
    container: PurePosixPath
    mode: str  # "" | "ro" | "rw" | ...


def parse_volume(spec: str, base: Path, key: str = "volumes") -> Volume:
    """``host:container[:mode]``; the host path is made absolute against ``base``."""
    parts = str(spec).split(":")
    if len(parts) < 2 or not parts[0] or not parts[1].startswith("/"):
        raise ValueError(f"{key}: {spec!r} is not host:container[:mode] with an absolute container path")
    host = Path(parts[0])
    if not host.is_absolute():
        host = Path(base) / host
    return Volume(key, str(spec), Path(os.path.abspath(host)), PurePosixPath(parts[1]), ":".join(parts[2:]))


def plan_volumes(plan: Plan, base: Path) -> list[Volume]:
    return [
        parse_volume(spec, base, f"configurations.{plan.name}.volumes[{i}]")
        for i, spec in enumerate(plan.volumes)
    ]


def volume_problems(plan: Plan, base: Path) -> list[str]:
    """One message per volume whose host path does not exist (or that does not parse), naming its key.

    ``docker run -v`` would otherwise create a missing host path as an empty
    root-owned directory and start the server on it.
    """
    problems = []
    for i, spec in enumerate(plan.volumes):
        key = f"configurations.{plan.name}.volumes[{i}]"
        try:
            volume = parse_volume(spec, base, key)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if not volume.host.exists():
            problems.append(
                f"{key}: host path {volume.host} (of {spec!r}) does not exist on this host; "
                f"point it at the directory to mount at {volume.container}"
            )
    return problems


def host_path(plan: Plan, path: str, base: Path) -> tuple[Path | None, str | None]:
    """Where a path the server opens lies on this host: ``(host_path, None)`` or ``(None, why not)``.

    Locally it is the path itself (relative to ``base``). In a container it is
    the host side of the volume whose container path holds it (the longest
    one wins, as the kernel's mount table would); a path under no volume is
    not visible from the host.
    """
    if plan.runtime != "docker":
        p = Path(path)
        return (p if p.is_absolute() else Path(base) / p), None
    target = PurePosixPath(path)
    best: Volume | None = None
    for volume in plan_volumes(plan, base):
        if target == volume.container or volume.container in target.parents:
            if best is None or len(volume.container.parts) > len(best.container.parts):
                best = volume
    if best is None:
        return None, f"{path} is under no `volumes:` entry, so the container cannot see a host directory there"
    return best.host / target.relative_to(best.container), None
