"""PyTorch profiler traces, per rank and per forward: communication vs compute vs idle.

Input: the Chrome-trace JSON (``*.trace.json.gz``) that ``torch.profiler``
exports, one file per tensor-parallel rank (SGLang names them
``<profile_id>-TP-<rank>[-DP-..][-PP-..][-EP-..].trace.json.gz``,
``managers/scheduler_components/profiler_manager.py`` ``_stop_profile``; the
reference engine ``<tag>-TP-<rank>.trace.json.gz``). Output: one plain dict
(``analyze_traces``), stdlib only, written into ``summary.json``.

**Forwards** are told apart by the engines' own annotation ranges, or inferred
from ``cudaGraphLaunch`` when a trace has none; **which all-reduce ran** is read
from the kernel names. Both name tables, each entry with its source, are in
``analysis.kernels``. What the trace proves, against the engine's own timing
and the requested variants, is ``analysis.profiling``'s.


**GPU traces.** A forward's GPU work is found through the CUDA launch
correlation: the runtime calls (``cudaLaunchKernel``, ``cudaGraphLaunch``...)
issued on the range's thread inside the range carry a ``correlation`` id that
the kernels they launched (all kernels of a replayed graph included) carry
too. The forward's span runs from its first kernel's start to its last
kernel's end. In it, *comm* = the union of the communication kernels' (and
peer-to-peer copies') intervals; *compute* = the union of all other GPU work
minus comm (compute that overlaps comm is reported as ``overlap_ms``); *idle*
= span minus everything (launch gaps, host-bound waits).

**CPU traces** (the reference engine on CPU) have no kernels. There the
forward is its CPU range, *comm* = the time inside the
``refengine.all_reduce.<backend>`` ranges nested in it (the same bracket the
engine's own ``perf_counter`` timing uses, ``refengine/comm.py``), *compute*
= the union of the profiled operators (``cpu_op``) outside those ranges, and
*idle* = the rest of the range (host time between operators: the Python
interpreter, the scheduler's bookkeeping).


**Rank skew** is the wait for the slowest rank: forwards of one kind are
matched across ranks by their order, and within a forward the communication
calls by their order; for call ``i`` every rank waits ``max_r(start_i) -
start_i,r`` for the last one to arrive. Timestamps of processes on one host
share the host clock (the profiler converts GPU time to it), so this holds
within about a microsecond.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsweep.analysis.kernels import (
    COMM_LIKE,
    REFENGINE_ALL_REDUCE,
    REFENGINE_IMPL,
    CommPattern,
    classify_kernel,
    forward_kind,
)
from specsweep.contracts.layout import TRACE_NAME_RE

# Format history of the dict analyze_traces returns (summary.json "profile.analysis"):
#   1  mode, attribution, ranks.<r>.forwards.<kind>, target, rank_skew, implementations.
ANALYSIS_FORMAT_VERSION = 1

_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
_GRAPH_LAUNCH = re.compile(r"^cu(?:da)?GraphLaunch")


def trace_rank(path: str | Path, trace: dict[str, Any] | None = None) -> int | None:
    """The TP rank of a trace file: ``-TP-<rank>`` in its name, else ``distributedInfo.rank``."""
    m = TRACE_NAME_RE.search(Path(path).name)
    if m:
        return int(m["rank"])
    info = (trace or {}).get("distributedInfo") or {}
    return int(info["rank"]) if "rank" in info else None


def load_trace(path: str | Path) -> dict[str, Any]:
    """A Chrome trace as a dict (gzip or plain JSON); a list-only trace becomes ``{"traceEvents": [...]}``."""
    p = Path(path)
    raw = gzip.open(p, "rb").read() if p.name.endswith(".gz") else p.read_bytes()
    data = json.loads(raw)
    return {"traceEvents": data} if isinstance(data, list) else data


# ------------------------------------------------------------------ intervals


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(union: Sequence[tuple[float, float]]) -> float:
    return sum(b - a for a, b in union)


def _intersection(x: Sequence[tuple[float, float]], y: Sequence[tuple[float, float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        lo, hi = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if hi > lo:
            total += hi - lo
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


# ------------------------------------------------------------------ per rank


@dataclass
class Call:
    """One communication call: an all-reduce, an all-gather, a DeepEP dispatch..."""

    impl: str
    collective: str
    start: float  # us, host clock
    end: float
    kernels: list[str] = field(default_factory=list)


@dataclass
class Forward:
    """One model forward on one rank."""

    kind: str
    start: float  # us: GPU span (first kernel) on GPU traces, the CPU range on CPU traces
    end: float
    comm_us: float = 0.0
    compute_us: float = 0.0
    idle_us: float = 0.0
    overlap_us: float = 0.0
    calls: list[Call] = field(default_factory=list)
    graph: bool = False

    @property
    def span_us(self) -> float:
        return self.end - self.start


@dataclass
class RankTrace:
    rank: int | None
    mode: str  # "gpu" | "cpu"
    attribution: str  # "annotations" | "inferred" | "none"
    forwards: list[Forward]
    unattributed_kernels: int = 0
    gpu_events: int = 0
    unmatched_comm_like: Counter = field(default_factory=Counter)
    comm_names: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


def _events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace.get("traceEvents") or [] if isinstance(e, dict) and e.get("ph") == "X"
            and isinstance(e.get("ts"), (int, float))]


def _end(e: dict[str, Any]) -> float:
    return float(e["ts"]) + float(e.get("dur") or 0.0)


def _group_calls(events: list[tuple[float, float, CommPattern | None, str, Any]]) -> list[Call]:
    """Communication calls of one forward from its GPU events ``(start, end, pattern, name, stream)``."""
    calls: list[Call] = []
    by_stream: dict[Any, list[tuple[float, float, CommPattern | None, str, Any]]] = defaultdict(list)
    for ev in events:
        by_stream[ev[4]].append(ev)
    for stream_events in by_stream.values():
        stream_events.sort(key=lambda e: e[0])
        open_call: Call | None = None
        for start, end, pat, name, _ in stream_events:
            if pat is None:
                open_call = None
                continue
            # A peer copy belongs to the multi-kernel call around it (FlashInfer's copy-engine path).
            joins = open_call is not None and not pat.one_kernel_per_call and (
                open_call.impl == pat.impl or pat.impl == "p2p_copy" or open_call.impl == "p2p_copy")
            if joins:
                assert open_call is not None
                if open_call.impl == "p2p_copy":
                    open_call.impl = pat.impl
                open_call.end = max(open_call.end, end)
                open_call.kernels.append(name)
                if open_call.collective in ("other", "copy") and pat.collective not in ("other", "copy"):
                    open_call.collective = pat.collective
                continue
            open_call = Call(pat.impl, pat.collective, start, end, [name])
            calls.append(open_call)
            if pat.one_kernel_per_call:
                open_call = None
    calls.sort(key=lambda c: c.start)
    return calls


def _gpu_forward(kind: str, gpu: list[dict[str, Any]], graph: bool, rt: RankTrace) -> Forward | None:
    """A forward from the GPU events it launched (None when it launched none)."""
    if not gpu:
        return None
    evs = []
    for e in gpu:
        name = str(e.get("name", ""))
        pat = classify_kernel(name)
        if pat is None and e.get("cat") == "kernel" and COMM_LIKE.search(name):
            rt.unmatched_comm_like[name] += 1
        if pat is not None:
            rt.comm_names[name] += 1
        evs.append((float(e["ts"]), _end(e), pat, name, (e.get("args") or {}).get("stream")))
    start, end = min(ev[0] for ev in evs), max(ev[1] for ev in evs)
    comm = _union((a, b) for a, b, p, _, _ in evs if p is not None)
    other = _union((a, b) for a, b, p, _, _ in evs if p is None)
    busy = _union((a, b) for a, b, _, _, _ in evs)
    overlap = _intersection(comm, other)
    comm_us = _length(comm)
    compute_us = _length(other) - overlap
    return Forward(kind, start, end, comm_us=comm_us, compute_us=compute_us,
                   idle_us=max(0.0, (end - start) - _length(busy)), overlap_us=overlap,
                   calls=_group_calls(evs), graph=graph)


def _analyze_gpu(events: list[dict[str, Any]], rt: RankTrace) -> None:
    gpu = [e for e in events if e.get("cat") in _GPU_CATS]
    rt.gpu_events = len(gpu)
    by_corr: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in gpu:
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            by_corr[corr].append(e)
    runtime = [e for e in events
               if e.get("cat") in _RUNTIME_CATS and (e.get("args") or {}).get("correlation") in by_corr]
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in runtime:
        by_tid[(e.get("pid"), e.get("tid"))].append(e)
    for lst in by_tid.values():
        lst.sort(key=lambda e: e["ts"])
    starts = {k: [float(e["ts"]) for e in v] for k, v in by_tid.items()}
    ranges = [(e, forward_kind(str(e.get("name", "")))) for e in events if e.get("cat") == "user_annotation"]
    ranges = [(e, k) for e, k in ranges if k is not None]
    claimed: set[Any] = set()
    forwards: list[Forward] = []
    if ranges:
        rt.attribution = "annotations"
        # Innermost first: a nested phase range keeps its own launches.
        for e, kind in sorted(ranges, key=lambda x: float(x[0].get("dur") or 0.0)):
            key = (e.get("pid"), e.get("tid"))
            lst = by_tid.get(key, [])
            lo, hi = bisect_left(starts.get(key, []), float(e["ts"])), bisect_right(starts.get(key, []), _end(e))
            corrs = [r["args"]["correlation"] for r in lst[lo:hi] if r["args"]["correlation"] not in claimed]
            claimed.update(corrs)
            graph = any(_GRAPH_LAUNCH.match(str(r.get("name", ""))) for r in lst[lo:hi])
            fwd = _gpu_forward(kind, [g for c in corrs for g in by_corr[c]], graph, rt)
            if fwd is not None:
                forwards.append(fwd)
    else:
        # No forward annotations: one replayed graph = one forward; kinds are assigned afterwards.
        launches = [e for e in runtime if _GRAPH_LAUNCH.match(str(e.get("name", "")))]
        rt.attribution = "inferred" if launches else "none"
        for e in launches:
            corr = e["args"]["correlation"]
            claimed.add(corr)
            fwd = _gpu_forward("graph", by_corr[corr], True, rt)
            if fwd is not None:
                forwards.append(fwd)
        _infer_kinds(forwards, rt)
    rt.unattributed_kernels = sum(len(v) for c, v in by_corr.items() if c not in claimed)
    forwards.sort(key=lambda f: f.start)
    rt.forwards = forwards


def _infer_kinds(forwards: list[Forward], rt: RankTrace) -> None:
    """Without annotations: graphs with the most all-reduces are target forwards, the others draft forwards."""
    if not forwards:
        return
    counts = [sum(c.collective == "all_reduce" for c in f.calls) for f in forwards]
    top = max(counts)
    spec = any(c < top for c in counts)
    for f, c in zip(forwards, counts):
        f.kind = ("verify" if spec else "decode") if c == top else "draft"
    rt.notes.append(
        f"no forward annotations: {len(forwards)} CUDA-graph launches taken as forwards; those with the most "
        f"all-reduces ({top}) as {'verify' if spec else 'decode'}, the others as draft")


def _analyze_cpu(events: list[dict[str, Any]], rt: RankTrace) -> None:
    rt.attribution = "annotations"
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_tid[(e.get("pid"), e.get("tid"))].append(e)
    forwards: list[Forward] = []
    for lst in by_tid.values():
        lst.sort(key=lambda e: float(e["ts"]))
        ts = [float(e["ts"]) for e in lst]
        for e in lst:
            kind = forward_kind(str(e.get("name", ""))) if e.get("cat") == "user_annotation" else None
            if kind is None:
                continue
            lo, hi = bisect_left(ts, float(e["ts"])), bisect_right(ts, _end(e))
            inner = [x for x in lst[lo:hi] if x is not e and _end(x) <= _end(e) + 1e-3]
            comm_ranges = []
            calls = []
            for x in inner:
                m = REFENGINE_ALL_REDUCE.match(str(x.get("name", ""))) if x.get("cat") == "user_annotation" else None
                if m:
                    impl = REFENGINE_IMPL.get(m["backend"], m["backend"])
                    comm_ranges.append((float(x["ts"]), _end(x)))
                    calls.append(Call(impl, "all_reduce", float(x["ts"]), _end(x), [x["name"]]))
                    rt.comm_names[x["name"]] += 1
            comm = _union(comm_ranges)
            ops = _union((float(x["ts"]), _end(x)) for x in inner if x.get("cat") == "cpu_op")
            compute = _length(ops) - _intersection(ops, comm)
            span = _end(e) - float(e["ts"])
            comm_us = _length(comm)
            forwards.append(Forward(kind, float(e["ts"]), _end(e), comm_us=comm_us, compute_us=compute,
                                    idle_us=max(0.0, span - comm_us - compute), calls=calls))
    if not forwards:
        rt.attribution = "none"
    forwards.sort(key=lambda f: f.start)
    rt.forwards = forwards


def analyze_rank(trace: dict[str, Any], rank: int | None = None) -> RankTrace:
    """One rank's forwards (GPU mode when the trace holds GPU kernels, else CPU mode)."""
    events = _events(trace)
    gpu = any(e.get("cat") in _GPU_CATS for e in events)
    rt = RankTrace(rank=rank, mode="gpu" if gpu else "cpu", attribution="none", forwards=[])
    if gpu:
        _analyze_gpu(events, rt)
    else:
        _analyze_cpu(events, rt)
    return rt


# ------------------------------------------------------------------ summaries


def _ms(us: float) -> float:
    return us / 1e3


def summarize_kind(forwards: Sequence[Forward]) -> dict[str, Any]:
    """Means per forward of one kind on one rank (ms, counts), and its communication share."""
    n = len(forwards)
    ar = [sum(c.collective == "all_reduce" for c in f.calls) for f in forwards]
    a2a = [sum(c.collective in ("dispatch", "combine") for c in f.calls) for f in forwards]
    span = sum(f.span_us for f in forwards)
    impls: Counter = Counter(c.impl for f in forwards for c in f.calls if c.collective == "all_reduce")
    all_impls: Counter = Counter(c.impl for f in forwards for c in f.calls)
    return {
        "count": n,
        "span_ms": _ms(span / n),
        "span_ms_median": _ms(statistics.median(f.span_us for f in forwards)),
        "comm_ms": _ms(sum(f.comm_us for f in forwards) / n),
        "compute_ms": _ms(sum(f.compute_us for f in forwards) / n),
        "idle_ms": _ms(sum(f.idle_us for f in forwards) / n),
        "overlap_ms": _ms(sum(f.overlap_us for f in forwards) / n),
        "comm_share": sum(f.comm_us for f in forwards) / span if span > 0 else None,
        "allreduce_per_forward": sum(ar) / n,
        "allreduce_min": min(ar),
        "allreduce_max": max(ar),
        "a2a_per_forward": sum(a2a) / n,
        "comm_calls_per_forward": sum(len(f.calls) for f in forwards) / n,
        "allreduce_impl": dict(impls.most_common()),
        "comm_impl": dict(all_impls.most_common()),
        "graph_forwards": sum(f.graph for f in forwards),
    }


def rank_skew(ranks: Sequence[RankTrace], kind: str) -> dict[str, Any]:
    """The wait for the slowest rank in forwards of ``kind`` (module docstring), ms per forward."""
    if len(ranks) < 2:
        return {"absent": "fewer than two ranks"}
    per_rank = [[f for f in r.forwards if f.kind == kind] for r in ranks]
    n = min(len(p) for p in per_rank)
    if n == 0:
        return {"absent": f"no {kind} forward on some rank"}
    waits: list[list[float]] = [[] for _ in ranks]  # per rank: us waited in each matched forward
    skipped = 0
    for j in range(n):
        calls = [p[j].calls for p in per_rank]
        if len({len(c) for c in calls}) != 1 or not calls[0]:
            skipped += 1
            continue
        latest = [max(c[i].start for c in calls) for i in range(len(calls[0]))]
        for r, c in enumerate(calls):
            waits[r].append(sum(latest[i] - c[i].start for i in range(len(c))))
    matched = len(waits[0])
    if not matched:
        return {"absent": f"{kind} forwards of the ranks never had the same number of communication calls"}
    per_rank_ms = [_ms(sum(w) / matched) for w in waits]
    return {
        "wait_ms_per_forward": sum(per_rank_ms) / len(per_rank_ms),
        "max_rank_wait_ms_per_forward": max(per_rank_ms),
        "per_rank_wait_ms": per_rank_ms,
        "matched_forwards": matched,
        "unmatched_forwards": skipped + max(len(p) for p in per_rank) - n,
    }


def target_kind(kinds: Iterable[str]) -> str | None:
    """The target forward the metrics describe: ``verify`` under speculation, else ``decode``."""
    kinds = set(kinds)
    for k in ("verify", "decode"):
        if k in kinds:
            return k
    return None


def analyze_traces(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The analysis of one profiling run: every rank's trace, per forward kind (shape: module docstring)."""
    if not paths:
        raise ValueError("no trace files to analyse")
    ranks: list[RankTrace] = []
    for path in sorted(paths, key=str):
        trace = load_trace(path)
        ranks.append(analyze_rank(trace, trace_rank(path, trace)))
    ranks.sort(key=lambda r: (r.rank is None, r.rank or 0))
    modes = {r.mode for r in ranks}
    kinds = sorted({f.kind for r in ranks for f in r.forwards})
    target = target_kind(kinds)
    out: dict[str, Any] = {
        "format_version": ANALYSIS_FORMAT_VERSION,
        "mode": modes.pop() if len(modes) == 1 else "mixed",
        "attribution": sorted({r.attribution for r in ranks}),
        "files": [Path(p).name for p in sorted(paths, key=str)],
        "target": target,
        "ranks": {},
        "rank_skew": {},
        "implementations": {},
        "comm_kernel_names": {},
        "unmatched_comm_like": {},
        "notes": [n for r in ranks for n in r.notes],
    }
    impls: Counter = Counter()
    names: Counter = Counter()
    unmatched: Counter = Counter()
    for r in ranks:
        by_kind: dict[str, list[Forward]] = defaultdict(list)
        for f in r.forwards:
            by_kind[f.kind].append(f)
        out["ranks"][str(r.rank)] = {
            "mode": r.mode,
            "attribution": r.attribution,
            "forwards": {k: summarize_kind(v) for k, v in sorted(by_kind.items())},
            "gpu_events": r.gpu_events,
            "unattributed_gpu_events": r.unattributed_kernels,
        }
        impls.update(c.impl for f in r.forwards for c in f.calls)
        names.update(r.comm_names)
        unmatched.update(r.unmatched_comm_like)
    for kind in kinds:
        out["rank_skew"][kind] = rank_skew(ranks, kind)
    out["implementations"] = dict(impls.most_common())
    out["comm_kernel_names"] = dict(names.most_common(20))
    out["unmatched_comm_like"] = dict(unmatched.most_common(20))
    return out


def target_stats(analysis: dict[str, Any], rank: str | None = None) -> dict[str, Any] | None:
    """The target forward's summary on ``rank`` (default: the lowest rank that has one)."""
    kind = analysis.get("target")
    if kind is None:
        return None
    for r in ([rank] if rank is not None else sorted(analysis["ranks"], key=lambda x: (x == "None", x))):
        stats = (analysis["ranks"].get(r) or {}).get("forwards", {}).get(kind)
        if stats:
            return stats
    return None
