"""DeepEP on a target, checked without SGLang: NVLink, RDMA and the model's quantization.

``--moe-a2a-backend deepep`` (SGLang 0.5.23, the ``sgl-deep-ep`` wheel) fails
at startup in three ways that parse fine: normal-mode kernels on a host
without NVLink, low-latency kernels on a host without RDMA NICs, and any mode
on experts of a quantization DeepEP's MoE layer does not take (Kimi-K2.5's
compressed-tensors INT4). These rules of ``rules.RULES`` (and, the one that
reads the model directory's ``config.json``, of ``rules.FILE_RULES``) say so
before a launch, each naming the configuration and the flag.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Finding, Labels
from specsweep.engines.sglang.args import is_set as _is_set
from specsweep.engines.volumes import host_path


def rule_deepep_nvlink(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    if sa.get("moe-a2a-backend") != "deepep" or plan.nvlink is not False:
        return []
    mode = sa.get("deepep-mode") or "auto"
    if mode == "low_latency":
        return []
    return [
        Finding(
            "error",
            "deepep-nvlink",
            f"configurations.{plan.name}.server_args.deepep-mode: DeepEP mode {mode!r} uses normal-mode kernels "
            f"(auto = normal for prefill), which need NVLink; this target has nvlink: false, use "
            f"deepep-mode: low_latency",
        )
    ]


# DeepEP's low-latency kernels move tokens over RDMA through NVSHMEM's IBGDA
# transport even between GPUs of one node: "Yes, the local node transfer will
# also use RDMA" (DeepEP maintainers, deepseek-ai/DeepEP issue 164, on 8 x H200
# in low_latency mode); "IBGDA is necessary and crucial to run DeepEP"
# (deepseek-ai/DeepEP issue 9). Normal mode's intranode kernels need NVLink.
# So on PCIe GPUs without RDMA NICs neither mode can run.
DEEPEP_RDMA_SOURCE = "deepseek-ai/DeepEP issue 164 (and issue 9)"


def rule_deepep_rdma(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    if sa.get("moe-a2a-backend") != "deepep" or (sa.get("deepep-mode") or "auto") != "low_latency":
        return []
    rdma = plan.rdma
    if rdma is True:
        return []
    what = (
        f"configurations.{plan.name}.server_args.deepep-mode: DeepEP low_latency mode sends tokens over RDMA "
        f"(NVSHMEM IBGDA) even between GPUs of one node ({DEEPEP_RDMA_SOURCE})"
    )
    if rdma is False:
        return [Finding("error", "deepep-rdma", f"{what}; this target has rdma: false"
                        + (" and nvlink: false, so no DeepEP mode can run here"
                           if plan.nvlink is False else ""))]
    return [Finding("warning", "deepep-rdma", f"{what}; this target's rdma is not known (set rdma: true/false): "
                    f"without RDMA NICs with GPUDirect RDMA the server fails at startup")]


# --- DeepEP with the model's quantization -------------------------------------------------------
# What SGLang 0.5.23 does with --moe-a2a-backend deepep (paths under sglang/srt/):
# get_moe_impl_class makes every MoE layer a DeepEPMoE (layers/moe/ep_moe/layer.py:352-364). For
# experts in a compressed-tensors checkpoint (Kimi-K2.5's INT4 W4A16 "pack-quantized" experts) its
# quant_config is neither Fp8Config nor W4AFp8Config (:152-166): low_latency/auto mode asserts that
# DeepGEMM's JIT kernels load (:167-177), then its low-latency forward hits
# `assert False, "forward_deepgemm_masked is deprecated"` (:297-301), normal mode
# "forward_deepgemm_contiguous is deprecated" (:292-296). The one way around the asserts (the
# FusedMoE path, :101-147) hands the compressed-tensors WNA16 MoE method a DeepEP dispatch output,
# while it reads only a standard one (layers/quantization/compressed_tensors/schemes/
# compressed_tensors_wNa16_moe.py:444-494). RDMA or not, DeepEP cannot run these experts.
DEEPEP_UNSUPPORTED_QUANT = frozenset({"compressed-tensors"})
DEEPEP_QUANT_SIGNATURE = "deepep_quantization"
# Where DeepGEMM loads, NVSHMEM comes up before the MoE forward's assert: on a host without RDMA its
# error ends the run first (logcheck's NVSHMEM_SIGNATURES, "deepep_rdma").
DEEPEP_RDMA_SIGNATURE = "deepep_rdma"
# Model types whose SGLang config class copies ``text_config.quantization_config`` to the top level
# (sglang/srt/configs/kimi_k25.py:157-159, kimi_k3.py:113-114, glm5_next.py:331-332): Kimi-K2.5's
# checkpoint keeps its quantization there, not at the top of config.json.
TEXT_CONFIG_QUANT_TYPES = frozenset({"kimi_k25", "kimi_k3", "glm5_next"})


def model_quantization(plan: Plan, base: Path) -> tuple[str | None, str]:
    """The target model's quantization as SGLang sees it, and where that was read.

    ``--quantization`` when given, else ``quantization_config.quant_method`` of the model
    directory's ``config.json`` (mapped to this host through the plan's volumes), or of its
    ``text_config`` for the model types whose config SGLang copies it from
    (:data:`TEXT_CONFIG_QUANT_TYPES`). ``(None, why)``
    when it cannot be read here (a hub id, a directory missing on this host: the volume and
    model checks say so) or the model is not quantized.
    """
    sa = plan.server_args
    if _is_set(sa.get("quantization")):
        return str(sa["quantization"]), "server_args.quantization"
    model = sa.get("model-path")
    if not isinstance(model, str) or not model:
        return None, "no model-path"
    path, why = host_path(plan, model, base)
    config = None if path is None else path / "config.json"
    if config is None or not config.is_file():
        return None, why or f"{model}: no config.json on this host"
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{config}: {exc}"
    data = data if isinstance(data, dict) else {}
    quant, where = data.get("quantization_config"), str(config)
    text = data.get("text_config")
    if quant is None and data.get("model_type") in TEXT_CONFIG_QUANT_TYPES and isinstance(text, dict):
        quant, where = text.get("quantization_config"), f"{config} text_config"
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    return (str(method) if method else None), where


def rule_deepep_quantization(plan: Plan, labels: Labels, images: Mapping[str, Any] | None,
                             base: Path) -> list[Finding]:
    """DeepEP with compressed-tensors experts: refused, unless labelled an expected failure with its signature.

    Without labels (None: a preflight job's plan alone) a warning that names the label that makes it expected.
    """
    sa = plan.server_args
    if sa.get("moe-a2a-backend") != "deepep":
        return []
    method, where = model_quantization(plan, base)
    if method not in DEEPEP_UNSUPPORTED_QUANT:
        return []
    what = (f"configurations.{plan.name}.server_args.moe-a2a-backend: DeepEP in SGLang 0.5.23 cannot run the "
            f"model's {method} experts ({where}; sglang/srt/layers/moe/ep_moe/layer.py:167-177,297-301 assert), "
            f"with RDMA or without")
    wanted = (labels or {}).get("expect_signature") or []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    # Without RDMA (or not known to have it) the run may end in NVSHMEM's error before the assert.
    needed = [DEEPEP_QUANT_SIGNATURE] + ([DEEPEP_RDMA_SIGNATURE] if plan.rdma is not True else [])
    if (labels or {}).get("expect") == "failure" and all(n in wanted for n in needed):
        return []
    label = f"expect: failure with expect_signature: [{', '.join(needed)}]"
    if labels is None:
        return [Finding("warning", "deepep-quantization",
                        f"{what}; it is an expected failure only where the configuration says {label}")]
    return [Finding("error", "deepep-quantization",
                    f"{what}; remove the configuration, or label it {label} to record the failure")]
