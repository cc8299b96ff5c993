"""Profiler range names of the reference engine, and a near-free way to open them.

Every rank wraps each model forward in a ``torch.profiler.record_function``
range with one of the stable names below, so that a trace taken through
``/start_profile`` / ``/stop_profile`` can be cut into phases afterwards
(issue 12 analyses such traces). The names are part of the engine's
interface: they are listed in ``refengine/README.md`` and a test checks that
the two lists agree.

``annotate`` opens a range only while a profiler is recording; otherwise it
returns a shared no-op context, so the 122 all-reduce calls of an eager
61-layer verify cost a flag check each, not a profiler op each.
"""

from __future__ import annotations

import contextlib
from typing import ContextManager

import torch

PREFILL = "refengine.prefill"  # one target forward over a chunk of prompt tokens
DRAFT_PREFILL = "refengine.draft_prefill"  # one draft forward over a chunk of prompt tokens
DRAFT = "refengine.draft"  # one draft forward of a speculation cycle (extend first, then chain steps)
VERIFY = "refengine.verify"  # the target forward over k+1 positions of a speculation cycle
DECODE = "refengine.decode"  # the one-token target forward of a step without speculation
GRAPH_REPLAY = "refengine.graph_replay"  # nested in one of the above when it replayed a CUDA graph
GRAPH_CAPTURE = "refengine.graph_capture"  # the start-up capture of all CUDA graphs
ALL_REDUCE_PREFIX = "refengine.all_reduce."  # + backend name, around each eager all-reduce call

PHASES = (PREFILL, DRAFT_PREFILL, DRAFT, VERIFY, DECODE)
ALL_NAMES = PHASES + (GRAPH_REPLAY, GRAPH_CAPTURE, ALL_REDUCE_PREFIX + "<backend>")

_NULL = contextlib.nullcontext()
_profiler_enabled = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)


def profiling() -> bool:
    """Whether a torch profiler is recording in this process right now."""
    return True if _profiler_enabled is None else bool(_profiler_enabled())


def annotate(name: str) -> ContextManager[object]:
    """A ``record_function(name)`` range while profiling, a no-op context otherwise."""
    if profiling():
        return torch.profiler.record_function(name)
    return _NULL
