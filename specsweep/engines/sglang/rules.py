"""Known incompatibilities of SGLang 0.5.23 configurations, checked without SGLang.

SGLang's own parser (see :mod:`specsweep.engines.sglang.preflight`) catches unknown
flags and bad values, but not combinations that parse fine and then fail
minutes into startup on an 8-GPU host (or, worse, silently fall back). Each
rule here encodes one such case, read from the 0.5.23 wheel or from the
Kimi-K2.5 case's runs (docs/sglang.md, "The case"), and its message names the
configuration and the flag so that the fix is obvious.

Rules read only the resolved plan (``contracts.plan.Plan``: ``server_args``,
``env``, ``image``, ``gpus``, ``gpu_arch``, ``nvlink``, ``rdma``, ``volumes``),
its labels (``variant``, ``expect``, ``expect_signature``), optionally the
config's ``images:`` mapping, and the model directory's ``config.json`` (its
quantization; a file read, no SGLang). They are cheap, so they run first: when the workflow
starts (``snakemake -n`` included) and in ``python -m specsweep check``
before any parser environment is built. ``expect`` is a label, not in a
plan: where the labels are not known (None: a preflight job reads plan.json
alone), a rule whose verdict depends on them says so in a warning, its verdict when the
labels are known (:meth:`SGLangEngine.check_labels`). DeepEP's rules (NVLink,
RDMA, the model's quantization) are in :mod:`specsweep.engines.sglang.deepep`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Finding, Labels, Rule, requested_variants
from specsweep.engines.sglang.args import is_set as _is_set
from specsweep.engines.sglang.args import tp_size
from specsweep.engines.sglang.deepep import rule_deepep_nvlink, rule_deepep_quantization, rule_deepep_rdma
from specsweep.engines.sglang.environ import env_bool
from specsweep.engines.sglang.logcheck import failure_names
from specsweep.engines.variants import VARIANTS, known_variants, plan_rules

# Variant names the evidence check knows (``variant:`` in config.yaml): the registry's for this engine.
KNOWN_VARIANTS = known_variants("sglang")

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
# Images built with the FlashInfer AR+RMSNorm fusion patch for SM120: by name, or by the image target that
# carries the variant (the registry's).
FUSION_PATCHED_IMAGES = frozenset({"sglang-fi-fusion"})
FUSION_TARGET = VARIANTS["flashinfer_fusion"].image_target
FUSION_PATCH_MARKER = "flashinfer-fusion"
# Architectures where SGLang itself gates the fusion on (SM90 / SM10x).
FUSION_NATIVE_ARCHS = frozenset({"sm90", "sm100", "sm103"})
EAGLE_ALGORITHMS = frozenset({"EAGLE", "EAGLE3"})
# Names ``expect_signature`` may take: the failure signatures of the log check (logcheck's
# FAILURES and NCCL_SIGNATURES of kind "failure"), read from its table.
FAILURE_NAMES = frozenset(failure_names())
EAGLE_NUMBERS = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


def _fusion_requested(sa: Mapping[str, Any]) -> bool:
    return _is_set(sa.get("flashinfer-allreduce-fusion-backend")) or _is_set(
        sa.get("enable-flashinfer-allreduce-fusion")
    )


def _image_is_fusion_patched(plan: Plan, images: Mapping[str, Any] | None) -> bool:
    image = plan.image
    if not image:
        return False
    if image in FUSION_PATCHED_IMAGES:
        return True
    spec = (images or {}).get(image) or {}
    if spec.get("target") == FUSION_TARGET:
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


def rule_removed_flags(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    return [
        Finding(
            "error",
            "removed-flag",
            f"configurations.{plan.name}.server_args.{flag}: --{flag} was removed in SGLang 0.5.23; use {instead}",
        )
        for flag, instead in REMOVED_FLAGS.items()
        if flag in sa and _is_set(sa[flag])
    ]


def rule_fusion_sm120(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    arch = (plan.gpu_arch or "").lower()
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
            f"configurations.{plan.name}.server_args.{flag}: FlashInfer all-reduce fusion is gated to SM90/SM10x "
            f"in SGLang 0.5.23 and an explicit request raises at startup on {arch}; run it on the patched image "
            f"(image: {sorted(FUSION_PATCHED_IMAGES)[0]}), not image {plan.image!r}",
        )
    ]


def rule_mscclpp_tp(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    if not _is_set(sa.get("enable-mscclpp")):
        return []
    tp = tp_size(sa)
    if tp in MSCCLPP_TP_SIZES:
        return []
    return [
        Finding(
            "error",
            "mscclpp-tp",
            f"configurations.{plan.name}.server_args.enable-mscclpp: MSCCL++ all-reduce supports TP sizes "
            f"{sorted(MSCCLPP_TP_SIZES)}, got tp-size {tp}",
        )
    ]


def rule_gpus_world_size(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    """``gpus`` (what the job reserves, and ``docker run --gpus``) against the GPUs SGLang's ranks need.

    One node runs tp-size x pp-size ranks, one GPU each (``--tp-size``/``--tensor-parallel-size``,
    ``--pp-size``/``--pipeline-parallel-size``, sglang/srt/arg_groups/fields/parallel.py:43-64): fewer
    GPUs fail at startup, more sit reserved and idle. Left alone with ``dp-size`` or ``nnodes`` other
    than 1 (data-parallel replicas and attention DP change the count in ways this rule does not model).
    """
    sa = plan.server_args
    gpus = plan.gpus
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        return []
    if any(_is_set(sa.get(k)) and int(sa[k]) != 1 for k in ("dp-size", "data-parallel-size", "nnodes")):
        return []
    pp = next((int(sa[k]) for k in ("pp-size", "pipeline-parallel-size") if _is_set(sa.get(k))), 1)
    world = tp_size(sa) * pp
    if world == gpus:
        return []
    how = f"tp-size {tp_size(sa)}" + (f" x pp-size {pp}" if pp != 1 else "")
    if world > gpus:
        return [Finding("error", "gpus-world-size",
                        f"configurations.{plan.name}.gpus: {gpus}, but {how} needs {world} GPUs (one per rank); "
                        f"set gpus: {world}, or a tp-size that fits")]
    return [Finding("warning", "gpus-world-size",
                    f"configurations.{plan.name}.gpus: {gpus}, but {how} uses {world}; the other {gpus - world} "
                    f"stay reserved and idle")]


def rule_nccl_env(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    env = plan.env
    findings: list[Finding] = []
    proto = env.get("NCCL_PROTO")
    if proto is not None and plan.nvlink is False and _forced(_nccl_values(proto), "LL128"):
        findings.append(
            Finding(
                "error",
                "nccl-ll128-pcie",
                f"configurations.{plan.name}.env.NCCL_PROTO: {proto!r} forces LL128 on a PCIe-only target "
                f"(nvlink: false); LL128 over PCIe has been reported to corrupt results silently, so "
                f"a number measured with it cannot be trusted",
            )
        )
    algo = env.get("NCCL_ALGO")
    if algo is not None and (labels or {}).get("expect") != "failure":
        for coll, val in _nccl_values(algo):
            if coll is None and not val.startswith("^") and "tree" in val.lower().split(","):
                findings.append(
                    Finding(
                        "warning",
                        "nccl-bare-tree",
                        f"configurations.{plan.name}.env.NCCL_ALGO: {algo!r} also constrains broadcast and "
                        f"all-gather, for which NCCL may find no algorithm (it failed in CUDA graph capture "
                        f"in the Kimi-K2.5 case's runs, docs/sglang.md); use 'allreduce:tree', "
                        "or mark the configuration expect: failure "
                        f"with expect_signature: [nccl_no_algorithm, cuda_graph_capture_failed]",
                    )
                )
    return findings


def rule_eagle_numbers(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    sa = plan.server_args
    given = [k for k in EAGLE_NUMBERS if _is_set(sa.get(k))]
    findings: list[Finding] = []
    if given and len(given) != len(EAGLE_NUMBERS):
        missing = [k for k in EAGLE_NUMBERS if k not in given]
        findings.append(
            Finding(
                "error",
                "eagle-partial",
                f"configurations.{plan.name}.server_args.{missing[0]}: give all of "
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
                    f"configurations.{plan.name}.server_args.speculative-algorithm: speculative numbers are "
                    f"given but speculative-algorithm is {sa.get('speculative-algorithm')!r}",
                )
            )
        steps, topk, draft = (int(sa[k]) for k in EAGLE_NUMBERS)
        if topk == 1 and draft != steps + 1:
            findings.append(
                Finding(
                    "error",
                    "eagle-draft-tokens",
                    f"configurations.{plan.name}.server_args.speculative-num-draft-tokens: with "
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
                f"configurations.{plan.name}.server_args.speculative-draft-model-path: "
                f"speculative-algorithm {sa.get('speculative-algorithm')} needs a draft model path",
            )
        )
    return findings


def rule_variants(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    """Unknown variant names are errors (the evidence check could never prove them);
    variants that will predictably fall back on this target are warnings."""
    sa = plan.server_args
    env = plan.env
    tp = tp_size(sa)
    findings: list[Finding] = []
    for v in requested_variants(labels or {}):
        if v not in KNOWN_VARIANTS:
            findings.append(
                Finding(
                    "error",
                    "variant-unknown",
                    f"configurations.{plan.name}.variant: unknown variant {v!r}; known: {sorted(KNOWN_VARIANTS)}",
                )
            )
    # What each requested variant's own entry checks (engines.variants: its ``rules``).
    for _variant, rule in plan_rules("sglang", requested_variants(labels or {})):
        findings.extend(rule(plan, labels, images))
    # A value SGLang cannot parse is refused with the config (plan.envcheck): SGLang would warn and run
    # with the default, off.
    pcie_ipc = env.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE")
    if pcie_ipc is not None and env_bool(pcie_ipc):
        if tp not in PCIE_IPC_TP_SIZES:
            findings.append(
                Finding(
                    "warning",
                    "pcie-ipc-tp",
                    f"configurations.{plan.name}.env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: FlashInfer PCIe-IPC all-reduce "
                    f"serves TP {sorted(PCIE_IPC_TP_SIZES)}; tp-size {tp} stays on NCCL",
                )
            )
        if tp == 2 and not _is_set(sa.get("disable-custom-all-reduce")):
            findings.append(Finding("warning", "pcie-ipc-custom-ar", _PCIE_IPC_CUSTOM_AR.format(name=plan.name)))
    return findings


# PCIe IPC at TP=2 with the custom all-reduce on measures the custom all-reduce (paths under sglang/srt/
# distributed/): on two PCIe GPUs with P2P the default CustomAllReduceV2 refuses silently (it wants full
# NVLink: device_communicators/custom_all_reduce_v2.py:586-604), the legacy CustomAllreduce comes up at
# world size 2 without NVLink (device_communicators/custom_all_reduce_utils.py:490-513: the PCIe-only
# refusal is for more than two GPUs), takes every tensor up to its max size at world size 2
# (device_communicators/custom_all_reduce.py:260-274) and is tried before PCIe IPC
# (parallel_state.py:959-975), logging nothing when on, while PCIe IPC still builds and logs its
# workspace. With NVLink the V2 kernel comes up and takes the tensors instead: either way, not PCIe IPC's.
_PCIE_IPC_CUSTOM_AR = (
    "configurations.{name}.server_args.disable-custom-all-reduce: PCIe IPC at tp-size 2 with SGLang's custom "
    "all-reduce on measures the custom all-reduce, not PCIe IPC: SGLang 0.5.23 tries it first and at world size "
    "2 it takes the all-reduces up to its size limit, logging nothing (sglang/srt/distributed/parallel_state.py:"
    "959-975, device_communicators/custom_all_reduce.py:260-274, custom_all_reduce_utils.py:490-513); set "
    "disable-custom-all-reduce: true"
)


def rule_expect_signature(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    """A known-failing case names the failure it is known for, by a name the log check knows."""
    wanted = (labels or {}).get("expect_signature") or []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    known = sorted(FAILURE_NAMES)
    findings = [
        Finding("error", "expect-signature-unknown",
                f"configurations.{plan.name}.expect_signature: unknown failure signature {w!r}; known: {known}")
        for w in wanted if w not in FAILURE_NAMES
    ]
    if (labels or {}).get("expect") == "failure" and not wanted:
        findings.append(Finding(
            "error", "expect-signature-missing",
            f"configurations.{plan.name}.expect_signature: expect: failure needs the failure it is known for "
            f"(one or more of {known}); otherwise any failure would count as the expected one"))
    if wanted and (labels or {}).get("expect") != "failure":
        findings.append(Finding("error", "expect-signature-without-failure",
                                f"configurations.{plan.name}.expect_signature: given, but expect is not failure"))
    return findings


RULES: tuple[Rule, ...] = (
    rule_removed_flags,
    rule_gpus_world_size,
    rule_fusion_sm120,
    rule_mscclpp_tp,
    rule_deepep_nvlink,
    rule_deepep_rdma,
    rule_nccl_env,
    rule_eagle_numbers,
    rule_variants,
    rule_expect_signature,
)


# Rules that also read the model directory (relative volume host paths start at ``base``).
FILE_RULES = (rule_deepep_quantization,)


def check_plan(plan: Plan, labels: Labels = None, images: Mapping[str, Any] | None = None,
               base: Path | None = None) -> list[Finding]:
    """All findings of all rules for one resolved plan and its labels (None: not known, as in a preflight job).

    ``base``: where relative volume host paths start (default: the working directory, as for ``docker run``).
    """
    base = Path.cwd() if base is None else Path(base)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(plan, labels, images))
    for file_rule in FILE_RULES:
        findings.extend(file_rule(plan, labels, images, base))
    return findings
