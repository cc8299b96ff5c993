"""CUDA-graph capture and replay of the engine's fixed-shape forwards.

On a GPU the eager 61-layer verify is bound by Python and kernel launches
(about 2,500 kernels, each queued by the host), not by the GPU. Like SGLang's
``CudaGraphRunner``, the engine therefore captures its decode-phase forwards
once at start-up and replays them:

* ``target``: the verify forward (each segment k+1 tokens), or without
  speculation the one-token decode forward;
* ``draft_extend``: the first draft forward of a cycle, over the tokens
  verified since the draft's last update (1..k+1 per segment, padded to k+1);
* ``draft_step``: the chain draft steps (one token per segment);
* ``prefill`` and ``draft_prefill``: the prompt forwards of the target (logits
  of each segment's last token) and of the draft (no logits), each segment
  padded up to a bucket length (16, 32, ... tokens), as SGLang's "full"
  prefill graphs pad the token count to the next captured bucket
  (sglang 0.5.23 ``srt/model_executor/runner/prefill_cuda_graph_runner.py``:14-36).
  An eager prefill of the 61-layer model is some 2,500 kernel launches queued
  by Python; what that costs varies from launch to launch, and it is in every
  request's time to first token. Padding tokens write cache entries past the
  prompt, which the request's next forwards overwrite before any query can
  read them (as with a rejected speculative tail).

Each graph is one ``(kind, n, batch, kv_len)``: batch sizes are powers of two
up to ``--max-running-requests`` (plus that number), a smaller batch is padded
up with rows that write to the pool's scratch slot, as SGLang pads to the
next captured batch size; ``kv_len`` buckets (64, 128, ... and the context
length) bound how much of each request's cache attention reads, so a short
request does not pay for the whole context. A prefill graph holds at most
``prefill_tokens`` tokens (batch x bucket, the engine's prefill chunk) and reads
the smallest kv bucket that holds its bucket, so it fits a prompt (or the first
chunk of one) that starts at position 0; later chunks of a long prompt, and any
call no graph fits, run eager.

Replay-time inputs go through one packed int64 buffer per kind (token ids,
positions, slots, last rows), filled by one host-to-device copy; outputs are
the graph's own tensors, valid until the next replay (every caller reads them
at once). All graphs share one memory pool and replay on the current stream.

With several ranks every rank captures the same plan in the same order (the
warm-up forward before each capture runs the real collectives, so the ranks
stay in step), reports what it captured, and keeps only the graphs that every
rank captured, so the graph-or-eager choice, made from the phase and the batch
shape alone, is identical on all ranks. A capture that fails is reported (log line and
``/server_info``) and its shapes run eager; there is no silent fallback.

A failed capture leaves PyTorch's allocator recording into that capture's
memory pool for good (``CUDAGraph::capture_end`` throws at
``cudaStreamEndCapture`` before its ``endAllocateToPool``: pytorch
``aten/src/ATen/cuda/CUDAGraph.cpp``:147-163 at 00cbb1f8), so every later
capture into the same pool would fail with "beginAllocateToPool: already
recording to mempool_id": after a failure the next captures use a fresh pool
(and the failed graph object is kept: the allocators' stale entries for it
hold a pointer to it, ``create_allocate_filter`` in the same file).
Python's cyclic garbage collector stays off while the graphs are captured
(after one full collection): torch no longer collects in ``torch.cuda.graph``
unless ``torch.compiler.config.force_cudagraph_gc`` is set
(``torch/cuda/graphs.py``, ``graph.__enter__``), so dead objects of an earlier
engine in the same process (a test run) holding CUDA graphs, events and
memory could otherwise be destroyed in the middle of a capture. SGLang does
the same with ``freeze_gc`` (sglang 0.5.23
``srt/model_executor/runner/base_cuda_graph_runner.py``:46-62).

Timing under graphs: the forward's wall time is measured as in eager mode;
the all-reduces inside a replay are counted (the number captured) and, on
rank 0, timed by external CUDA event pairs captured around each of them
(``Communicator.begin_capture_timing`` / ``note_replay``), see the README.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import torch

from .model import Segment, TPModel
from .trace import GRAPH_CAPTURE, annotate

log = logging.getLogger("specsweep.refengine")

KINDS = ("target", "draft_extend", "draft_step", "prefill", "draft_prefill")
PREFILL_KINDS = ("prefill", "draft_prefill")
PADDED_KINDS = ("draft_extend", "prefill", "draft_prefill")  # segments may be shorter than the graph's n
MIN_KV_BUCKET = 64
MIN_PREFILL_BUCKET = 16


class GraphKey(NamedTuple):
    kind: str
    n: int  # tokens per segment
    batch: int  # segments (requests), padding included
    kv_len: int  # cache positions attention reads


@dataclass(frozen=True)
class GraphPlan:
    """Which graphs to capture: every decode kind x batch size x kv bucket, and every prefill kind x bucket
    length x batch size whose tokens fit ``prefill_tokens`` (at the smallest kv bucket holding the bucket)."""

    batch_sizes: tuple[int, ...]
    kv_buckets: tuple[int, ...]
    kinds: tuple[tuple[str, int], ...]  # (kind, tokens per segment)
    prefill_buckets: tuple[int, ...] = ()  # tokens per segment of the prefill graphs
    prefill_tokens: int = 0  # most tokens (batch x bucket) one prefill graph holds
    prefill_kinds: tuple[str, ...] = ()  # "prefill" (target), "draft_prefill" (with a draft)

    def prefill_kv(self, n: int) -> int | None:
        """The kv bucket a prefill graph of ``n`` tokens per segment reads (None: no bucket holds n)."""
        return next((kv for kv in sorted(self.kv_buckets) if kv >= n), None)

    def prefill_batches(self, n: int) -> list[int]:
        return [b for b in sorted(self.batch_sizes) if b * n <= self.prefill_tokens]

    def keys(self) -> list[GraphKey]:
        """Capture order: prefill first, then decode, largest first within a kind, so that smaller graphs
        reuse the pool's memory."""
        prefill = [GraphKey(kind, n, b, kv) for kind in self.prefill_kinds
                   for n in sorted(self.prefill_buckets, reverse=True) if (kv := self.prefill_kv(n)) is not None
                   for b in reversed(self.prefill_batches(n))]
        return prefill + [GraphKey(kind, n, b, kv) for kind, n in self.kinds
                          for b in sorted(self.batch_sizes, reverse=True)
                          for kv in sorted(self.kv_buckets, reverse=True)]

    def to_dict(self) -> dict[str, Any]:
        return {"batch_sizes": list(self.batch_sizes), "kv_buckets": list(self.kv_buckets),
                "kinds": [f"{kind}(n={n})" for kind, n in self.kinds],
                "prefill_kinds": list(self.prefill_kinds), "prefill_buckets": list(self.prefill_buckets),
                "prefill_tokens": self.prefill_tokens}


def _doubling(first: int, limit: int) -> tuple[int, ...]:
    """first, 2 first, 4 first, ... below ``limit``, then ``limit`` itself."""
    sizes, b = [], first
    while b < limit:
        sizes.append(b)
        b *= 2
    sizes.append(limit)
    return tuple(sizes)


def capture_batch_sizes(max_running: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``max_running``, then ``max_running`` itself."""
    return _doubling(1, max_running)


def kv_buckets(context_length: int) -> tuple[int, ...]:
    """64, 128, ... below the context length, then the context length (no position reaches it)."""
    if context_length < 1:
        raise ValueError(f"context_length must be >= 1, got {context_length}")
    return _doubling(min(MIN_KV_BUCKET, context_length), context_length)


def prefill_buckets(prefill_tokens: int, context_length: int) -> tuple[int, ...]:
    """16, 32, ... below the largest prefill bucket, then that one: the prefill chunk, or the context if shorter."""
    limit = min(prefill_tokens, context_length)
    if limit < 1:
        return ()
    return _doubling(min(MIN_PREFILL_BUCKET, limit), limit)


def make_plan(max_running: int, context_length: int, spec_steps: int | None, prefill_tokens: int = 0) -> GraphPlan:
    """The graphs an engine with these settings replays: decode phase, and prefill (``prefill_tokens`` > 0: the
    engine's prefill chunk; 0: prefill runs eager)."""
    if spec_steps:
        kinds: list[tuple[str, int]] = [("target", spec_steps + 1), ("draft_extend", spec_steps + 1)]
        if spec_steps > 1:
            kinds.append(("draft_step", 1))
    else:
        kinds = [("target", 1)]
    prefill_kinds: tuple[str, ...] = ()
    if prefill_tokens > 0:
        prefill_kinds = ("prefill", "draft_prefill") if spec_steps else ("prefill",)
    return GraphPlan(capture_batch_sizes(max_running), kv_buckets(context_length), tuple(kinds),
                     prefill_buckets(prefill_tokens, context_length) if prefill_kinds else (),
                     prefill_tokens if prefill_kinds else 0, prefill_kinds)


def pool_capacity(context_length: int) -> int:
    """Positions per slot in the static pool: the engine allocates up to context + 1 per request
    (a margin it keeps for the speculative tail), so the pool holds context + 2."""
    return context_length + 2


def graph_key(plan: GraphPlan, kind: str, segs: Sequence[Segment]) -> GraphKey | None:
    """The planned graph that can run this call, or None (then it runs eager).

    ``kind`` is ``target``, ``draft_extend`` (draft fed by target features), ``draft_step`` (draft fed by
    itself), ``prefill`` or ``draft_prefill``. Target and chain-step segments must all have the planned
    length; the other kinds' segments may be shorter (padded); the batch is padded up to the next planned
    size; attention must fit the graph's kv bucket.
    """
    if not segs:
        return None
    lengths = {s.length for s in segs}
    if min(lengths) < 1:
        return None
    if kind in PREFILL_KINDS:
        if kind not in plan.prefill_kinds:
            return None
        for n in sorted(plan.prefill_buckets):
            if n < max(lengths):
                continue
            batch = next((b for b in plan.prefill_batches(n) if b >= len(segs)), None)
            kv = plan.prefill_kv(n)
            if batch is not None and kv is not None and max(s.start + n for s in segs) <= kv:
                return GraphKey(kind, n, batch, kv)
        return None
    for k, n in plan.kinds:
        if k != kind:
            continue
        if kind in PADDED_KINDS:
            if max(lengths) > n:
                continue
        elif lengths != {n}:
            continue
        batch = next((b for b in sorted(plan.batch_sizes) if b >= len(segs)), None)
        need = max(s.start + n for s in segs)
        kv = next((b for b in sorted(plan.kv_buckets) if b >= need), None)
        if batch is None or kv is None:
            return None
        return GraphKey(kind, n, batch, kv)
    return None


def pack_inputs(key: GraphKey, max_batch: int, token_ids: Sequence[int], segs: Sequence[Segment],
                scratch_slot: int) -> torch.Tensor:
    """The packed host tensor one replay copies in: ``[ids | positions | slots | last rows]``,
    each region sized for ``max_batch`` segments of ``key.n`` tokens (the graph reads the first
    ``key.batch``). Padding: token 0 at the positions after a segment's real tokens, whole
    padding segments in the scratch slot at positions 0..n-1."""
    n = key.n
    ids, pos, slots, last = [0] * (max_batch * n), [0] * (max_batch * n), [scratch_slot] * max_batch, [0] * max_batch
    off = 0
    for b, s in enumerate(segs):
        ids[b * n:b * n + s.length] = token_ids[off:off + s.length]
        off += s.length
        pos[b * n:(b + 1) * n] = range(s.start, s.start + n)
        slots[b] = s.slot
        last[b] = b * n + s.length - 1
    if off != len(token_ids):
        raise ValueError(f"{len(token_ids)} token ids for segments holding {off}")
    for b in range(len(segs), max_batch):
        pos[b * n:(b + 1) * n] = range(n)
        last[b] = b * n + n - 1
    return torch.tensor(ids + pos + slots + last, dtype=torch.long)


def _error_chain(exc: BaseException) -> str:
    """The error and what it happened while handling, first cause first: a capture that fails in its body
    fails again in ``capture_end``, and the first error is the one that says why."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        # as Python's traceback follows it: the explicit cause, else the context unless suppressed
        exc = exc.__cause__ if exc.__cause__ is not None else (  # type: ignore[assignment]
            None if exc.__suppress_context__ else exc.__context__)
    return "; then ".join(f"{type(e).__name__}: {e}" for e in reversed(chain))


class _Buffers:
    """One kind's packed device input buffer and its per-batch views."""

    def __init__(self, n: int, max_batch: int, device: torch.device) -> None:
        self.n, self.max_batch = n, max_batch
        self.packed = torch.zeros((2 * n + 2) * max_batch, dtype=torch.long, device=device)

    def views(self, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        n, m, p = self.n, self.max_batch, self.packed
        return (p[:batch * n], p[m * n:m * n + batch * n].view(batch, n),
                p[2 * m * n:2 * m * n + batch], p[2 * m * n + m:2 * m * n + m + batch])


class GraphRunner:
    """Captures a ``GraphPlan`` on one rank and replays it.

    ``logits``: whether this rank computes logits (rank 0 does; followers
    capture the same forwards without the LM head). ``time_comm``: capture
    timing events around the all-reduces (where this rank times them at all).
    ``capture=False`` runs the fixed-shape forwards directly instead of
    replaying graphs (for tests on a CPU, where nothing can be captured).
    """

    def __init__(self, model: TPModel, plan: GraphPlan, logits: bool, capture: bool = True,
                 time_comm: bool = True) -> None:
        if model.pool_capacity is None:
            raise RuntimeError("GraphRunner needs the model's static pool (TPModel.enable_pool)")
        if capture and model.device.type != "cuda":
            raise RuntimeError("CUDA graphs need --device cuda")
        self.model = model
        self.plan = plan
        self.logits = logits
        self.use_graphs = capture
        self.max_batch = max(plan.batch_sizes)
        shapes = {(k.kind, k.n) for k in plan.keys()}
        self.buffers = {(kind, n): _Buffers(n, self.max_batch, model.device) for kind, n in sorted(shapes)}
        # graph, its output, its all-reduces, their timing event pairs (None: untimed)
        self.graphs: dict[GraphKey, tuple[Any, torch.Tensor | None, int, list | None]] = {}
        self.failed: dict[GraphKey, str] = {}
        self.comm_untimed: str | None = None  # why replayed all-reduces are not timed on this rank
        self.time_comm = time_comm
        self.capture_s = 0.0
        self.replays = 0
        self.replays_by_kind: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.pools = 0  # memory pools the captures used (1 unless a capture failed)
        self._failed_graphs: list[Any] = []

    # ------------------------------------------------------------ forwards
    def _forward(self, key: GraphKey, logits: bool) -> torch.Tensor | None:
        ids, pos, slots, last = self.buffers[key.kind, key.n].views(key.batch)
        m = self.model
        if key.kind == "target":
            return m.forward_target_static(ids, pos, slots, last, key.kv_len, "all" if logits else "none")
        if key.kind == "prefill":
            return m.forward_target_static(ids, pos, slots, last, key.kv_len, "last" if logits else "none")
        if key.kind == "draft_prefill":
            return m.forward_draft_static(ids, pos, slots, last, key.kv_len, "target", "none")
        source = "target" if key.kind == "draft_extend" else "draft"
        return m.forward_draft_static(ids, pos, slots, last, key.kv_len, source, "last" if logits else "none")

    def _fill_for_capture(self, key: GraphKey) -> None:
        """Inputs that touch only the scratch slot, at the bucket's last positions."""
        n, b = key.n, key.batch
        segs = [Segment(self.model.scratch_slot, max(0, key.kv_len - n), n)] * b
        host = pack_inputs(key, self.max_batch, [0] * (n * b), segs, self.model.scratch_slot)
        self.buffers[key.kind, key.n].packed.copy_(host)

    # ------------------------------------------------------------- capture
    def capture(self) -> dict[str, Any]:
        """Capture every planned graph (one warm-up forward each first); returns a report."""
        t0 = time.perf_counter()
        comm = self.model.comm
        if self.use_graphs:
            pool = torch.cuda.graph_pool_handle()
            self.pools = 1
            stream = torch.cuda.Stream(device=self.model.device)
            main = torch.cuda.current_stream(self.model.device)
        gc.collect()  # an earlier engine's dead graphs and tensors go now, not in the middle of a capture
        collecting = gc.isenabled()
        gc.disable()
        try:
            with annotate(GRAPH_CAPTURE):
                for key in self.plan.keys():
                    self._fill_for_capture(key)
                    if not self.use_graphs:
                        before = comm.count
                        out = self._forward(key, self.logits)
                        self.graphs[key] = (None, out, comm.count - before, None)
                        continue
                    # Warm-up on the capture stream (lazy library init stays out of the graph); it runs
                    # the real collectives, so every rank does it for every key, captured or not.
                    stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(stream):
                        self._forward(key, self.logits)
                    torch.cuda.current_stream().wait_stream(stream)
                    before = comm.count
                    graph = torch.cuda.CUDAGraph()
                    if self.time_comm:
                        untimed = comm.begin_capture_timing()
                    else:
                        untimed = "turned off (--disable-graph-comm-timing)"
                    try:
                        with torch.cuda.graph(graph, pool=pool, stream=stream):
                            out = self._forward(key, self.logits)
                    except Exception as exc:  # reported below and in /server_info; those shapes run eager
                        self.failed[key] = _error_chain(exc)
                        log.warning("CUDA graph capture failed for %s: %s; those shapes run eager", key,
                                    self.failed[key])
                        # Kept alive: the allocators' stale capture entries call back into this object
                        # (their filters hold a pointer to it); its pool is never used again.
                        self._failed_graphs.append(graph)
                        # torch.cuda.graph's exit leaves the capture stream current when capture_end throws
                        torch.cuda.set_stream(main)
                        torch.cuda.synchronize(self.model.device)
                        # the allocator still records into the failed capture's pool: later captures need
                        # their own (see the module docstring)
                        pool = torch.cuda.graph_pool_handle()
                        self.pools += 1
                        continue
                    finally:
                        pairs = comm.end_capture_timing()
                    if comm.active and comm.timed and untimed:
                        self.comm_untimed = untimed
                    self.graphs[key] = (graph, out, comm.count - before, pairs)
                if self.use_graphs:
                    torch.cuda.synchronize(self.model.device)
        finally:
            if collecting:
                gc.enable()
        comm.reset_stats()
        self.capture_s = time.perf_counter() - t0
        return self.report()

    def keep(self, keys: Sequence[Sequence[Any]]) -> int:
        """Drop every graph not in ``keys`` (those every rank captured); returns how many remain."""
        wanted = {GraphKey(*k) for k in keys}
        for key in [k for k in self.graphs if k not in wanted]:
            del self.graphs[key]
        return len(self.graphs)

    def report(self) -> dict[str, Any]:
        return {"captured": [list(k) for k in self.graphs],
                "failed": {str(tuple(k)): v for k, v in self.failed.items()},
                "capture_s": self.capture_s, "plan": self.plan.to_dict(), "comm_untimed": self.comm_untimed,
                "pools": self.pools}

    # -------------------------------------------------------------- replay
    def lookup(self, kind: str, segs: Sequence[Segment]) -> GraphKey | None:
        key = graph_key(self.plan, kind, segs)
        return key if key in self.graphs else None

    def run(self, key: GraphKey, token_ids: Sequence[int], segs: Sequence[Segment], logits: str) -> torch.Tensor | None:
        """Replay ``key`` for this call; returns logits as the eager forward would (``logits`` mode).

        A prefill graph gives the logits of each segment's last token only, a draft prefill graph none:
        asking those for more is an error (the engine never does).
        """
        if (key.kind == "prefill" and logits == "all") or (key.kind == "draft_prefill" and logits != "none"):
            raise ValueError(f"a {key.kind} graph cannot give logits={logits!r}")
        graph, out, allreduces, pairs = self.graphs[key]
        host = pack_inputs(key, self.max_batch, token_ids, segs, self.model.scratch_slot)
        self.buffers[key.kind, key.n].packed.copy_(host)
        if graph is None:
            out = self._forward(key, self.logits)  # no-capture mode: its all-reduces count themselves
        else:
            comm = self.model.comm
            if pairs:
                comm.harvest()  # this replay re-records the graph's events: read the last ones first
            graph.replay()
            comm.note_replay(allreduces, pairs)
        self.replays += 1
        self.replays_by_kind[key.kind] += 1
        if logits == "none" or out is None:
            return None
        B, n = len(segs), key.n
        if key.kind != "target":
            return out[:B]  # prefill and draft graphs return the last real row of each segment
        if logits == "all":
            return out[:B * n]
        return out.view(key.batch, n, -1)[:B, -1]
