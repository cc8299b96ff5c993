"""Profiler range names of the reference engine, and a near-free way to open them.

Every rank wraps each model forward in a ``torch.profiler.record_function``
range with one of the stable names below, so that a trace taken through
``/start_profile`` / ``/stop_profile`` can be cut into phases afterwards
(the profiling stage analyses such traces). The names are part of the engine's
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

# The names themselves live in ``ranges`` (no torch import), where the trace analysis reads them too.
from .ranges import (  # noqa: F401 - the engine's modules import them here
    ALL_NAMES,
    ALL_REDUCE_PREFIX,
    DECODE,
    DRAFT,
    DRAFT_PREFILL,
    GRAPH_CAPTURE,
    GRAPH_REPLAY,
    PHASES,
    PREFILL,
    VERIFY,
)

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
