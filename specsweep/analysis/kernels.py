"""Names in a PyTorch profiler trace: which kernel is which communication, which range is which forward.

Read by ``analysis.trace``, which measures the forwards and the calls these names pick out.

**Which all-reduce ran** is read from the kernel names, matched against
:data:`PATTERNS` (the variant entries' kernel names, ``engines.variants``), each
written from the library's own source and cited there.
One all-reduce is one kernel for NCCL, SGLang's custom all-reduce, torch
symmetric memory and FlashInfer's trtllm fusion; for the implementations
whose one call launches several kernels (MSCCL++ composites, FlashInfer's
PCIe-IPC copy-engine path, FlashInfer MNNVL two-shot + norm, DeepEP's notify +
dispatch) a call is a run of consecutive communication kernels of that
implementation on one stream. A kernel whose name looks like a collective but
matches no pattern is listed under ``unmatched_comm_like``, never silently
counted as compute.

**Forwards, told apart by the engine's own annotations.** Both engines wrap
each model forward in a ``torch.profiler.record_function`` range:

* the reference engine: ``refengine.prefill`` / ``draft_prefill`` / ``draft`` /
  ``verify`` / ``decode`` (``specsweep/refengine/trace.py``);
* SGLang 0.5.23: ``step[<STAGE> bs=<n>...]`` around every
  ``ModelRunner.forward`` (``sglang/srt/model_executor/model_runner.py:1832``,
  name from ``sglang/srt/utils/profile_utils.py:462`` ``build_step_span_name``):
  ``VERIFY`` for the target verify, ``DRAFT`` for every forward of the draft
  runner (``toks=`` is added only to extend-mode steps, which for the draft
  runner is its prefill), ``EXTEND`` for prefill, ``DECODE`` without
  speculation.

When a trace carries none of these (an older SGLang, another engine) the
forwards are *inferred*: each ``cudaGraphLaunch`` is one forward, and the
graphs with the most all-reduces are taken as target forwards (verify under
speculation), the others as draft forwards; ``attribution`` in the result
says which was used.
"""

from __future__ import annotations

import re
from typing import Any

from specsweep.contracts.variants import KernelPattern
from specsweep.engines import reference
from specsweep.engines.variants import REFERENCE_PREFIX, implementations, kernel_patterns, variants_of

#: One family of communication kernels (the variant entries' ``KernelPattern``).
CommPattern = KernelPattern

#: Implementations a trace can show, and the ``variant:`` names (config) that ask for them: the variant
#: entries' (``engines.variants``), and the peer-to-peer copies no variant asks for.
IMPLEMENTATIONS: dict[str, dict[str, Any]] = {
    **{impl.id: {"label": impl.label, "variants": names} for impl, names in implementations().values()},
    "p2p_copy": {"label": "peer-to-peer memcpy", "variants": ()},
}

#: Communication kernel names (GPU) and ranges (CPU), first match wins: the entries' implementations' kernels.
PATTERNS: tuple[CommPattern, ...] = kernel_patterns()

#: CPU ranges around each eager all-reduce of the reference engine (specsweep/refengine/trace.py ALL_REDUCE_PREFIX).
REFENGINE_ALL_REDUCE = re.compile("^" + re.escape(reference.TRACE_ALL_REDUCE_PREFIX) + r"(?P<backend>\w+)$")
#: The reference engine's all-reduce backend (its range name) -> implementation id.
REFENGINE_IMPL = {name.removeprefix(REFERENCE_PREFIX): v.implementation.id
                  for name, v in variants_of(reference.ReferenceEngine.name).items() if v.implementation is not None}

#: Names that look like a collective: a GPU kernel matching this but no pattern is reported, not counted as compute.
COMM_LIKE = re.compile(r"(?i)all_?reduce|all_?gather|reduce_?scatter|nccl|alltoall|all_to_all|mscclpp|symm_mem|"
                       r"lamport|pcie_ipc|deep_ep|cross_device")

#: Forward ranges: the reference engine's (refengine/trace.py) and SGLang's step spans (profile_utils.py:462).
_REFENGINE_PHASES = {name: name.split(".", 1)[1] for name in reference.TRACE_PHASES}  # refengine.verify: verify
SGLANG_STEP = re.compile(r"^step\[(?P<stage>[A-Z_]+) bs=(?P<bs>\d+)(?P<toks> toks=\d+)?")
_SGLANG_STAGES = {"VERIFY": "verify", "DECODE": "decode", "EXTEND": "prefill", "MIXED": "mixed", "IDLE": "idle"}
_P2P_COPY = re.compile(r"^Memcpy PtoP")


def classify_kernel(name: str) -> CommPattern | None:
    """The communication pattern a GPU kernel (or memcpy) name matches, or None (compute)."""
    for pat in PATTERNS:
        if pat.pattern.search(name):
            return pat
    if _P2P_COPY.match(name):
        return _P2P
    return None


_P2P = KernelPattern("p2p_copy", "copy", _P2P_COPY, "CUPTI memcpy kind PtoP (Kineto names it 'Memcpy PtoP ...')", False)


def forward_kind(name: str) -> str | None:
    """The forward kind of an annotation range (``verify``, ``draft``, ``prefill``...), or None."""
    if name in _REFENGINE_PHASES:
        return _REFENGINE_PHASES[name]
    m = SGLANG_STEP.match(name)
    if m is None:
        return None
    stage = m["stage"]
    if stage == "DRAFT":
        return "draft_prefill" if m["toks"] else "draft"
    return _SGLANG_STAGES.get(stage, stage.lower())
