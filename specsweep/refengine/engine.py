"""Rank 0's scheduler: admits requests, prefills, then runs decode or
draft-and-verify cycles over the whole running batch, one engine step at a time.

It runs in its own thread next to the aiohttp event loop; requests come in
through a thread-safe queue and results go back through each request's
``sink`` callback. All timing is taken here on rank 0 (perf_counter around
each phase; on CUDA the argmax that reads the logits synchronises the
stream, and all-reduce times come from CUDA events, see ``comm``).

A forward replayed from a CUDA graph is timed the same way, its all-reduces
by the event pairs captured with the graph. Where those could not be
captured and the collectives really communicated (more than one rank), the
request's ``*_comm_s`` keys become ``None`` for good and
``meta_info.timing_absent`` says why, rather than a sum that silently leaves
the replayed collectives out.
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import faults
from .config import request_token_limit
from .model import Segment
from .spec import SimulatedAcceptance, greedy_accept
from .trace import DECODE, DRAFT, DRAFT_PREFILL, PREFILL, VERIFY
from .worker import Driver

log = logging.getLogger("specsweep.refengine")

TIMING_KEYS = ("draft_s", "verify_s", "verify_comm_s", "allreduce_ct", "forward_ct")
EXTRA_TIMING_KEYS = ("prefill_s", "prefill_comm_s", "draft_comm_s", "draft_allreduce_ct", "draft_forward_ct",
                     "verify_graph_ct", "prefill_graph_ct")
GRAPH_COMM_ABSENT = ("all-reduces replayed inside a CUDA graph were counted but not timed: no timing events "
                     "could be captured with them (see cuda_graph.comm_untimed in /server_info; run with "
                     "--disable-cuda-graph to time them in-engine, or split a profiler trace)")


@dataclass
class Request:
    """One generation request as the scheduler tracks it."""

    input_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool
    sink: Callable[[dict[str, Any]], None]
    stream: bool = True  # False: only the final snapshot goes to the sink (less work for rank 0's HTTP thread)
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.perf_counter)
    output_ids: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    slot: int = -1
    draft_len: int = 0
    verify_ct: int = 0
    timing: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(TIMING_KEYS + EXTRA_TIMING_KEYS, 0.0))
    timing_absent: dict[str, str] = field(default_factory=dict)  # key -> why its value is None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finish_reason: dict[str, Any] | None = None
    aborted: bool = False
    sim: SimulatedAcceptance | None = None
    # accepted_drafts[j] = verify steps that accepted exactly j draft tokens (bonus excluded), j = 0..k:
    # SGLang's spec_correct_drafts_histogram (managers/schedule_batch.py).
    accepted_drafts: list[int] = field(default_factory=list)


class Engine:
    """Continuous batching over one ``Driver``; thread-safe ``submit``."""

    def __init__(
        self,
        driver: Driver,
        eos_token_id: int,
        spec_steps: int | None,
        simulate_acc_len: float | None,
        seed: int,
        max_running: int,
        context_length: int,
        chunk_tokens: int,
        metrics: Any = None,
        step_delay_s: float = 0.0,
        step_slowdown: float = 0.0,
    ) -> None:
        self.driver = driver
        # test-only faults (refengine.faults); 0 outside tests
        self.step_delay_s = step_delay_s
        self.step_slowdown = step_slowdown
        self.eos = eos_token_id
        self.k = spec_steps
        self.simulate = simulate_acc_len
        self.seed = seed
        self.max_running = max_running
        self.context_length = context_length
        self.chunk_tokens = chunk_tokens
        self.metrics = metrics
        self.comm = driver.model.comm
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.free_slots = list(range(max_running))
        self.lifetime = {"completion_tokens": 0, "verify_ct": 0, "requests": 0, "steps": 0}
        self.recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=4096)
        self.profile_steps_left: int | None = None
        self.profile_files: list[str] = []
        self.error: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="refengine-scheduler", daemon=True)

    # ------------------------------------------------------------------ api
    def start(self) -> None:
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, req: Request) -> None:
        self.inbox.put(req)

    def control(self, fn: Callable[[], Any]) -> "queue.Queue[Any]":
        """Run ``fn`` on the scheduler thread between steps; its result (or exception) lands in the returned queue."""
        out: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.inbox.put((fn, out))
        return out

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the scheduler to finish its current step and exit; wait up to ``timeout_s``."""
        self._stop = True
        self.inbox.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def max_request_tokens(self) -> int:
        """Largest prompt + max_new_tokens a request may ask for."""
        return request_token_limit(self.context_length, self.k)

    def gen_throughput(self, window_s: float = 10.0) -> float | None:
        """Generated tokens per second over the last ``window_s`` (None when idle that long)."""
        now = time.perf_counter()
        recent = list(self.recent)  # snapshot: the scheduler thread appends concurrently
        toks = [(t, n) for t, n in recent if now - t <= window_s]
        if len(toks) < 2:
            return None
        span = now - toks[0][0]
        return sum(n for _, n in toks[1:]) / span if span > 0 else None

    def avg_spec_accept_length(self) -> float | None:
        if not self.k or not self.lifetime["verify_ct"]:
            return None
        return self.lifetime["completion_tokens"] / self.lifetime["verify_ct"]

    # ------------------------------------------------------------- profile
    def start_profile(self, output_dir: str, num_steps: int | None) -> None:
        tag = f"{time.time():.0f}"
        self.driver.call(("profile_start", output_dir, tag))
        self.profile_steps_left = num_steps

    def stop_profile(self) -> list[str]:
        """Stop the profiler on every rank; the trace files (one per rank) exist when this returns."""
        paths = [p for p in self.driver.call(("profile_stop",)) if p]
        self.profile_steps_left = None
        self.profile_files.extend(paths)
        return paths

    # ---------------------------------------------------------------- loop
    def _run(self) -> None:
        try:
            while not self._stop:
                self._drain(block=not self.running and not self.waiting)
                if self._stop:
                    break
                self._admit()
                if self.running:
                    self._step()
        except BaseException as exc:  # recorded and re-raised: the server exits non-zero on it
            self.error = exc
            log.exception("scheduler failed")
            for r in self.running + self.waiting:
                if r.finish_reason is None:  # no driver calls here: the ranks may be what failed
                    r.finish_reason = {"type": "abort", "message": f"engine error: {exc}"}
                    r.sink(self.snapshot(r))
            raise

    def _drain(self, block: bool) -> None:
        while True:
            try:
                item = self.inbox.get(block=block)
            except queue.Empty:
                return
            block = False
            if item is None:
                return
            if isinstance(item, Request):
                self.waiting.append(item)
            else:
                fn, out = item
                try:
                    out.put(fn())
                except Exception as exc:  # handed back to the HTTP handler, which reports it
                    out.put(exc)

    def _admit(self) -> None:
        for r in [r for r in self.waiting if r.aborted]:
            self.waiting.remove(r)
            self._finish(r, {"type": "abort"})
        new = []
        while self.waiting and self.free_slots:
            r = self.waiting.pop(0)
            r.slot = self.free_slots.pop()
            if self.simulate is not None and self.k:
                r.sim = SimulatedAcceptance(self.simulate, self.k + 1, self.seed, r.input_ids)
            cap = len(r.input_ids) + r.max_new_tokens + (self.k or 0) + 2
            self.driver.call(("alloc", r.slot, cap))
            r.tokens = list(r.input_ids)
            new.append(r)
        if new:
            self._prefill(new)

    def _pack_chunk(
        self, reqs: list[Request], spans: dict[int, tuple[int, int | None]]
    ) -> list[tuple[Request, int, int]]:
        """(request, start, length) of the prompt pieces one bounded forward takes.

        ``spans`` maps ``id(request)`` to (next position, end position or None for
        the whole prompt); requests are taken in order until ``chunk_tokens`` is spent.
        """
        budget = self.chunk_tokens
        batch: list[tuple[Request, int, int]] = []
        for r in reqs:
            if id(r) not in spans or budget <= 0:
                continue
            start, end = spans[id(r)]
            n = min((len(r.input_ids) if end is None else end) - start, budget)
            batch.append((r, start, n))
            budget -= n
        return batch

    @staticmethod
    def _chunk_inputs(batch: list[tuple[Request, int, int]]) -> tuple[list[int], list[Segment]]:
        ids = list(itertools.chain.from_iterable(r.input_ids[s:s + n] for r, s, n in batch))
        return ids, [Segment(r.slot, s, n) for r, s, n in batch]

    def _prefill(self, reqs: list[Request]) -> None:
        """Prompt forwards in chunks of at most ``chunk_tokens`` tokens, several prompts per forward."""
        pending = {id(r): 0 for r in reqs}  # next position to prefill
        last_logits: dict[int, torch.Tensor] = {}
        while pending:
            batch = self._pack_chunk(reqs, {k: (s, None) for k, s in pending.items()})
            ids, segs = self._chunk_inputs(batch)
            self.comm.reset_stats()
            t0 = time.perf_counter()
            logits = self.driver.call(("target", ids, segs, "last", PREFILL))
            toks = logits.argmax(dim=-1).tolist()
            dt = time.perf_counter() - t0
            graph = self.driver.last_graph
            _, comm_s = self.comm.stats()
            for i, (r, s, n) in enumerate(batch):
                r.timing["prefill_s"] += dt
                r.timing["prefill_graph_ct"] += int(graph)  # type: ignore[operator]
                _add_comm(r, "prefill_comm_s", comm_s)
                if s + n == len(r.input_ids):
                    del pending[id(r)]
                    last_logits[id(r)] = toks[i]
                else:
                    pending[id(r)] = s + n
        if self.k:
            self._draft_prefill(reqs)
        for r in reqs:
            self.running.append(r)
            self._emit(r, [last_logits[id(r)]])

    def _draft_prefill(self, reqs: list[Request]) -> None:
        """Fill the draft's KV cache over the prompt (all but its last token), in bounded chunks.

        The rest (last prompt token + first output token) goes through the first
        speculation cycle's draft extend, so that a cycle's batch never exceeds
        ``max_running * (k + 1)`` tokens, the size the all-reduce buffers were made for.
        """
        pending = {id(r): len(r.input_ids) - 1 for r in reqs if len(r.input_ids) > 1}
        while pending:
            batch = self._pack_chunk(reqs, {id(r): (r.draft_len, pending[id(r)]) for r in reqs if id(r) in pending})
            ids, segs = self._chunk_inputs(batch)
            self.comm.reset_stats()
            t0 = time.perf_counter()
            self.driver.call(("draft", ids, segs, "target", "none", DRAFT_PREFILL))
            if self.driver.model.device.type == "cuda":
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            graph = self.driver.last_graph
            _, comm_s = self.comm.stats()
            for r, s, n in batch:
                r.draft_len = s + n
                r.timing["prefill_s"] += dt
                r.timing["prefill_graph_ct"] += int(graph)  # type: ignore[operator]
                _add_comm(r, "prefill_comm_s", comm_s)
                if r.draft_len >= pending[id(r)]:
                    del pending[id(r)]

    def _step(self) -> None:
        live = [r for r in self.running if r.finish_reason is None and not r.aborted]
        for r in self.running:
            if r.aborted and r.finish_reason is None:
                self._finish(r, {"type": "abort"})
        self.running = live
        if not live:
            return
        if self.k:
            self._spec_cycle(live)
        else:
            self._decode(live)
        self.lifetime["steps"] += 1
        if self.profile_steps_left is not None:
            self.profile_steps_left -= 1
            if self.profile_steps_left <= 0:
                self.stop_profile()
        self.running = [r for r in self.running if r.finish_reason is None]
        if self.metrics:
            self.metrics.set_queue(len(self.running), len(self.waiting))

    def _decode(self, reqs: list[Request]) -> None:
        """No speculation: one target forward of one token per request (counted as a verify step)."""
        segs = [Segment(r.slot, len(r.tokens) - 1, 1) for r in reqs]
        ids = [r.tokens[-1] for r in reqs]
        self.comm.reset_stats()
        t0 = time.perf_counter()
        toks = self.driver.call(("target", ids, segs, "all", DECODE)).argmax(dim=-1).tolist()
        dt = time.perf_counter() - t0
        graph = self.driver.last_graph
        ct, comm_s = self.comm.stats()
        self._test_fault(t0)
        for r, tok in zip(reqs, toks):
            r.verify_ct += 1
            self._account(r, 0.0, 0.0, 0, 0, dt, comm_s, ct, graph)
            self._emit(r, [tok])
        if self.metrics:
            self.metrics.observe_step(0.0, dt, comm_s, ct, None)

    def _spec_cycle(self, reqs: list[Request]) -> None:
        """Draft k tokens per request (extend + k-1 chain steps), verify k+1 positions, accept."""
        k = self.k
        assert k is not None
        self.comm.reset_stats()
        t0 = time.perf_counter()
        # Extend the draft over the tokens verified since its last update (features from the target).
        segs = [Segment(r.slot, r.draft_len, len(r.tokens) - r.draft_len) for r in reqs]
        ids = list(itertools.chain.from_iterable(r.tokens[r.draft_len:] for r in reqs))
        drafts = [[t] for t in self.driver.call(("draft", ids, segs, "target", "last", DRAFT)).argmax(dim=-1).tolist()]
        for j in range(1, k):
            segs = [Segment(r.slot, len(r.tokens) - 1 + j, 1) for r in reqs]
            ids = [d[-1] for d in drafts]
            out = self.driver.call(("draft", ids, segs, "draft", "last", DRAFT))
            for d, t in zip(drafts, out.argmax(dim=-1).tolist()):
                d.append(t)
        t1 = time.perf_counter()
        draft_ct, draft_comm = self.comm.stats()
        self.comm.reset_stats()
        segs = [Segment(r.slot, len(r.tokens) - 1, k + 1) for r in reqs]
        ids = list(itertools.chain.from_iterable([r.tokens[-1]] + d for r, d in zip(reqs, drafts)))
        out = self.driver.call(("target", ids, segs, "all", VERIFY))
        target = out.argmax(dim=-1).view(len(reqs), k + 1).tolist()
        t2 = time.perf_counter()
        graph = self.driver.last_graph
        ct, comm_s = self.comm.stats()
        self._test_fault(t0)
        accepted_total = 0
        for r, d, y in zip(reqs, drafts, target):
            n = len(r.tokens) - 1
            length = r.sim.next() if r.sim is not None else greedy_accept(d, y) + 1
            _count_accepted(r, k, length - 1)
            r.verify_ct += 1
            r.draft_len = n + 1
            self._account(r, t1 - t0, draft_comm, draft_ct, k, t2 - t1, comm_s, ct, graph)
            accepted_total += length
            self._emit(r, y[:length])
        if self.metrics:
            self.metrics.observe_step(t1 - t0, t2 - t1, comm_s, ct, accepted_total / len(reqs))

    def _test_fault(self, t0: float) -> None:
        """The test-only faults (``refengine.faults``): after a step's compute, before its tokens go
        out, wait the fixed delay plus ``step_slowdown`` x the step's own duration since ``t0``."""
        pause = self.step_delay_s
        if self.step_slowdown:
            pause += self.step_slowdown * (time.perf_counter() - t0)
        if pause:
            faults.pause(pause)

    def _account(self, r: Request, draft_s: float, draft_comm: float | None, draft_ct: int, draft_fw: int,
                 verify_s: float, comm_s: float | None, ct: int, graph: bool) -> None:
        t = r.timing
        t["draft_s"] += draft_s  # type: ignore[operator]
        _add_comm(r, "draft_comm_s", draft_comm)
        t["draft_allreduce_ct"] += draft_ct  # type: ignore[operator]
        t["draft_forward_ct"] += draft_fw  # type: ignore[operator]
        t["verify_s"] += verify_s  # type: ignore[operator]
        _add_comm(r, "verify_comm_s", comm_s)
        t["allreduce_ct"] += ct  # type: ignore[operator]
        t["forward_ct"] += 1  # type: ignore[operator]
        t["verify_graph_ct"] += int(graph)  # type: ignore[operator]

    # ------------------------------------------------------------- outputs
    def _emit(self, r: Request, toks: list[int]) -> None:
        """Append tokens (cut at max_new_tokens / eos), notify the request's sink, finish if done."""
        room = r.max_new_tokens - len(r.output_ids)
        toks = toks[:room]
        reason = None
        if not r.ignore_eos and self.eos in toks:
            toks = toks[: toks.index(self.eos) + 1]
            reason = {"type": "stop", "matched": self.eos}
        r.output_ids.extend(toks)
        r.tokens.extend(toks)
        now = time.perf_counter()
        self.recent.append((now, len(toks)))
        if r.first_token_at is None:
            r.first_token_at = now
            if self.metrics:
                self.metrics.observe_first_token(now - r.created)
        elif self.metrics and toks:
            self.metrics.observe_inter_token((now - (r.last_token_at or now)) / len(toks))
        r.last_token_at = now
        if reason is None and len(r.output_ids) >= r.max_new_tokens:
            reason = {"type": "length", "length": r.max_new_tokens}
        if reason is not None:
            self._finish(r, reason)
        elif r.stream:
            r.sink(self.snapshot(r))

    def _finish(self, r: Request, reason: dict[str, Any]) -> None:
        if r.finish_reason is not None:
            return
        r.finish_reason = reason
        if r.slot >= 0:
            self.driver.call(("free", r.slot))
            self.free_slots.append(r.slot)
        if reason["type"] != "abort":
            self.lifetime["requests"] += 1
            if self.k:
                self.lifetime["completion_tokens"] += len(r.output_ids)
                self.lifetime["verify_ct"] += r.verify_ct
            if self.metrics:
                self.metrics.observe_finished(r, time.perf_counter() - r.created, self.avg_spec_accept_length())
        r.sink(self.snapshot(r))

    def snapshot(self, r: Request) -> dict[str, Any]:
        """Cumulative state of a request as the HTTP layer turns it into a chunk."""
        meta: dict[str, Any] = {
            "id": r.rid,
            "prompt_tokens": len(r.input_ids),
            "completion_tokens": len(r.output_ids),
            "finish_reason": r.finish_reason,
            "timing": {k: (int(v) if k.endswith("_ct") and v is not None else v) for k, v in r.timing.items()},
        }
        if r.timing_absent:
            meta["timing_absent"] = dict(r.timing_absent)
        if self.k:
            meta["spec_verify_ct"] = r.verify_ct
            if r.verify_ct:
                meta["spec_accept_length"] = len(r.output_ids) / r.verify_ct
            meta["spec_correct_drafts_histogram"] = list(r.accepted_drafts) or [0] * (self.k + 1)
        if r.finish_reason is not None:
            meta["e2e_latency"] = time.perf_counter() - r.created
        return {"output_ids": list(r.output_ids), "meta_info": meta, "finished": r.finish_reason is not None}


def _add_comm(r: Request, key: str, seconds: float | None) -> None:
    """Add a communication time to a request's sum; an unmeasured one makes the sum unknown for good."""
    if seconds is None:
        r.timing[key] = None
        r.timing_absent[key] = GRAPH_COMM_ABSENT
    elif r.timing[key] is not None:
        r.timing[key] += seconds  # type: ignore[operator]


def _count_accepted(r: Request, k: int, accepted: int) -> None:
    """One verify that accepted ``accepted`` of ``k`` draft tokens (the histogram has k + 1 bins)."""
    if not r.accepted_drafts:
        r.accepted_drafts = [0] * (k + 1)
    r.accepted_drafts[accepted] += 1
