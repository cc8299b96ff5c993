"""Names in a PyTorch profiler trace: which kernel is which communication, which range is which forward.

Read by ``analysis.trace``, which measures the forwards and the calls these names pick out.

**Which all-reduce ran** is read from the kernel names, matched against
:data:`PATTERNS`, each written from the library's own source and cited there.
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
from dataclasses import dataclass
from typing import Any

from specsweep.engines import reference


@dataclass(frozen=True)
class CommPattern:
    """One family of communication kernels (or CPU ranges) and where its names come from."""

    impl: str  # implementation id (see IMPLEMENTATIONS)
    collective: str  # all_reduce | all_gather | reduce_scatter | dispatch | combine | copy | other
    pattern: re.Pattern[str]
    source: str  # repository@version and file:line (or the shipped binary) the name is taken from
    one_kernel_per_call: bool = True  # False: consecutive kernels of this impl on one stream are one call


def _p(impl: str, collective: str, regex: str, source: str, one: bool = True) -> CommPattern:
    return CommPattern(impl, collective, re.compile(regex), source, one)


#: Implementations a trace can show, and the ``variant:`` names (config) that ask for them.
IMPLEMENTATIONS: dict[str, dict[str, Any]] = {
    "nccl": {"label": "NCCL", "variants": ("nccl_env", "all-reduce:nccl")},
    "custom_allreduce": {"label": "SGLang custom all-reduce", "variants": ("custom_allreduce",)},
    "mscclpp": {"label": "MSCCL++", "variants": ("mscclpp",)},
    "torch_symm_mem": {"label": "torch symmetric memory", "variants": ("torch_symm_mem", "all-reduce:symm_mem")},
    "flashinfer_fusion": {"label": "FlashInfer AR+RMSNorm fusion", "variants": ("flashinfer_fusion",)},
    "pcie_ipc_allreduce": {"label": "FlashInfer PCIe IPC all-reduce", "variants": ("pcie_ipc_allreduce",)},
    "deepep": {"label": "DeepEP dispatch/combine", "variants": ("deepep",)},
    "gloo": {"label": "gloo (reference engine, CPU)", "variants": ("all-reduce:gloo",)},
    "shm": {"label": "shared memory (reference engine, CPU)", "variants": ("all-reduce:shm",)},
    "p2p_copy": {"label": "peer-to-peer memcpy", "variants": ()},
}

_NCCL_GEN = "NVIDIA/nccl src/device/generate.py (kernel symbol paste('_', 'ncclDevKernel', coll, redop, ty, algo, proto))"
_NCCL_SYM = "NVIDIA/nccl src/device/symmetric/generate.py kernel_cname (paste('_', 'ncclSymkDevKernel', coll, algo, red, ty))"
_SGL = "sgl-project/sglang v0.5.23 python/sglang"
_FI = "flashinfer-ai/flashinfer v0.7.2 include/flashinfer/comm"
_MSCCLPP = "microsoft/mscclpp v0.10.0 (6231b4f, the tag containers/sglang/Dockerfile builds)"
_TORCH_SYMM = ("pytorch/pytorch v2.14.1 torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu "
               "(anonymous-namespace kernels; symbols seen in torch 2.14.1+cu130 libtorch_cuda.so)")
_DEEPEP = ("deepseek-ai/DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu (namespace deep_ep::<kind>); "
           "sgl-deep-ep 0.1.2.post1 (the wheel SGLang 0.5.23 pins) ships them as deep_ep::legacy::<kind>")

#: Communication kernel names (GPU) and ranges (CPU), first match wins.
PATTERNS: tuple[CommPattern, ...] = (
    # --- NCCL: ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>) in NCCL 2.30.7.
    _p("nccl", "all_reduce", r"\bncclDevKernel_AllReduce_", _NCCL_GEN + "; nvidia-nccl-cu13 2.30.7 libnccl.so.2"),
    _p("nccl", "all_reduce", r"\bncclSymkDevKernel_AllReduce_", _NCCL_SYM),
    _p("nccl", "all_reduce", r"\bncclKernel_AllReduce_", "NVIDIA/nccl v2.18 and older src/collectives/device (ncclKernel_<coll>_<algo>_<proto>_<op>_<ty>)"),
    _p("nccl", "all_gather", r"\bncclDevKernel_AllGather|\bncclSymkDevKernel_AllGather", _NCCL_GEN),
    _p("nccl", "reduce_scatter", r"\bncclDevKernel_ReduceScatter|\bncclSymkDevKernel_ReduceScatter", _NCCL_GEN),
    _p("nccl", "other", r"\bnccl(?:Dev|SymkDev)?Kernel_\w+", _NCCL_GEN + " (Broadcast, Reduce, SendRecv, Generic)"),
    # --- SGLang custom all-reduce: V2 (JIT, the default on CUDA: custom_all_reduce.py:387 dispatch_custom_allreduce)
    _p("custom_allreduce", "all_reduce", r"\ball_reduce_(?:1shot|2shot)_(?:push|pull)_kernel\b",
       f"{_SGL}/kernels/jit/csrc/distributed/custom_all_reduce.cuh:140,219,324,353 (namespace sglang)"),
    # ... and the legacy CustomAllreduce (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0): sgl-kernel's vLLM-derived kernels.
    _p("custom_allreduce", "all_reduce", r"\bcross_device_reduce_(?:1|2)stage\b",
       "sgl-project/sglang sgl-kernel/csrc/allreduce/custom_all_reduce.cuh (sglang-kernel 0.4.10 common_ops.abi3.so)"),
    # --- MSCCL++ native algorithms (SGLang's pymscclpp.py:371-411 binds default_allreduce_packet, _nvls_packet,
    # _rsag_zero_copy, _nvls_zero_copy) and its DSL executor.
    _p("mscclpp", "all_reduce", r"\bmscclpp::collective::allreduce\w*",
       f"{_MSCCLPP} src/ext/collectives/allreduce/*.cu: allreducePacket, allreduceNvlsPacket, allreduceRsAgZeroCopy, "
       "allreduceNvls, allreduceAllPairs, allreduceFullmesh, allreduceRsAg, allreduceRsAgPipeline, "
       "allreduceNvlsBlockPipeline, allreduceNvlsWarpPipeline", one=False),
    _p("mscclpp", "other", r"\bmscclpp::collective::\w+", f"{_MSCCLPP} src/ext/collectives/ (allgather, reducescatter)",
       one=False),
    _p("mscclpp", "all_reduce", r"\bmscclpp::executionKernel\b", f"{_MSCCLPP} src/core/include/execution_kernel.hpp:794",
       one=False),
    # --- torch symmetric memory (SGLang torch_symm_mem.py:177,181: multimem_all_reduce_, two_shot_all_reduce_;
    # the reference engine: one_shot_all_reduce_out).
    _p("torch_symm_mem", "all_reduce", r"\b(?:one_shot|two_shot|multimem)_all_reduce_kernel(?:_inplace)?\b", _TORCH_SYMM),
    _p("torch_symm_mem", "other", r"\bmultimem_(?:all_gather|one_shot_reduce)_kernel\b", _TORCH_SYMM),
    # --- FlashInfer all-reduce + RMSNorm fusion (SGLang layers/flashinfer_comm_fusion.py:921 allreduce_fusion)
    _p("flashinfer_fusion", "all_reduce",
       r"\bflashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_(?:oneshot_lamport|twoshot_sync)\b",
       f"{_FI}/trtllm_allreduce_fusion.cuh:1516,1587"),
    _p("flashinfer_fusion", "all_reduce",
       r"\bflashinfer::trtllm_mnnvl_allreduce::(?:oneshotAllreduceFusionKernel|twoshotAllreduceKernel)\b",
       f"{_FI}/trtllm_mnnvl_allreduce.cuh:915,1269"),
    _p("flashinfer_fusion", "other", r"\bflashinfer::trtllm_mnnvl_allreduce::rmsNormLamport\b",
       f"{_FI}/trtllm_mnnvl_allreduce.cuh:1342 (the norm after the two-shot all-reduce)", one=False),
    # --- FlashInfer PCIe IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, SGLang pcie_ipc_ar.py:225)
    _p("pcie_ipc_allreduce", "all_reduce", r"\bflashinfer::comm::pcie_ipc::\w+|\bkernel_pcie_ipc_\w+",
       f"{_FI}/pcie_ipc_all_reduce.cuh:858-1971 (ipc_tp2_remote_push_kernel, ipc_rsag_ring_push_param_kernel, "
       "ipc_rsag_push_param_kernel, ipc_topo_rsag8_*_kernel, push_oneshot_param_kernel), pcie_ipc_ce_ring.cuh:74-101 "
       "(ce_publish_flag_kernel, ce_wait_flag_kernel, ce_add_kernel), pcie_ipc_ce_sm120.cuh:28", one=False),
    # --- DeepEP (SGLang --moe-a2a-backend deepep: layers/moe/token_dispatcher/deepep.py low_latency_dispatch/_combine)
    _p("deepep", "dispatch", r"\bdeep_ep::(?:legacy::)?(?:intranode|internode|internode_ll)::dispatch\b", _DEEPEP,
       one=False),
    _p("deepep", "combine", r"\bdeep_ep::(?:legacy::)?(?:intranode|internode|internode_ll)::combine\w*", _DEEPEP,
       one=False),
    _p("deepep", "other", r"\bdeep_ep::\w+", _DEEPEP + " (notify_dispatch, cached_notify*, clean_low_latency_buffer, "
       "barrier, elastic JIT kernels)", one=False),
)

#: CPU ranges around each eager all-reduce of the reference engine (specsweep/refengine/trace.py ALL_REDUCE_PREFIX).
REFENGINE_ALL_REDUCE = re.compile("^" + re.escape(reference.TRACE_ALL_REDUCE_PREFIX) + r"(?P<backend>\w+)$")
#: The reference engine's all-reduce backend (its range name) -> implementation id.
REFENGINE_IMPL = {"gloo": "gloo", "shm": "shm", "nccl": "nccl", "symm_mem": "torch_symm_mem"}

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


_P2P = CommPattern("p2p_copy", "copy", _P2P_COPY, "CUPTI memcpy kind PtoP (Kineto names it 'Memcpy PtoP ...')", False)


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
