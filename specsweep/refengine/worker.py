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

from .affinity import Placement, pin_rank
from .comm import make_communicator
from .config import ModelConfig
from .cudagraph import GraphRunner, make_plan, pool_capacity
from .model import TPModel
from .rendezvous import CommSpec
from .trace import DRAFT_PREFILL, GRAPH_REPLAY, PREFILL, annotate

log = logging.getLogger("specsweep.refengine")

# Commands whose result rank 0 waits for from every follower (they are rare and must be complete
# when the HTTP call returns: a trace file must exist once /stop_profile answered).
ACKED = ("profile_start", "profile_stop", "capture_graphs", "keep_graphs")
ACK_TIMEOUT_S = 120.0
CAPTURE_TIMEOUT_S = 900.0  # capturing every graph of a deep model takes seconds to minutes
# Where the logits mode sits in a forward command; followers get "none" there (rank 0 alone reads logits).
# Forward commands: ("target", ids, segs, logits, phase) and ("draft", ids, segs, source, logits, phase).
LOGITS_INDEX = {"target": 3, "draft": 4}

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
    cuda_graph: bool = False  # capture the decode-phase forwards (CUDA only; see cudagraph)
    prefill_graph_tokens: int = 0  # > 0: capture prefill graphs too, up to this many tokens (the prefill chunk)
    graph_comm_timing: bool = True  # timing events around the all-reduces inside graphs (rank 0)
    max_running: int = 16
    context_length: int = 4096
    spec_steps: int | None = None
    placement: Placement | None = None  # the cores of every rank (refengine.affinity); None: not pinned


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
    model = TPModel(setup.cfg, rank, setup.comm.world_size, comm, device, DTYPES[setup.dtype], setup.seed,
                    setup.with_draft, setup.draft_cfg)
    if setup.cuda_graph:
        model.enable_pool(setup.max_running, pool_capacity(setup.context_length))
    return model


def build_graphs(model: TPModel, setup: RankSetup) -> GraphRunner | None:
    """This rank's graph runner (nothing captured yet), or None when graphs are off."""
    if not setup.cuda_graph:
        return None
    plan = make_plan(setup.max_running, setup.context_length, setup.spec_steps, setup.prefill_graph_tokens)
    return GraphRunner(model, plan, logits=model.rank == 0, time_comm=setup.graph_comm_timing)


class Executor:
    """Executes commands on one rank's model; identical on every rank.

    Forwards run as a replayed CUDA graph when ``graphs`` holds one for the
    call's phase and shape (the same decision on every rank: it depends on the
    phase and the segments only, never on the logits mode, which differs
    between rank 0 and the followers), eager otherwise. ``last_graph`` says
    which the latest forward took.
    """

    def __init__(self, model: TPModel, graphs: GraphRunner | None = None) -> None:
        self.model = model
        self.graphs = graphs
        self.last_graph = False
        self.profiler: Any = None
        self.profile_path: str | None = None

    def execute(self, cmd: tuple) -> Any:
        op = cmd[0]
        m = self.model
        if op == "target":
            _, ids, segs, logits, phase = cmd
            kind = "prefill" if phase == PREFILL else "target"
            with annotate(phase):
                return self._forward(kind, ids, segs, logits, lambda: m.forward_target(ids, segs, logits))
        if op == "draft":
            _, ids, segs, source, logits, phase = cmd
            if phase == DRAFT_PREFILL and source == "target":
                kind = "draft_prefill"
            else:
                kind = "draft_extend" if source == "target" else "draft_step"
            with annotate(phase):
                return self._forward(kind, ids, segs, logits, lambda: m.forward_draft(ids, segs, source, logits))
        if op == "alloc":
            return m.alloc(cmd[1], cmd[2])
        if op == "free":
            return m.free(cmd[1])
        if op == "capture_graphs":
            return self.graphs.capture() if self.graphs is not None else None
        if op == "keep_graphs":
            return self.graphs.keep(cmd[1]) if self.graphs is not None else 0
        if op == "profile_start":
            return self.start_profile(cmd[1], cmd[2])
        if op == "profile_stop":
            return self.stop_profile()
        raise ValueError(f"unknown command {op!r}")

    def _forward(self, kind: str, ids: list[int], segs: list, logits: str, eager: Any) -> Any:
        key = self.graphs.lookup(kind, segs) if self.graphs is not None else None
        self.last_graph = key is not None
        if key is None:
            return eager()
        with annotate(GRAPH_REPLAY):
            return self.graphs.run(key, ids, segs, logits)  # type: ignore[union-attr]

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
        cores = pin_rank(setup.placement, rank) if setup.placement is not None else sorted(os.sched_getaffinity(0))
        model = build_rank(rank, setup, timed=False)
        graphs = build_graphs(model, setup)
        conn.send(("ready", os.getpid(), model.comm.describe(), cores))
    except Exception:
        msg = traceback.format_exc()
        print(f"[rank {rank}] startup failed:\n{msg}", file=sys.stderr, flush=True)
        try:
            conn.send(("error", msg))
        finally:
            os._exit(1)
    executor = Executor(model, graphs)
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

    def __init__(self, model: TPModel, conns: list[Connection], graphs: GraphRunner | None = None) -> None:
        self.executor = Executor(model, graphs)
        self.model = model
        self.conns = conns

    @property
    def last_graph(self) -> bool:
        """Whether the latest forward replayed a CUDA graph (on every rank alike)."""
        return self.executor.last_graph

    def call(self, cmd: tuple) -> Any:
        """Run ``cmd`` on every rank; rank 0's result (for ACKED commands: every rank's, in rank order)."""
        follower_cmd = cmd
        if cmd[0] in LOGITS_INDEX:
            i = LOGITS_INDEX[cmd[0]]
            follower_cmd = cmd[:i] + ("none",) + cmd[i + 1:]
        for c in self.conns:
            c.send(follower_cmd)
        result = self.executor.execute(cmd)
        if cmd[0] not in ACKED:
            return result
        results = [result]
        timeout = CAPTURE_TIMEOUT_S if cmd[0] == "capture_graphs" else ACK_TIMEOUT_S
        for rank, c in enumerate(self.conns, start=1):
            if not c.poll(timeout):
                raise RuntimeError(f"rank {rank} did not answer {cmd[0]} within {timeout}s")
            results.append(c.recv()[1])
        return results

    def capture_graphs(self) -> dict[str, Any] | None:
        """Capture on every rank, keep the graphs all ranks captured; rank 0's report plus the failures of all."""
        if self.executor.graphs is None:
            return None
        reports = self.call(("capture_graphs",))
        common = set.intersection(*({tuple(k) for k in r["captured"]} for r in reports))
        kept = self.call(("keep_graphs", sorted(common)))
        report = dict(reports[0])
        report["captured"] = sorted(common)
        report["failed"] = {f"rank {rank}: {key}": err
                            for rank, r in enumerate(reports) for key, err in r["failed"].items()}
        report["kept_per_rank"] = kept
        return report

    def shutdown(self) -> None:
        for c in self.conns:
            try:
                c.send(("shutdown",))
            except (BrokenPipeError, OSError):
                pass  # that rank is already gone; the caller reaps it
        self.executor.stop_profile()
