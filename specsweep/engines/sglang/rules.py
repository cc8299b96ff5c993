"""Known incompatibilities of SGLang 0.5.23 configurations, checked without SGLang.

SGLang's own parser (see :mod:`specsweep.engines.sglang.preflight`) catches unknown
flags and bad values, but not combinations that parse fine and then fail
minutes into startup on an 8-GPU host (or, worse, silently fall back). Each
rule here encodes one such case, read from the 0.5.23 wheel or from the
seeds' runs (the measured case in the README and docs/sglang.md), and its message names the
configuration and the flag so that the fix is obvious.

Rules read only the resolved plan (``server_args``, ``env``, ``image``,
``gpu_arch``, ``nvlink``, ``rdma``, ``variant``, ``expect``,
``expect_signature``) and, optionally, the config's ``images:`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

# Variant names the evidence check knows (``variant:`` in config.yaml).
KNOWN_VARIANTS = frozenset(
    {
        "custom_allreduce",
        "mscclpp",
        "torch_symm_mem",
        "flashinfer_fusion",
        "deepep",
        "pcie_ipc_allreduce",
        "nccl_env",
    }
)

# Flags that 0.5.23 no longer accepts, with what replaced them. argparse's
# prefix matching turns the first into "ambiguous option", which does not say
# what to use instead.
REMOVED_FLAGS: dict[str, str] = {
    "cuda-graph-max-bs": "--cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill for prefill graphs)",
}

# --enable-mscclpp: MSCCL++'s all-reduce kernels in SGLang only serve these world sizes.
MSCCLPP_TP_SIZES = frozenset({4, 8, 16, 32, 64})
# SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: FlashInfer 0.7.2 PCIe-IPC kernels (pcie_ipc_ar.py).
PCIE_IPC_TP_SIZES = frozenset({2, 4, 8})
# Images built with the FlashInfer AR+RMSNorm fusion patch for SM120.
FUSION_PATCHED_IMAGES = frozenset({"sglang-fi-fusion"})
FUSION_PATCH_MARKER = "flashinfer-fusion"
# Architectures where SGLang itself gates the fusion on (SM90 / SM10x).
FUSION_NATIVE_ARCHS = frozenset({"sm90", "sm100", "sm103"})
EAGLE_ALGORITHMS = frozenset({"EAGLE", "EAGLE3"})
# Names of the failure signatures of specsweep.engines.sglang.logcheck (FAILURES and
# NCCL_SIGNATURES of kind "failure"); a test keeps the two in step (logcheck imports this module).
FAILURE_NAMES = frozenset({"cuda_graph_capture_failed", "flashinfer_fusion_arch", "nccl_no_algorithm"})
EAGLE_NUMBERS = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


@dataclass(frozen=True)
class Finding:
    """One rule's verdict. ``error`` stops the configuration; ``warning`` is reported."""

    severity: str  # "error" | "warning"
    rule: str
    message: str


def _is_set(value: Any) -> bool:
    return value is not None and value is not False


def tp_size(server_args: Mapping[str, Any]) -> int:
    """TP world size as SGLang reads it (``--tp-size``, alias ``--tensor-parallel-size``; default 1)."""
    for key in ("tp-size", "tensor-parallel-size"):
        if _is_set(server_args.get(key)):
            return int(server_args[key])
    return 1


def requested_variants(plan: Mapping[str, Any]) -> list[str]:
    """The plan's ``variant`` as a sorted list (the config may give a string)."""
    value = plan.get("variant") or []
    if isinstance(value, str):
        value = [value]
    return sorted(set(value))


def _fusion_requested(sa: Mapping[str, Any]) -> bool:
    return _is_set(sa.get("flashinfer-allreduce-fusion-backend")) or _is_set(
        sa.get("enable-flashinfer-allreduce-fusion")
    )


def _image_is_fusion_patched(plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> bool:
    image = plan.get("image")
    if not image:
        return False
    if image in FUSION_PATCHED_IMAGES:
        return True
    spec = (images or {}).get(image) or {}
    if spec.get("target") == "fi-fusion":
        return True
    return any(FUSION_PATCH_MARKER in str(p) for p in spec.get("patches") or [])


def _nccl_values(value: str) -> list[tuple[str | None, str]]:
    """Parse NCCL_ALGO / NCCL_PROTO: ``Ring``, ``^LL128``, ``allreduce:tree;broadcast:ring``.

    Returns (collective or None, value) pairs; a leading ``^`` (exclusion) is kept on the value.
    """
    out: list[tuple[str | None, str]] = []
    for part in str(value).split(";"):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            coll, _, val = part.partition(":")
            out.append((coll.strip().lower(), val.strip()))
        else:
            out.append((None, part))
    return out


def _forced(values: list[tuple[str | None, str]], name: str) -> bool:
    """Whether ``name`` (e.g. LL128) is forced, i.e. named and not excluded with ``^``."""
    for _coll, val in values:
        if val.startswith("^"):
            continue
        if name.lower() in [v.strip().lower() for v in val.split(",")]:
            return True
    return False


Rule = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], list[Finding]]


def rule_removed_flags(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    return [
        Finding(
            "error",
            "removed-flag",
            f"configurations.{name}.server_args.{flag}: --{flag} was removed in SGLang 0.5.23; use {instead}",
        )
        for flag, instead in REMOVED_FLAGS.items()
        if flag in sa and _is_set(sa[flag])
    ]


def rule_fusion_sm120(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    arch = (plan.get("gpu_arch") or "").lower()
    if not _fusion_requested(sa) or not arch or arch in FUSION_NATIVE_ARCHS:
        return []
    if _image_is_fusion_patched(plan, images):
        return []
    flag = (
        "flashinfer-allreduce-fusion-backend"
        if _is_set(sa.get("flashinfer-allreduce-fusion-backend"))
        else "enable-flashinfer-allreduce-fusion"
    )
    return [
        Finding(
            "error",
            "fusion-arch",
            f"configurations.{name}.server_args.{flag}: FlashInfer all-reduce fusion is gated to SM90/SM10x "
            f"in SGLang 0.5.23 and an explicit request raises at startup on {arch}; run it on the patched image "
            f"(image: {sorted(FUSION_PATCHED_IMAGES)[0]}), not image {plan.get('image')!r}",
        )
    ]


def rule_mscclpp_tp(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    if not _is_set(sa.get("enable-mscclpp")):
        return []
    tp = tp_size(sa)
    if tp in MSCCLPP_TP_SIZES:
        return []
    return [
        Finding(
            "error",
            "mscclpp-tp",
            f"configurations.{name}.server_args.enable-mscclpp: MSCCL++ all-reduce supports TP sizes "
            f"{sorted(MSCCLPP_TP_SIZES)}, got tp-size {tp}",
        )
    ]


def rule_deepep_nvlink(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    if sa.get("moe-a2a-backend") != "deepep" or plan.get("nvlink") is not False:
        return []
    mode = sa.get("deepep-mode") or "auto"
    if mode == "low_latency":
        return []
    return [
        Finding(
            "error",
            "deepep-nvlink",
            f"configurations.{name}.server_args.deepep-mode: DeepEP mode {mode!r} uses normal-mode kernels "
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


def rule_deepep_rdma(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    if sa.get("moe-a2a-backend") != "deepep" or (sa.get("deepep-mode") or "auto") != "low_latency":
        return []
    rdma = plan.get("rdma")
    if rdma is True:
        return []
    what = (
        f"configurations.{name}.server_args.deepep-mode: DeepEP low_latency mode sends tokens over RDMA "
        f"(NVSHMEM IBGDA) even between GPUs of one node ({DEEPEP_RDMA_SOURCE})"
    )
    if rdma is False:
        return [Finding("error", "deepep-rdma", f"{what}; this target has rdma: false"
                        + (" and nvlink: false, so no DeepEP mode can run here" if plan.get("nvlink") is False else ""))]
    return [Finding("warning", "deepep-rdma", f"{what}; this target's rdma is not known (set rdma: true/false): "
                    f"without RDMA NICs with GPUDirect RDMA the server fails at startup")]


def rule_nccl_env(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    env = plan.get("env") or {}
    findings: list[Finding] = []
    proto = env.get("NCCL_PROTO")
    if proto is not None and plan.get("nvlink") is False and _forced(_nccl_values(proto), "LL128"):
        findings.append(
            Finding(
                "error",
                "nccl-ll128-pcie",
                f"configurations.{name}.env.NCCL_PROTO: {proto!r} forces LL128 on a PCIe-only target "
                f"(nvlink: false); LL128 over PCIe has been reported to corrupt results silently, so "
                f"a number measured with it cannot be trusted",
            )
        )
    algo = env.get("NCCL_ALGO")
    if algo is not None and plan.get("expect") != "failure":
        for coll, val in _nccl_values(algo):
            if coll is None and not val.startswith("^") and "tree" in val.lower().split(","):
                findings.append(
                    Finding(
                        "warning",
                        "nccl-bare-tree",
                        f"configurations.{name}.env.NCCL_ALGO: {algo!r} also constrains broadcast and "
                        f"all-gather, for which NCCL may find no algorithm (it failed in CUDA graph capture "
                        f"in the seeds' runs); use 'allreduce:tree', or mark the configuration expect: failure "
                        f"with expect_signature: [nccl_no_algorithm, cuda_graph_capture_failed]",
                    )
                )
    return findings


def rule_eagle_numbers(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.get("server_args") or {}
    given = [k for k in EAGLE_NUMBERS if _is_set(sa.get(k))]
    findings: list[Finding] = []
    if given and len(given) != len(EAGLE_NUMBERS):
        missing = [k for k in EAGLE_NUMBERS if k not in given]
        findings.append(
            Finding(
                "error",
                "eagle-partial",
                f"configurations.{name}.server_args.{missing[0]}: give all of "
                f"{', '.join('--' + k for k in EAGLE_NUMBERS)} or none (SGLang then picks all three); "
                f"given only {', '.join('--' + k for k in given)}",
            )
        )
        return findings
    if given:
        if str(sa.get("speculative-algorithm") or "").upper() not in EAGLE_ALGORITHMS | {"NEXTN", "STANDALONE"}:
            findings.append(
                Finding(
                    "warning",
                    "eagle-without-algorithm",
                    f"configurations.{name}.server_args.speculative-algorithm: speculative numbers are "
                    f"given but speculative-algorithm is {sa.get('speculative-algorithm')!r}",
                )
            )
        steps, topk, draft = (int(sa[k]) for k in EAGLE_NUMBERS)
        if topk == 1 and draft != steps + 1:
            findings.append(
                Finding(
                    "error",
                    "eagle-draft-tokens",
                    f"configurations.{name}.server_args.speculative-num-draft-tokens: with "
                    f"--speculative-eagle-topk 1 the draft tokens must be num-steps + 1 = {steps + 1}, got {draft}",
                )
            )
    if str(sa.get("speculative-algorithm") or "").upper() in EAGLE_ALGORITHMS and not _is_set(
        sa.get("speculative-draft-model-path")
    ):
        findings.append(
            Finding(
                "error",
                "eagle-draft-path",
                f"configurations.{name}.server_args.speculative-draft-model-path: "
                f"speculative-algorithm {sa.get('speculative-algorithm')} needs a draft model path",
            )
        )
    return findings


def rule_variants(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    """Unknown variant names are errors (the evidence check could never prove them);
    variants that will predictably fall back on this target are warnings."""
    sa = plan.get("server_args") or {}
    env = plan.get("env") or {}
    arch = (plan.get("gpu_arch") or "").lower()
    tp = tp_size(sa)
    findings: list[Finding] = []
    for v in requested_variants(plan):
        if v not in KNOWN_VARIANTS:
            findings.append(
                Finding(
                    "error",
                    "variant-unknown",
                    f"configurations.{name}.variant: unknown variant {v!r}; known: {sorted(KNOWN_VARIANTS)}",
                )
            )
    variants = set(requested_variants(plan))
    if "custom_allreduce" in variants and _is_set(sa.get("disable-custom-all-reduce")):
        findings.append(
            Finding(
                "error",
                "custom-ar-disabled",
                f"configurations.{name}.server_args.disable-custom-all-reduce: variant custom_allreduce is "
                f"requested but the flag disables it",
            )
        )
    if "custom_allreduce" in variants and plan.get("nvlink") is False and tp > 2:
        findings.append(
            Finding(
                "warning",
                "custom-ar-pcie",
                f"configurations.{name}.variant: custom_allreduce on {tp} PCIe-only GPUs disables itself in "
                f"SGLang 0.5.23 and falls back to NCCL (expected status: fallback)",
            )
        )
    if "torch_symm_mem" in variants and arch and not (arch.startswith("sm9") or arch.startswith("sm10")):
        findings.append(
            Finding(
                "warning",
                "symm-mem-arch",
                f"configurations.{name}.server_args.enable-torch-symm-mem: torch symmetric memory needs SM90/SM10x "
                f"and multicast; on {arch} SGLang warns and uses NCCL (expected status: fallback)",
            )
        )
    pcie_ipc = str(env.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE") or "").lower()
    if pcie_ipc in ("1", "true"):
        if tp not in PCIE_IPC_TP_SIZES:
            findings.append(
                Finding(
                    "warning",
                    "pcie-ipc-tp",
                    f"configurations.{name}.env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: FlashInfer PCIe-IPC all-reduce "
                    f"serves TP {sorted(PCIE_IPC_TP_SIZES)}; tp-size {tp} stays on NCCL",
                )
            )
    return findings


def rule_expect_signature(name: str, plan: Mapping[str, Any], images: Mapping[str, Any] | None) -> list[Finding]:
    """A known-failing case names the failure it is known for, by a name the log check knows."""
    wanted = plan.get("expect_signature") or []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    known = sorted(FAILURE_NAMES)
    findings = [
        Finding("error", "expect-signature-unknown",
                f"configurations.{name}.expect_signature: unknown failure signature {w!r}; known: {known}")
        for w in wanted if w not in FAILURE_NAMES
    ]
    if plan.get("expect") == "failure" and not wanted:
        findings.append(Finding(
            "error", "expect-signature-missing",
            f"configurations.{name}.expect_signature: expect: failure needs the failure it is known for "
            f"(one or more of {known}); otherwise any failure would count as the expected one"))
    if wanted and plan.get("expect") != "failure":
        findings.append(Finding("error", "expect-signature-without-failure",
                                f"configurations.{name}.expect_signature: given, but expect is not failure"))
    return findings


RULES: tuple[Rule, ...] = (
    rule_removed_flags,
    rule_fusion_sm120,
    rule_mscclpp_tp,
    rule_deepep_nvlink,
    rule_deepep_rdma,
    rule_nccl_env,
    rule_eagle_numbers,
    rule_variants,
    rule_expect_signature,
)


def check_plan(plan: Mapping[str, Any], images: Mapping[str, Any] | None = None) -> list[Finding]:
    """All findings of all rules for one resolved plan (its ``name`` names it in messages)."""
    name = plan.get("name", "?")
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(name, plan, images))
    return findings
