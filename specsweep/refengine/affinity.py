"""Where the ranks of a CPU server run: each on its own cores, so that ranks and the client do not compete.

On a CPU every rank computes and, over ``shm``, spins on its peers' flags;
when two ranks share a core, or the benchmark client lands on a rank's core,
a step waits for the scheduler to hand the core back, and the step time
varies with whatever else the host does. ``--cpu-affinity auto`` (the
default) therefore pins rank r to cores of its own (``os.sched_setaffinity``
of every thread of the rank's process, before its intra-op threads exist, so
that they inherit the set) whenever the host has enough cores: ``ranks x cores per rank + 1``,
the last core(s) left to the client, the HTTP thread's peers and the rest of
the host. Cores per rank: ``OMP_NUM_THREADS`` when it is set, else an even
share of the cores less the client's. With fewer cores nothing is pinned and
the server log says why. ``--cpu-affinity none`` never pins. On CUDA nothing
is pinned (the ranks mostly wait on their GPU; that placement is not measured
here).

The cores come from the server's own affinity (``os.sched_getaffinity(0)``:
what ``taskset``, a cgroup cpuset or Slurm left it), in ascending order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

AFFINITY_MODES = ("auto", "none")


@dataclass(frozen=True)
class Placement:
    """The cores of every rank (``None``: not pinned) and why."""

    mode: str
    ranks: tuple[tuple[int, ...], ...] | None
    client: tuple[int, ...]  # cores no rank is pinned to
    reason: str

    @property
    def pinned(self) -> bool:
        return self.ranks is not None

    def cores_per_rank(self) -> int | None:
        return len(self.ranks[0]) if self.ranks else None

    def describe(self) -> str:
        if not self.ranks:
            return f"not pinned ({self.reason})"
        ranks = ", ".join(f"rank {r} on cores {_span(c)}" for r, c in enumerate(self.ranks))
        rest = f"cores {_span(self.client)}" if self.client else "no core"
        return f"{ranks}; {rest} left to the client and the rest of the host"

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "pinned": self.pinned, "ranks": [list(c) for c in self.ranks or ()],
                "client": list(self.client), "reason": self.reason}


def _span(cores: Sequence[int]) -> str:
    """0-3,6 style: runs of consecutive cores."""
    parts, start = [], None
    cores = sorted(cores)
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


def plan_placement(mode: str, world_size: int, device: str, allowed: Sequence[int],
                   threads_per_rank: int | None) -> Placement:
    """Which cores each rank gets; ``threads_per_rank`` is ``OMP_NUM_THREADS`` when set (else None)."""
    if mode not in AFFINITY_MODES:
        raise ValueError(f"--cpu-affinity {mode!r}: allowed values are {', '.join(AFFINITY_MODES)}")
    cores = tuple(sorted(allowed))
    if mode == "none":
        return Placement(mode, None, cores, "--cpu-affinity none")
    if device != "cpu":
        return Placement(mode, None, cores, f"--device {device}: ranks are pinned on the cpu only")
    per = threads_per_rank or max(1, (len(cores) - 1) // world_size)
    need = world_size * per + 1
    if len(cores) < need:
        return Placement(mode, None, cores,
                         f"{len(cores)} core(s) available, {world_size} rank(s) x {per} core(s) + 1 for the client "
                         f"need {need}")
    ranks = tuple(cores[r * per:(r + 1) * per] for r in range(world_size))
    return Placement(mode, ranks, cores[world_size * per:],
                     f"{len(cores)} core(s) available: {world_size} rank(s) x {per} + {len(cores) - world_size * per}")


def available_cores() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def pin_rank(placement: Placement, rank: int) -> list[int]:
    """Pin this process to ``rank``'s cores, every thread it has (``sched_setaffinity`` of a thread id sets
    that thread only) and so the threads it starts later; returns the calling thread's cores after."""
    if placement.ranks is not None:
        cores = placement.ranks[rank]
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:  # no /proc: the calling thread, and the threads it starts from now on
            tids = [0]
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cores)
            except ProcessLookupError:
                pass  # that thread ended meanwhile
    return sorted(os.sched_getaffinity(0))
