"""The backend variants, one entry each (``contracts.variants.Variant``); every list a stage needs is derived here.

A variant is what a configuration's ``variant:`` label asks for (docs/design.md,
"Variants"). Its entry holds all that the stages need of it: the engine that
runs it, the log lines that prove it on or fallen back (read by the engine's
log check), its place in the engine's all-reduce dispatch, the kernel names a
profiler trace shows of it (read by ``analysis.kernels``), the distributions
the provenance records for it, the plan-time rules its label adds (run by the
engine's rules), and the Dockerfile stage of the image that carries it.

Nobody else lists variants: the engines' known names, ``logcheck.SIGNATURES``
and ``ALLREDUCE_PRECEDENCE``, ``analysis.kernels.IMPLEMENTATIONS`` and
``PATTERNS``, the packages the provenance reads and the image targets are all
read from :data:`VARIANTS` (``tests/unit/test_variants.py`` checks that they
agree, and adds a variant the way a new one is added).

Adding a variant: its section and its name in :data:`VARIANTS` here, its image
target (a stage of ``containers/<engine>/Dockerfile``) where the stock image
does not carry it, and its test.

Log lines are written from the format string in SGLang 0.5.23's wheel (or
NVSHMEM's source) and cited (``source``: file:line; ``literal``: a verbatim
fragment; ``level``: the call that prints it), checked against the wheel by
``tests/sglang/test_logcheck_wheel.py``; kernel names are cited in their
``source`` and checked against the shipped libraries by
``tests/docker/test_kernel_names_in_images.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Finding, Implementation, KernelPattern, Labels, Signature, Variant, log_line
from specsweep.engines.sglang.args import is_set, tp_size

_log = log_line


def _p(impl: str, collective: str, regex: str, source: str, one: bool = True) -> KernelPattern:
    return KernelPattern(impl, collective, re.compile(regex), source, one)


_DCOMM = "sglang/srt/distributed/device_communicators"
# cls_name passed to can_use_custom_all_reduce_with_nvlink (custom_all_reduce.py:91, custom_all_reduce_v2.py:595)
_CA = r"(?:CustomAllreduce|CustomAllReduceV2)"
_NCCL_GEN = ("NVIDIA/nccl src/device/generate.py "
             "(kernel symbol paste('_', 'ncclDevKernel', coll, redop, ty, algo, proto))")
_NCCL_SYM = ("NVIDIA/nccl src/device/symmetric/generate.py kernel_cname "
             "(paste('_', 'ncclSymkDevKernel', coll, algo, red, ty))")
_SGL = "sgl-project/sglang v0.5.23 python/sglang"
_FI = "flashinfer-ai/flashinfer v0.7.2 include/flashinfer/comm"
_MSCCLPP = "microsoft/mscclpp v0.10.0 (6231b4f, the tag containers/sglang/Dockerfile builds)"
_TORCH_SYMM = ("pytorch/pytorch v2.14.1 torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu "
               "(anonymous-namespace kernels; symbols seen in torch 2.14.1+cu130 libtorch_cuda.so)")
_DEEPEP = ("deepseek-ai/DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu (namespace deep_ep::<kind>); "
           "sgl-deep-ep 0.1.2.post1 (the wheel SGLang 0.5.23 pins) ships them as deep_ep::legacy::<kind>")

# Distributions the provenance records (its label -> the names, first found wins).
_NCCL_PACKAGES = {"nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl")}
_TORCH_PACKAGES = {"torch": ("torch",)}
_FLASHINFER_PACKAGES = {"flashinfer": ("flashinfer-python", "flashinfer")}


# ------------------------------------------------------------------ NCCL (no variant of its own: the fallback)

NCCL = Implementation("nccl", "NCCL", (
    # --- NCCL: ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>) in NCCL 2.30.7.
    _p("nccl", "all_reduce", r"\bncclDevKernel_AllReduce_", _NCCL_GEN + "; nvidia-nccl-cu13 2.30.7 libnccl.so.2"),
    _p("nccl", "all_reduce", r"\bncclSymkDevKernel_AllReduce_", _NCCL_SYM),
    _p("nccl", "all_reduce", r"\bncclKernel_AllReduce_",
       "NVIDIA/nccl v2.18 and older src/collectives/device (ncclKernel_<coll>_<algo>_<proto>_<op>_<ty>)"),
    _p("nccl", "all_gather", r"\bncclDevKernel_AllGather|\bncclSymkDevKernel_AllGather", _NCCL_GEN),
    _p("nccl", "reduce_scatter", r"\bncclDevKernel_ReduceScatter|\bncclSymkDevKernel_ReduceScatter", _NCCL_GEN),
    _p("nccl", "other", r"\bnccl(?:Dev|SymkDev)?Kernel_\w+", _NCCL_GEN + " (Broadcast, Reduce, SendRecv, Generic)"),
))

# NCCL tuned through its environment only (NCCL_ALGO, NCCL_PROTO, ...). Its evidence is NCCL's own
# "set by environment" lines (``logcheck.parse_nccl``); its plan-time checks of those values are the
# engine's (``rules.rule_nccl_env``), which apply whether or not the label asks for the variant.
_NCCL_ENV = Variant("nccl_env", "sglang", NCCL, packages=_NCCL_PACKAGES)


# ------------------------------------------------------------------ SGLang's custom all-reduce

CUSTOM_ALLREDUCE = Implementation("custom_allreduce", "SGLang custom all-reduce", (
    # --- SGLang custom all-reduce: V2 (JIT, the default on CUDA: custom_all_reduce.py:387 dispatch_custom_allreduce)
    _p("custom_allreduce", "all_reduce", r"\ball_reduce_(?:1shot|2shot)_(?:push|pull)_kernel\b",
       f"{_SGL}/kernels/jit/csrc/distributed/custom_all_reduce.cuh:140,219,324,353 (namespace sglang)"),
    # ... and the legacy CustomAllreduce (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0): sgl-kernel's vLLM-derived kernels.
    _p("custom_allreduce", "all_reduce", r"\bcross_device_reduce_(?:1|2)stage\b",
       "sgl-project/sglang sgl-kernel/csrc/allreduce/custom_all_reduce.cuh (sglang-kernel 0.4.10 common_ops.abi3.so)"),
))


def _custom_allreduce_rules(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    """A flag that turns it off, and more than two PCIe-only GPUs (where it disables itself)."""
    sa = plan.server_args
    findings: list[Finding] = []
    if is_set(sa.get("disable-custom-all-reduce")):
        findings.append(
            Finding(
                "error",
                "custom-ar-disabled",
                f"configurations.{plan.name}.server_args.disable-custom-all-reduce: variant custom_allreduce is "
                f"requested but the flag disables it",
            )
        )
    tp = tp_size(sa)
    if plan.nvlink is False and tp > 2:
        findings.append(
            Finding(
                "warning",
                "custom-ar-pcie",
                f"configurations.{plan.name}.variant: custom_allreduce on {tp} PCIe-only GPUs disables itself in "
                f"SGLang 0.5.23 and falls back to NCCL (expected status: fallback)",
            )
        )
    return findings


_CUSTOM_ALLREDUCE = Variant(
    "custom_allreduce", "sglang", CUSTOM_ALLREDUCE,
    log=(
        # --- custom all-reduce. CustomAllReduceV2 is the default (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2,
        # environ.py:1532) and, once its workspace is up (after can_use_custom_all_reduce_v2 passed,
        # custom_all_reduce_v2.py:139), rank 0 logs its config at INFO (custom_all_reduce_v2.py:340-348).
        # The legacy CustomAllreduce logs nothing when on: with it, a working custom all-reduce is unproven.
        _log("custom_allreduce", "active", r"All Reduce config: symmetric_memory = [\d.]+ MB",
             f"{_DCOMM}/custom_all_reduce_v2.py:342", "All Reduce config: symmetric_memory = %.2f MB, ", "info"),
        _log("custom_allreduce", "fallback",
             _CA + r" is disabled because it's not supported on more than two PCIe-only GPUs",
             f"{_DCOMM}/custom_all_reduce_utils.py:494", "is disabled because it's not supported on"),
        _log("custom_allreduce", "fallback", _CA + r" is disabled due to an unsupported world size: \d+",
             f"{_DCOMM}/custom_all_reduce_utils.py:469", "is disabled due to an unsupported world"),
        _log("custom_allreduce", "fallback", _CA + r" is disabled because your platform lacks GPU P2P capability",
             f"{_DCOMM}/custom_all_reduce_utils.py:506", "is disabled because your platform lacks "),
        _log("custom_allreduce", "fallback", _CA + r" is disabled because this process group spans across nodes",
             f"{_DCOMM}/custom_all_reduce_utils.py:462", "is disabled because this process group spans across nodes."),
        _log("custom_allreduce", "fallback", r"Setup Custom allreduce failed with",
             "sglang/srt/distributed/parallel_state.py:515", "Setup Custom allreduce failed with"),
    ),
    precedence=30,
    packages={"sglang-kernel": ("sglang-kernel", "sgl-kernel")},
    rules=(_custom_allreduce_rules,),
)


# ------------------------------------------------------------------ MSCCL++ (--enable-mscclpp)

MSCCLPP = Implementation("mscclpp", "MSCCL++", (
    # --- MSCCL++ native algorithms (SGLang's pymscclpp.py:371-411 binds default_allreduce_packet, _nvls_packet,
    # _rsag_zero_copy, _nvls_zero_copy) and its DSL executor.
    _p("mscclpp", "all_reduce", r"\bmscclpp::collective::allreduce\w*",
       f"{_MSCCLPP} src/ext/collectives/allreduce/*.cu: allreducePacket, allreduceNvlsPacket, allreduceRsAgZeroCopy, "
       "allreduceNvls, allreduceAllPairs, allreduceFullmesh, allreduceRsAg, allreduceRsAgPipeline, "
       "allreduceNvlsBlockPipeline, allreduceNvlsWarpPipeline", one=False),
    _p("mscclpp", "other", r"\bmscclpp::collective::\w+", f"{_MSCCLPP} src/ext/collectives/ (allgather, reducescatter)",
       one=False),
    _p("mscclpp", "all_reduce", r"\bmscclpp::executionKernel\b",
       f"{_MSCCLPP} src/core/include/execution_kernel.hpp:794", one=False),
))

_MSCCLPP_VARIANT = Variant(
    "mscclpp", "sglang", MSCCLPP,
    log=(
        _log("mscclpp", "active", r"Created MSCCL\+\+ communicator: group=\S+ world_size=\d+",
             f"{_DCOMM}/pymscclpp.py:1123", "Created MSCCL++ communicator: group=%s world_size=%d device=%s ", "info"),
        _log("mscclpp", "fallback", r"PyMscclpp is unavailable because its dependencies failed to import",
             f"{_DCOMM}/pymscclpp.py:1053", "PyMscclpp is unavailable because its dependencies failed to import: %s"),
        _log("mscclpp", "fallback", r"PyMscclpp is disabled due to an unsupported world size",
             f"{_DCOMM}/pymscclpp.py:1077", "PyMscclpp is disabled due to an unsupported world"),
        _log("mscclpp", "fallback", r"PyMscclpp is disabled due to an unsupported group",
             f"{_DCOMM}/pymscclpp.py:1089", "PyMscclpp is disabled due to an unsupported group %s."),
        _log("mscclpp", "fallback", r"PyMscclpp did not produce any usable tuned configurations",
             f"{_DCOMM}/pymscclpp.py:1120", "PyMscclpp did not produce any usable tuned configurations."),
    ),
    precedence=20,
    packages={"mscclpp": ("mscclpp",)},
    image_target="mscclpp",
)


# ------------------------------------------------------------------ torch symmetric memory (--enable-torch-symm-mem)

TORCH_SYMM_MEM = Implementation("torch_symm_mem", "torch symmetric memory", (
    # --- torch symmetric memory (SGLang torch_symm_mem.py:177,181: multimem_all_reduce_, two_shot_all_reduce_;
    # the reference engine: one_shot_all_reduce_out).
    _p("torch_symm_mem", "all_reduce", r"\b(?:one_shot|two_shot|multimem)_all_reduce_kernel(?:_inplace)?\b",
       _TORCH_SYMM),
    _p("torch_symm_mem", "other", r"\bmultimem_(?:all_gather|one_shot_reduce)_kernel\b", _TORCH_SYMM),
))


def _torch_symm_mem_rules(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    """An architecture without it (SM90/SM10x and multicast only)."""
    arch = (plan.gpu_arch or "").lower()
    if arch and not (arch.startswith("sm9") or arch.startswith("sm10")):
        return [
            Finding(
                "warning",
                "symm-mem-arch",
                f"configurations.{plan.name}.server_args.enable-torch-symm-mem: torch symmetric memory needs "
                f"SM90/SM10x and multicast; on {arch} SGLang warns and uses NCCL (expected status: fallback)",
            )
        ]
    return []


_TORCH_SYMM_MEM = Variant(
    "torch_symm_mem", "sglang", TORCH_SYMM_MEM,
    log=(
        # --- torch symmetric memory (no INFO line when it is on)
        _log("torch_symm_mem", "fallback", r"TorchSymmMemCommunicator: Device capability .* not supported",
             f"{_DCOMM}/torch_symm_mem.py:85", "TorchSymmMemCommunicator: Device capability %s not supported, "),
        _log("torch_symm_mem", "fallback", r"TorchSymmMemCommunicator: World size \d+ not supported",
             f"{_DCOMM}/torch_symm_mem.py:92", "TorchSymmMemCommunicator: World size %d not supported, "),
        _log("torch_symm_mem", "fallback",
             r"TorchSymmMemCommunicator: torch symmetric memory multicast operations are not supported",
             f"{_DCOMM}/torch_symm_mem.py:118", "TorchSymmMemCommunicator: torch symmetric memory "),
    ),
    precedence=50,
    packages=_TORCH_PACKAGES,
    rules=(_torch_symm_mem_rules,),
)


# ------------------------------------------------------------------ FlashInfer all-reduce + RMSNorm fusion

FLASHINFER_FUSION = Implementation("flashinfer_fusion", "FlashInfer AR+RMSNorm fusion", (
    # --- FlashInfer all-reduce + RMSNorm fusion (SGLang layers/flashinfer_comm_fusion.py:921 allreduce_fusion)
    _p("flashinfer_fusion", "all_reduce",
       r"\bflashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_(?:oneshot_lamport|twoshot_sync)\b",
       f"{_FI}/trtllm_allreduce_fusion.cuh:1516,1587"),
    _p("flashinfer_fusion", "all_reduce",
       r"\bflashinfer::trtllm_mnnvl_allreduce::(?:oneshotAllreduceFusionKernel|twoshotAllreduceKernel)\b",
       f"{_FI}/trtllm_mnnvl_allreduce.cuh:915,1269"),
    _p("flashinfer_fusion", "other", r"\bflashinfer::trtllm_mnnvl_allreduce::rmsNormLamport\b",
       f"{_FI}/trtllm_mnnvl_allreduce.cuh:1342 (the norm after the two-shot all-reduce)", one=False),
))

_FLASHINFER_FUSION = Variant(
    "flashinfer_fusion", "sglang", FLASHINFER_FUSION,
    log=(
        # --- FlashInfer all-reduce + RMSNorm fusion
        _log("flashinfer_fusion", "active",
             r"FlashInfer AllReduce Fusion enabled and workspace initialized: backend=\S+",
             "sglang/srt/layers/flashinfer_comm_fusion.py:580",
             "FlashInfer AllReduce Fusion enabled and workspace initialized: ", "info"),
        _log("flashinfer_fusion", "fallback",
             r"FlashInfer workspace preflight probe failed .*Skipping allreduce fusion",
             "sglang/srt/layers/flashinfer_comm_fusion.py:368", "FlashInfer workspace preflight probe failed (%s). "),
        _log("flashinfer_fusion", "fallback",
             r"FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank\. "
             r"Skipping allreduce fusion",
             "sglang/srt/layers/flashinfer_comm_fusion.py:387",
             "FlashInfer workspace preflight: cuMemCreate probe failed on at "),
        _log("flashinfer_fusion", "fallback", r"FlashInfer AllReduce fusion disabled: the \d+ ranks of this group",
             "sglang/srt/layers/flashinfer_comm_fusion.py:500",
             "FlashInfer AllReduce fusion disabled: the %d ranks of this group are "),
        _log("flashinfer_fusion", "fallback", r"Failed to initialize FlashInfer workspace \(backend=\S+\): .*Disabling",
             "sglang/srt/layers/flashinfer_comm_fusion.py:593",
             "Failed to initialize FlashInfer workspace (backend={backend}): "),
        _log("flashinfer_fusion", "fallback", r"FlashInfer allreduce fusion disabled globally",
             "sglang/srt/layers/flashinfer_comm_fusion.py:737",
             "FlashInfer allreduce fusion disabled globally because "),
        _log("flashinfer_fusion", "fallback", r"flashinfer\.comm (?:unified )?allreduce_fusion API is not available",
             "sglang/srt/layers/flashinfer_comm_fusion.py:132",
             "flashinfer.comm allreduce_fusion API is not available (%s), "),
        _log("flashinfer_fusion", "fallback", r"FlashInfer comm not available, skipping workspace initialization",
             "sglang/srt/layers/flashinfer_comm_fusion.py:475",
             "FlashInfer comm not available, skipping workspace initialization"),
        # (Not a fallback: "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." is raised, and the
        # server does not start; it is the failure flashinfer_fusion_arch below.)
    ),
    precedence=10,
    packages=_FLASHINFER_PACKAGES,
    # SGLang 0.5.23 gates the fusion to SM90/SM10x; this image opens the gate for SM120
    # (containers/patches/sglang-0.5.23-flashinfer-fusion-sm120.patch; rules.rule_fusion_sm120).
    image_target="fi-fusion",
)


# ------------------------------------------------------------------ FlashInfer PCIe-IPC all-reduce

PCIE_IPC_ALLREDUCE = Implementation("pcie_ipc_allreduce", "FlashInfer PCIe IPC all-reduce", (
    # --- FlashInfer PCIe IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, SGLang pcie_ipc_ar.py:225)
    _p("pcie_ipc_allreduce", "all_reduce", r"\bflashinfer::comm::pcie_ipc::\w+|\bkernel_pcie_ipc_\w+",
       f"{_FI}/pcie_ipc_all_reduce.cuh:858-1971 (ipc_tp2_remote_push_kernel, ipc_rsag_ring_push_param_kernel, "
       "ipc_rsag_push_param_kernel, ipc_topo_rsag8_*_kernel, push_oneshot_param_kernel), pcie_ipc_ce_ring.cuh:74-101 "
       "(ce_publish_flag_kernel, ce_wait_flag_kernel, ce_add_kernel), pcie_ipc_ce_sm120.cuh:28", one=False),
))

_PCIE_IPC_ALLREDUCE = Variant(
    "pcie_ipc_allreduce", "sglang", PCIE_IPC_ALLREDUCE,
    log=(
        # --- FlashInfer PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1)
        _log("pcie_ipc_allreduce", "active", r"FlashInfer PCIe-IPC all-reduce enabled \(world=\d+",
             f"{_DCOMM}/pcie_ipc_ar.py:242", "FlashInfer PCIe-IPC all-reduce enabled (world=%d, workspace sized on ",
             "info"),
        _log("pcie_ipc_allreduce", "fallback",
             r"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm",
             f"{_DCOMM}/pcie_ipc_ar.py:228", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has "),
        _log("pcie_ipc_allreduce", "fallback", r"Deterministic inference is on; leaving PCIe-IPC all-reduce off",
             f"{_DCOMM}/pcie_ipc_ar.py:92", "Deterministic inference is on; leaving PCIe-IPC all-reduce off. Its "),
        _log("pcie_ipc_allreduce", "fallback", r"Setup FlashInfer PCIe-IPC allreduce failed with",
             "sglang/srt/distributed/parallel_state.py:501", "Setup FlashInfer PCIe-IPC allreduce failed with {e}."),
        _log("pcie_ipc_allreduce", "fallback",
             r"FlashInfer PCIe-IPC workspace \(max_numel=\d+\) failed: .*reductions stay on NCCL",
             f"{_DCOMM}/pcie_ipc_ar.py:288", "FlashInfer PCIe-IPC workspace (max_numel=%d) failed: %s; "),
        # (Not here: "FlashInfer PCIe-IPC all-reduce skipped: unsupported world size %d", pcie_ipc_ar.py:214, is
        # logger.debug and never reaches an INFO log; preflight's pcie-ipc-tp rule says so before launch.)
        # Further lines: partial use (kind "note": reported, not a fallback) and the PCIe-IPC
        # workspace really built (kind "active").
        _log("pcie_ipc_allreduce", "note",
             r"FlashInfer PCIe-IPC all-reduce serves bf16 only; \S+ reductions stay on NCCL",
             f"{_DCOMM}/pcie_ipc_ar.py:121",
             "FlashInfer PCIe-IPC all-reduce serves bf16 only; %s reductions stay on NCCL."),
        _log("pcie_ipc_allreduce", "active", r"FlashInfer PCIe-IPC workspace built \(world=\d+, max_numel=\d+",
             f"{_DCOMM}/pcie_ipc_ar.py:299", "FlashInfer PCIe-IPC workspace built (world=%d, max_numel=%d, hidden=%d)",
             "info"),
    ),
    precedence=40,
    packages=_FLASHINFER_PACKAGES,
)


# ------------------------------------------------------------------ DeepEP (--moe-a2a-backend deepep)

DEEPEP = Implementation("deepep", "DeepEP dispatch/combine", (
    # --- DeepEP (SGLang --moe-a2a-backend deepep: layers/moe/token_dispatcher/deepep.py low_latency_dispatch/_combine)
    _p("deepep", "dispatch", r"\bdeep_ep::(?:legacy::)?(?:intranode|internode|internode_ll)::dispatch\b", _DEEPEP,
       one=False),
    _p("deepep", "combine", r"\bdeep_ep::(?:legacy::)?(?:intranode|internode|internode_ll)::combine\w*", _DEEPEP,
       one=False),
    _p("deepep", "other", r"\bdeep_ep::\w+", _DEEPEP + " (notify_dispatch, cached_notify*, clean_low_latency_buffer, "
       "barrier, elastic JIT kernels)", one=False),
))

_DEEPEP_VARIANT = Variant(
    "deepep", "sglang", DEEPEP,
    log=(
        # --- DeepEP (when on, nothing at INFO without --deepep-config; a missing package raises)
        _log("deepep", "active", r"Use DeepEP Config: ",
             "sglang/srt/layers/moe/token_dispatcher/deepep.py:347", "Use DeepEP Config: {config_parsed}", "info"),
        _log("deepep", "fallback", r"DeepEP is not available\. Please install DeepEP package",
             "sglang/srt/layers/moe/token_dispatcher/deepep.py:383",
             "DeepEP is not available. Please install DeepEP package from ", "raise"),
        # --- NVSHMEM (DeepEP's low-latency transport) ---------------------------------
        # DeepEP logs nothing in SGLang 0.5.23 when it runs (its only line, "Use DeepEP
        # Config", is rank 0's, only with --deepep-config, and not on the low_latency
        # path). What can prove it ran is NVSHMEM, which DeepEP's low-latency buffer
        # initialises: with NVSHMEM_DEBUG=INFO (subsystem INIT) it reports bringing up
        # IBGDA, the RDMA transport those kernels use even within one node; without
        # RDMA NICs it prints the failure to stderr whatever the debug level. Cited at
        # NVIDIA/nvshmem v3.4.5-0 (commit 131da55f643ac87c810ba0bc51d359258bf433a1), the
        # NVSHMEM torch 2.14.1 pins (nvidia-nvshmem-cu13==3.4.5), copied into
        # tests/fixtures/nvshmem/source-v3.4.5.txt and checked against the pinned
        # libnvshmem_host.so.3 by a slow test. Level "info" = NVSHMEM INFO (needs
        # NVSHMEM_DEBUG=INFO); "stderr" = NVSHMEMI_ERROR_PRINT, always printed.
        _log("deepep", "active", r"NVSHMEM INFO Successfully initialized the transport: IBGDA",
             "src/host/transport/transport.cpp:312",
             '"Successfully initialized the transport: IBGDA. It will be used for device-side "', "info",
             library="nvshmem"),
        _log("deepep", "fallback", r"init failed for transport: IBGDA",
             "src/host/transport/transport.cpp:282", '"init failed for transport: IBGDA"', "stderr", library="nvshmem"),
    ),
    packages={"deep_ep": ("sgl-deep-ep", "deep-ep", "deep_ep")},
    image_target="deepep",
)


# ------------------------------------------------------------------ the reference engine's all-reduce backends
# ``variant: all-reduce:<backend>``: the backend its log must show (``engines.reference``; its CPU ranges in a
# trace, ``analysis.kernels.REFENGINE_ALL_REDUCE``, name the backend, mapped to these implementations).

GLOO = Implementation("gloo", "gloo (reference engine, CPU)")
SHM = Implementation("shm", "shared memory (reference engine, CPU)")

_REFERENCE = (
    Variant("all-reduce:gloo", "reference", GLOO, packages=_TORCH_PACKAGES),
    Variant("all-reduce:shm", "reference", SHM, packages=_TORCH_PACKAGES),
    Variant("all-reduce:nccl", "reference", NCCL, packages={**_TORCH_PACKAGES, **_NCCL_PACKAGES}),
    Variant("all-reduce:symm_mem", "reference", TORCH_SYMM_MEM, packages=_TORCH_PACKAGES),
)
#: The reference engine's label of a backend (``all-reduce:<backend>``).
REFERENCE_PREFIX = "all-reduce:"


# ------------------------------------------------------------------ the registry

#: Every variant, by name.
VARIANTS: dict[str, Variant] = {v.name: v for v in (
    _NCCL_ENV,
    _CUSTOM_ALLREDUCE,
    _MSCCLPP_VARIANT,
    _TORCH_SYMM_MEM,
    _FLASHINFER_FUSION,
    _PCIE_IPC_ALLREDUCE,
    _DEEPEP_VARIANT,
    *_REFERENCE,
)}


def variants_of(engine: str) -> dict[str, Variant]:
    """The variants engine ``engine`` runs, by name (in the order of :data:`VARIANTS`)."""
    return {name: v for name, v in VARIANTS.items() if v.engine == engine}


def known_variants(engine: str) -> frozenset[str]:
    """The ``variant:`` names a configuration of ``engine`` may give."""
    return frozenset(variants_of(engine))


def log_signatures(engine: str, library: str | None = None) -> tuple[Signature, ...]:
    """Every log line of ``engine``'s variants (only those printed by ``library``, when given), entry by entry."""
    return tuple(s for v in variants_of(engine).values() for s in v.log if library is None or s.library == library)


def allreduce_precedence(engine: str) -> tuple[str, ...]:
    """``engine``'s dispatch order for one all-reduce: of two active variants the earlier takes the call."""
    ranked = [v for v in variants_of(engine).values() if v.precedence is not None]
    return tuple(v.name for v in sorted(ranked, key=lambda v: v.precedence))


def implementations() -> dict[str, tuple[Implementation, tuple[str, ...]]]:
    """Each implementation a trace can show (first seen first) and the variants that ask for it."""
    out: dict[str, tuple[Implementation, tuple[str, ...]]] = {}
    for v in VARIANTS.values():
        if v.implementation is not None:
            impl, names = out.get(v.implementation.id, (v.implementation, ()))
            out[impl.id] = (impl, (*names, v.name))
    return out


def kernel_patterns() -> tuple[KernelPattern, ...]:
    """The kernel names of every implementation, in registry order (first match wins)."""
    return tuple(p for impl, _ in implementations().values() for p in impl.kernels)


def packages() -> dict[str, tuple[str, ...]]:
    """The distributions the provenance records for the variants: label -> names (first found wins)."""
    out: dict[str, tuple[str, ...]] = {}
    for v in VARIANTS.values():
        out.update(v.packages)
    return out


def image_targets(engine: str) -> dict[str, str]:
    """The Dockerfile stage that carries each of ``engine``'s variants that the stock image does not."""
    return {name: v.image_target for name, v in variants_of(engine).items() if v.image_target is not None}


def plan_rules(engine: str, requested: list[str]) -> list[tuple[str, Any]]:
    """(variant, rule) of every plan-time rule the ``requested`` variants of ``engine`` add."""
    known = variants_of(engine)
    return [(name, rule) for name in requested if name in known for rule in known[name].rules]
