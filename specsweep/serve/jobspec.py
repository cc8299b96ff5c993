"""What a server job is given, fixed when it starts: its files (``JobPaths``), how it meets its host
(``JobHost``) and, for its phases (``serve.phases``), everything together (``Job``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specsweep.contracts.plan import Plan, Point
from specsweep.contracts.rounds import RoundPlan
from specsweep.records import DEFAULT_POINT
from specsweep.serve import guard, kernel_cache
from specsweep.serve.console import Console
from specsweep.serve.container import run_labels
from specsweep.serve.launch import server_environment
from specsweep.serve.lock import LockSettings


@dataclass(frozen=True)
class JobPaths:
    launch: Path
    server_log: Path
    warmup: Path
    requests: Path
    outcome: Path
    nccl_logs: Path | None = None  # directory of NCCL_DEBUG_FILEs (default: beside server.log, NCCL_LOG_DIR)
    profile: Path | None = None  # profile.json (traces under profile/): serve.profile
    allreduce_bench: Path | None = None  # allreduce_bench.json: serve.profile


@dataclass(frozen=True)
class JobHost:
    """How the job meets its host: the lock, whose checkout it is, how often the guard samples.

    How to run, not what to measure: none of it is in the plan, so changing it
    reruns nothing. ``workdir`` is the workflow's directory (where ``results/``
    is); it names the checkout in labels and environment.
    """

    lock: LockSettings = field(default_factory=LockSettings)
    workdir: Path = field(default_factory=Path.cwd)
    guard_interval_s: float = guard.DEFAULT_INTERVAL_S
    docker: str = "docker"
    #: The terminal Snakemake runs in: a waiting job says so, and the job shows its stage and progress there
    #: (``serve.console``), besides its log.
    notice: TextIO | None = None
    #: Host root of the kernel caches mounted into containers (``serve.kernel_cache``); None: none mounted.
    kernel_cache_root: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], workdir: Path, notice: TextIO | None = None) -> "JobHost":
        """``SPECSWEEP_LOCK_DIR``, ``SPECSWEEP_LOCK_WAIT_S``, ``SPECSWEEP_GUARD_INTERVAL_S``,
        ``SPECSWEEP_KERNEL_CACHE_DIR`` (``kernel_cache.default_root``)."""
        raw = environ.get("SPECSWEEP_GUARD_INTERVAL_S")
        try:
            interval = float(raw) if raw else guard.DEFAULT_INTERVAL_S
        except ValueError:
            interval = -1.0
        if interval <= 0:
            raise ValueError(f"SPECSWEEP_GUARD_INTERVAL_S={raw!r}: expected seconds (a number > 0)")
        return cls(lock=LockSettings.from_environ(environ), workdir=Path(workdir), guard_interval_s=interval,
                   notice=notice, kernel_cache_root=kernel_cache.default_root(environ))


@dataclass(frozen=True)
class Job:
    """What every phase reads, fixed when the job starts: one launch of one plan."""

    plan: Plan  # as launched: with its launch in env and NCCL's debug file (``serve.launch``)
    paths: JobPaths
    host: JobHost
    run_id: str
    launch_id: str
    log: TextIO
    console: Console | None
    image_manifest: Mapping[str, Any] | None
    registry: Mapping[str, Any] | None
    identity: Mapping[str, str]  # ``launch.identity_env``
    checkout: str  # ``container.checkout_id``
    nccl_dir: Path
    round: RoundPlan | None = None  # the round this launch belongs to (``contracts.rounds``), if given one
    round_plan_path: Path | None = None  # its file: with the checkout and the round, the round's identity

    @property
    def log_name(self) -> str:
        return getattr(self.log, "name", "the job's log")

    @property
    def labels(self) -> dict[str, str]:
        """The run's container labels (``container.run_labels``)."""
        return run_labels(self.plan.name, self.checkout, self.host.workdir, self.run_id)

    @property
    def points(self) -> tuple[Point, ...]:
        return self.plan.measured_points(DEFAULT_POINT)

    def say(self, text: str) -> None:
        """One line on the terminal (``serve.console``), when there is one."""
        if self.console is not None:
            self.console.say(text)

    def defer(self, text: str) -> None:
        """A line for the terminal said with the job's next one (``serve.console``), when there is one."""
        if self.console is not None:
            self.console.defer(text)

    def server_env(self) -> dict[str, str]:
        return server_environment(self.plan.env, dict(os.environ), self.identity)
