"""Rank processes: the command executor every rank runs, and the follower loop.

Rank 0 decides everything (scheduling, acceptance) and sends each model call
as a small command over a pipe to every follower before executing it itself;
the all-reduces inside the forward keep the ranks in lock-step. Followers
therefore never compute logits and never decide anything, so they cannot
diverge from rank 0 even if floating-point results differed between ranks.

A follower dies with its parent (``PR_SET_PDEATHSIG``), blocks on the pipe
when idle (no spinning), and exits non-zero on any error so that rank 0's
monitor can take the server down.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from .comm import CommSpec, make_communicator
from .config import ModelConfig
from .model import TPModel

log = logging.getLogger("specsweep.refengine")

# Commands whose result rank 0 waits for from every follower (they are rare and must be complete
# when the HTTP call returns: a trace file must exist once /stop_profile answered).
ACKED = ("profile_start", "profile_stop")
ACK_TIMEOUT_S = 120.0

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class RankSetup:
    """What every rank needs to build its shard (picklable)."""

    cfg: ModelConfig
    draft_cfg: ModelConfig | None
    comm: CommSpec
    device: str
    dtype: str
    seed: int
    with_draft: bool
    num_threads: int


def set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no orphan ranks)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def build_rank(rank: int, setup: RankSetup, timed: bool) -> TPModel:
    """Join the communicator and build this rank's model shard."""
    torch.set_num_threads(setup.num_threads)
    comm = make_communicator(rank, setup.comm, timed=timed)
    device = torch.device("cuda", rank) if setup.device == "cuda" else torch.device("cpu")
    return TPModel(setup.cfg, rank, setup.comm.world_size, comm, device, DTYPES[setup.dtype], setup.seed,
                   setup.with_draft, setup.draft_cfg)


class Executor:
    """Executes commands on one rank's model; identical on every rank."""

    def __init__(self, model: TPModel) -> None:
        self.model = model
        self.profiler: Any = None
        self.profile_path: str | None = None

    def execute(self, cmd: tuple) -> Any:
        op = cmd[0]
        m = self.model
        if op == "target":
            return m.forward_target(cmd[1], cmd[2], cmd[3])
        if op == "draft":
            return m.forward_draft(cmd[1], cmd[2], cmd[3], cmd[4])
        if op == "alloc":
            return m.alloc(cmd[1], cmd[2])
        if op == "free":
            return m.free(cmd[1])
        if op == "profile_start":
            return self.start_profile(cmd[1], cmd[2])
        if op == "profile_stop":
            return self.stop_profile()
        raise ValueError(f"unknown command {op!r}")

    def start_profile(self, output_dir: str, tag: str) -> None:
        """Start a torch profiler; the trace goes to ``<dir>/<tag>-TP-<rank>.trace.json.gz`` on stop."""
        from torch.profiler import ProfilerActivity, profile

        if self.profiler is not None:
            return
        acts = [ProfilerActivity.CPU]
        if self.model.device.type == "cuda":
            acts.append(ProfilerActivity.CUDA)
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        self.profile_path = str(Path(output_dir) / f"{tag}-TP-{self.model.rank}.trace.json.gz")
        self.profiler = profile(activities=acts, record_shapes=False)
        self.profiler.start()

    def stop_profile(self) -> str | None:
        if self.profiler is None:
            return None
        self.profiler.stop()
        self.profiler.export_chrome_trace(self.profile_path)
        self.profiler = None
        return self.profile_path


def follower_main(rank: int, setup: RankSetup, conn: Connection, parent_pid: int) -> None:
    """Entry point of ranks 1..N-1 (spawned by rank 0)."""
    set_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)  # rank 0 died while this process was still starting: PDEATHSIG came too late
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to rank 0, which shuts us down in order
    try:
        model = build_rank(rank, setup, timed=False)
        conn.send(("ready", os.getpid(), model.comm.describe()))
    except Exception:
        msg = traceback.format_exc()
        print(f"[rank {rank}] startup failed:\n{msg}", file=sys.stderr, flush=True)
        try:
            conn.send(("error", msg))
        finally:
            os._exit(1)
    executor = Executor(model)
    try:
        while True:
            try:
                cmd = conn.recv()
            except EOFError:
                os._exit(1)  # rank 0 vanished without a shutdown command
            if cmd[0] == "shutdown":
                break
            result = executor.execute(cmd)
            if cmd[0] in ACKED:
                conn.send(("ack", result))
    except Exception:
        print(f"[rank {rank}] failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        os._exit(1)
    executor.stop_profile()
    model.comm.close()
    conn.close()


class Driver:
    """Rank 0's view of all ranks: broadcast a command, then execute it locally."""

    def __init__(self, model: TPModel, conns: list[Connection]) -> None:
        self.executor = Executor(model)
        self.model = model
        self.conns = conns

    def call(self, cmd: tuple) -> Any:
        """Run ``cmd`` on every rank; rank 0's result (for ACKED commands: every rank's, in rank order)."""
        if cmd[0] in ("target", "draft"):
            follower_cmd = cmd[:-1] + ("none",)
        else:
            follower_cmd = cmd
        for c in self.conns:
            c.send(follower_cmd)
        result = self.executor.execute(cmd)
        if cmd[0] not in ACKED:
            return result
        results = [result]
        for rank, c in enumerate(self.conns, start=1):
            if not c.poll(ACK_TIMEOUT_S):
                raise RuntimeError(f"rank {rank} did not answer {cmd[0]} within {ACK_TIMEOUT_S}s")
            results.append(c.recv()[1])
        return results

    def shutdown(self) -> None:
        for c in self.conns:
            try:
                c.send(("shutdown",))
            except (BrokenPipeError, OSError):
                pass  # that rank is already gone; the caller reaps it
        self.executor.stop_profile()
