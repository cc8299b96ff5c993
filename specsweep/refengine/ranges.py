"""Profiler range names of the reference engine (``trace.annotate`` opens them), without importing torch.

They are part of the engine's interface (listed in ``refengine/README.md``): the
trace analysis cuts a trace into phases by them, through ``engines/reference.py``.
"""

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
