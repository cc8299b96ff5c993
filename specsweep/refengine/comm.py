"""All-reduce backends behind one interface, with per-call instrumentation.

The engine's question is "what share of a verify step is communication", so
every backend counts its calls and times them: on the CPU with
``perf_counter`` around the (synchronous) call, on CUDA with a pair of CUDA
events per call that are read only when the caller asks for the totals (one
synchronisation per forward, which the engine does anyway to read logits).

Backends:

* ``gloo``: ``torch.distributed`` on CPU tensors (the slow, generic path).
* ``shm``: a shared-memory all-reduce between the local ranks, the CPU
  analogue of a custom all-reduce kernel: each rank copies its tensor into its
  own slot of a ``/dev/shm`` segment, bumps a generation flag, spins until
  every peer's flag reached the same generation, then sums the slots in rank
  order (so every rank gets bit-identical results). Slots are double-buffered
  by generation parity, which makes one barrier per call enough: a rank can
  only overwrite parity ``p`` at generation ``g+2`` after every peer has
  published ``g+1``, i.e. finished reading ``g``.
* ``nccl``: ``torch.distributed`` NCCL on CUDA tensors.
* ``symm_mem``: PyTorch symmetric memory on CUDA: the input is copied into a
  symmetric buffer and reduced by ``torch.ops.symm_mem.one_shot_all_reduce_out``
  (peer loads, no multicast). NVLink multicast is never used.

How the ranks find each other (the ``CommSpec`` rank 0 prepares, the store,
the shm segment) is ``rendezvous``. A requested backend that cannot work
raises ``CommError``; there is no silent fallback. With one rank every
backend is validated and then a no-op.

Inside CUDA-graph capture (``refengine.cudagraph``) the Python of a call runs
once, at capture; a replay runs the collectives without it. So a timed rank
captures an *external* CUDA event pair around each collective
(``torch.cuda.Event(enable_timing=True, external=True)``: the graph gets event
record nodes, and every replay re-records the events), and the graph runner
hands those pairs to ``note_replay`` after each replay; they are read like the
eager events, once per forward, and before the next replay overwrites them
(``harvest``). Where such events cannot be captured, the replayed calls are
counted but ``stats`` reports no seconds (``None``) instead of a partial sum. Both nccl
(``torch.distributed`` collectives are capturable once the communicator is
initialised, which ``TorchDistComm`` does with a warm-up collective) and
symm_mem (a copy into the fixed symmetric buffer plus the one-shot kernel,
which synchronises through its signal pads on every launch) can be captured.

Test-only fault: ``SPECSWEEP_TEST_CORRUPT_ALLREDUCE=<factor>`` in the
server's environment makes every all-reduce multiply its result by
``factor`` on every rank (``CorruptedComm``), i.e. a numerically broken
kernel that still runs at full speed. It exists so that the tests can prove
the output-agreement check flags such a configuration; nothing else sets it,
and the server logs a warning whenever it is on.
"""

from __future__ import annotations

import mmap
import os
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np
import torch

from .rendezvous import (
    CACHE_LINE,
    CommError,
    CommSpec,
    interface_of,
    shm_data_offset,
    shm_segment_bytes,
    shm_slot_bytes,
    tcp_store,
)
from .trace import ALL_REDUCE_PREFIX, annotate

SPIN_ONLY = 256  # flag checks (~0.1 us each) before yielding the core
SPIN_YIELD = 2048  # then sched_yield() checks, then sleeps
SLEEP_S = 50e-6
SAFE_CUDA_ENV = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0"}


class Communicator:
    """Base class: in-place sum all-reduce plus call counting and timing."""

    name = "base"

    def __init__(self, rank: int, world_size: int, device: torch.device, timed: bool = True,
                 active: bool | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.active = world_size > 1 if active is None else active
        self.device = device
        self.timed = timed
        self.count = 0
        self.unmeasured = 0  # calls since reset_stats whose time nobody could take (replayed in a CUDA graph)
        self._seconds = 0.0
        self._events: list[tuple[Any, Any]] = []
        self._capture_pairs: list[tuple[Any, Any]] | None = None  # filled while a timed capture runs

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """Sum ``t`` over all ranks in place and return it."""
        self.count += 1
        if not self.active:
            return t
        # On a CPU the timer wraps the profiler range as well: under the profiler the
        # engine's timing and the trace's range then measure the same span (entering
        # and leaving a range costs some 30-60 us of CPU, which would otherwise be in
        # the trace's figure only); without the profiler the range is a no-op.
        t0 = time.perf_counter()
        with annotate(ALL_REDUCE_PREFIX + self.name):
            if not self.timed:
                self._all_reduce(t)
            elif self._capturing():
                self._all_reduce_captured(t)
            elif self.device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self._all_reduce(t)
                end.record()
                self._events.append((start, end))
            else:
                self._all_reduce(t)
        if self.timed and self.device.type != "cuda":
            self._seconds += time.perf_counter() - t0
        return t

    def _capturing(self) -> bool:
        return self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()

    def _all_reduce_captured(self, t: torch.Tensor) -> None:
        pairs = self._capture_pairs
        if pairs is None:
            self._all_reduce(t)
            return
        start = torch.cuda.Event(enable_timing=True, external=True)
        end = torch.cuda.Event(enable_timing=True, external=True)
        start.record()
        self._all_reduce(t)
        end.record()
        pairs.append((start, end))

    def begin_capture_timing(self) -> str | None:
        """Time each collective of the graph about to be captured; returns why not (None: it will)."""
        self._capture_pairs = None
        if not (self.active and self.timed and self.device.type == "cuda"):
            return "this rank does not time its all-reduces"
        try:
            torch.cuda.Event(enable_timing=True, external=True)
        except TypeError as exc:  # a torch without external events: replayed calls stay unmeasured
            return f"torch.cuda.Event(external=True) unavailable ({exc})"
        self._capture_pairs = []
        return None

    def end_capture_timing(self) -> list[tuple[Any, Any]] | None:
        """The event pairs captured since ``begin_capture_timing`` (None if none were)."""
        pairs, self._capture_pairs = self._capture_pairs, None
        return pairs

    def harvest(self) -> None:
        """Read the pending events now (before a replay re-records a graph's events)."""
        if self._events:
            self._events[-1][1].synchronize()
            self._seconds += sum(s.elapsed_time(e) for s, e in self._events) / 1000.0
            self._events.clear()

    def note_replay(self, calls: int, pairs: list[tuple[Any, Any]] | None = None) -> None:
        """Count ``calls`` all-reduces that a CUDA-graph replay ran, timed by the graph's event ``pairs``
        (if it has them; otherwise, when they really communicated, their time is unknown)."""
        self.count += calls
        if not self.active:
            return
        if pairs is None or len(pairs) != calls:
            self.unmeasured += calls
        else:
            self._events.extend(pairs)

    def _all_reduce(self, t: torch.Tensor) -> None:
        raise NotImplementedError

    def stats(self) -> tuple[int, float | None]:
        """(calls, seconds) since the last ``reset_stats``; on CUDA this waits for the last event.

        Seconds is ``None`` when some of those calls communicated inside a CUDA-graph
        replay without timing events: their time was not measured, and a sum of the
        others would look complete.
        """
        self.harvest()
        return self.count, (None if self.unmeasured else self._seconds)

    def reset_stats(self) -> None:
        self.stats()
        self.count = 0
        self.unmeasured = 0
        self._seconds = 0.0

    def describe(self) -> str:
        note = ", all-reduce is a no-op" if not self.active else ""
        return f"{self.name} (world_size={self.world_size}{note})"

    def close(self) -> None:
        """Release resources; safe to call twice."""


class ShmComm(Communicator):
    """Shared-memory all-reduce between local CPU ranks (see module docstring)."""

    name = "shm"

    def __init__(self, rank: int, spec: CommSpec, timed: bool = True) -> None:
        super().__init__(rank, spec.world_size, torch.device("cpu"), timed, spec.active)
        self.max_bytes = spec.max_bytes
        self.timeout_s = spec.timeout_s
        self.gen = 0
        self._views: dict[tuple[torch.dtype, int], tuple[list[torch.Tensor], list[list[torch.Tensor]]]] = {}
        self._mm: mmap.mmap | None = None
        self._ppid = os.getppid()
        if not spec.active:
            return
        if spec.shm_path is None:
            raise CommError("shm backend: no shared-memory segment was created by rank 0")
        fd = os.open(spec.shm_path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size != shm_segment_bytes(spec.world_size, spec.max_bytes):
                raise CommError(f"shm backend: segment {spec.shm_path} has size {size}, expected another layout")
            self._mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        ws = spec.world_size
        self.flags = np.frombuffer(self._mm, dtype=np.int64, count=ws * CACHE_LINE // 8)
        self._flag_idx = [r * CACHE_LINE // 8 for r in range(ws)]
        slot = shm_slot_bytes(spec.max_bytes)
        base = shm_data_offset(ws)
        self._slots = [
            [torch.frombuffer(self._mm, dtype=torch.uint8, count=slot, offset=base + (p * ws + r) * slot)
             for r in range(ws)]
            for p in range(2)
        ]
        self._peers = [self._flag_idx[r] for r in range(ws) if r != rank]
        self._mine = self._flag_idx[rank]

    def _views_for(self, dtype: torch.dtype, numel: int) -> tuple[list[torch.Tensor], list[list[torch.Tensor]]]:
        key = (dtype, numel)
        v = self._views.get(key)
        if v is None:
            nbytes = numel * torch.empty((), dtype=dtype).element_size()
            if nbytes > self.max_bytes:
                raise CommError(f"shm all-reduce of {nbytes} bytes exceeds the segment's {self.max_bytes}-byte slots")
            per_parity = [[s[:nbytes].view(dtype) for s in self._slots[p]] for p in range(2)]
            v = ([per_parity[p][self.rank] for p in range(2)], per_parity)
            self._views[key] = v
        return v

    def _all_reduce(self, t: torch.Tensor) -> None:
        flat = t.view(-1)
        mine, slots = self._views_for(t.dtype, flat.numel())
        g = self.gen + 1
        p = g & 1
        mine[p].copy_(flat)
        self.flags[self._mine] = g  # x86 TSO: the slot stores above are visible before this one
        self._wait(g)
        s = slots[p]
        if len(s) == 1:
            flat.copy_(s[0])
        else:
            torch.add(s[0], s[1], out=flat)
        for extra in s[2:]:
            flat.add_(extra)
        self.gen = g

    def _wait(self, g: int) -> None:
        """Wait until every peer published generation ``g``.

        Three phases, because the box may be shared: a pure spin (the common
        case: peers do the same work and arrive within microseconds), then
        ``sched_yield`` (hands the core to a descheduled peer on an
        oversubscribed machine, and releases the GIL for rank 0's HTTP
        thread), then short sleeps so a long wait (a peer still prefilling, a
        loaded machine) does not burn a core.
        """
        flags = self.flags
        deadline = 0.0
        for idx in self._peers:
            spins = 0
            while flags[idx] < g:
                spins += 1
                if spins < SPIN_ONLY:
                    continue
                if spins < SPIN_YIELD:
                    os.sched_yield()
                    continue
                time.sleep(SLEEP_S)
                if spins & 1023 == 0:
                    now = time.monotonic()
                    if deadline == 0.0:
                        deadline = now + self.timeout_s
                    elif now > deadline:
                        raise CommError(f"shm all-reduce: peer flag {idx} stuck below {g} for {self.timeout_s}s")
                    if self.rank != 0 and os.getppid() != self._ppid:
                        raise CommError("shm all-reduce: rank 0 is gone")

    def close(self) -> None:
        self._views.clear()
        self._slots = []
        self.flags = None  # type: ignore[assignment]
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # a view is still referenced; the mapping goes with the process
            self._mm = None


class TorchDistComm(Communicator):
    """gloo (CPU) or NCCL (CUDA) through ``torch.distributed``."""

    def __init__(self, rank: int, spec: CommSpec, device: torch.device, timed: bool = True) -> None:
        super().__init__(rank, spec.world_size, device, timed, spec.active)
        self.name = "gloo" if spec.backend == "gloo" else "nccl"
        self._initialised = False
        if not spec.active:
            return
        import torch.distributed as dist

        if self.name == "gloo" and not dist.is_gloo_available():
            raise CommError("gloo backend requested but torch.distributed was built without gloo")
        if self.name == "nccl" and not dist.is_nccl_available():
            raise CommError("nccl backend requested but torch.distributed was built without NCCL")
        kwargs: dict[str, Any] = {}
        if self.name == "nccl":
            kwargs["device_id"] = device
        else:
            # gloo's own sockets: on the interface of spec.host (else gloo picks the address the hostname
            # resolves to, often a LAN address). A GLOO_SOCKET_IFNAME set by the user wins.
            ifname = interface_of(spec.host)
            if ifname:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
        dist.init_process_group(
            backend=self.name,
            store=tcp_store(spec, rank),
            rank=rank,
            world_size=spec.world_size,
            timeout=timedelta(seconds=spec.timeout_s),
            **kwargs,
        )
        self._initialised = True
        self._dist = dist
        # One warm-up collective so that connection set-up is not billed to the first request
        # (through dist directly: a subclass's _all_reduce may not be ready yet).
        dist.all_reduce(torch.zeros(8, device=device))

    def _all_reduce(self, t: torch.Tensor) -> None:
        self._dist.all_reduce(t)

    def close(self) -> None:
        if self._initialised:
            self._initialised = False
            self._dist.destroy_process_group()


class SymmMemComm(TorchDistComm):
    """One-shot all-reduce through PyTorch symmetric memory (CUDA, no multicast)."""

    def __init__(self, rank: int, spec: CommSpec, device: torch.device, timed: bool = True) -> None:
        nccl_spec = CommSpec(**{**spec.__dict__, "backend": "nccl"})
        super().__init__(rank, nccl_spec, device, timed)
        self.name = "symm_mem"
        self.max_bytes = spec.max_bytes
        if not spec.active:
            return
        try:
            import torch.distributed._symmetric_memory as symm_mem
        except ImportError as exc:
            raise CommError(f"symm_mem backend: torch.distributed._symmetric_memory unavailable ({exc})") from exc
        group_name = self._dist.group.WORLD.group_name
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None:
            enable(group_name)
        self.group_name = group_name
        try:
            self._buf = symm_mem.empty(spec.max_bytes, dtype=torch.uint8, device=device)
            self._handle = symm_mem.rendezvous(self._buf, group_name)
        except Exception as exc:  # surfaced, not swallowed: the engine refuses to start
            raise CommError(f"symm_mem backend unavailable on this machine: {exc}") from exc
        self._views: dict[tuple[torch.dtype, int], torch.Tensor] = {}
        self._all_reduce(torch.ones(8, device=device))

    def _all_reduce(self, t: torch.Tensor) -> None:
        flat = t.view(-1)
        key = (t.dtype, flat.numel())
        buf = self._views.get(key)
        if buf is None:
            nbytes = flat.numel() * flat.element_size()
            if nbytes > self.max_bytes:
                raise CommError(f"symm_mem all-reduce of {nbytes} bytes exceeds the {self.max_bytes}-byte buffer")
            buf = self._buf[:nbytes].view(t.dtype)
            self._views[key] = buf
        buf.copy_(flat)
        torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", self.group_name, flat)


def check_cuda_env(env: dict[str, str]) -> list[str]:
    """Settings that must hold on the GPU machine (no NVLink multicast); returns problems."""
    return [
        f"{k}={env[k]} is set, but this engine must run with {k}={v} (NVLink multicast is not allowed)"
        for k, v in SAFE_CUDA_ENV.items()
        if k in env and env[k] != v
    ]


def make_communicator(rank: int, spec: CommSpec, timed: bool = True) -> Communicator:
    """Join the communicator described by ``spec`` as ``rank``; raises ``CommError`` if impossible."""
    if spec.fault is not None:
        return CorruptedComm(make_communicator(rank, replace(spec, fault=None), timed), spec.fault)  # type: ignore[return-value]
    if spec.backend in ("gloo", "shm"):
        if spec.device != "cpu":
            raise CommError(f"{spec.backend} all-reduce works on cpu tensors only (device={spec.device})")
        if spec.backend == "shm":
            return ShmComm(rank, spec, timed)
        return TorchDistComm(rank, spec, torch.device("cpu"), timed)
    if spec.backend in ("nccl", "symm_mem"):
        if spec.device != "cuda" or not torch.cuda.is_available():
            raise CommError(f"{spec.backend} all-reduce needs CUDA, which is not available here")
        if torch.cuda.device_count() < spec.world_size:
            raise CommError(f"{spec.backend}: --tp-size {spec.world_size} needs {spec.world_size} GPUs, "
                            f"{torch.cuda.device_count()} visible")
        problems = check_cuda_env(dict(os.environ))
        if problems:
            raise CommError("; ".join(problems))
        for k, v in SAFE_CUDA_ENV.items():
            os.environ.setdefault(k, v)
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        if spec.backend == "nccl":
            return TorchDistComm(rank, spec, device, timed)
        return SymmMemComm(rank, spec, device, timed)
    raise CommError(f"unknown all-reduce backend {spec.backend!r}")


TEST_FAULT_ENV = "SPECSWEEP_TEST_CORRUPT_ALLREDUCE"


def parse_test_fault(value: str | None) -> float | None:
    """The factor of ``SPECSWEEP_TEST_CORRUPT_ALLREDUCE`` (unset or empty = no fault); TEST ONLY."""
    if value is None or value.strip() == "":
        return None
    try:
        return float(value)
    except ValueError as exc:
        raise ValueError(f"{TEST_FAULT_ENV}={value!r} is not a number") from exc


class CorruptedComm:
    """TEST ONLY: a communicator whose every all-reduce result is scaled by ``factor``.

    Everything else (counts, timing, graph bookkeeping) is the wrapped
    communicator's, so the configuration looks healthy and fast: only its
    outputs are wrong, which is what the output-agreement check must catch.
    """

    def __init__(self, inner: Communicator, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        self.inner.all_reduce(t)
        return t.mul_(self.factor)

    def describe(self) -> str:
        return f"{self.inner.describe()} [TEST FAULT: results x {self.factor}]"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
