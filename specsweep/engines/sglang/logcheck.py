"""What a server log proves ran: SGLang's variant on/fallback lines and NCCL_DEBUG=INFO.

Why: every communication variant in SGLang 0.5.23 can silently fall back to
NCCL (custom all-reduce on >2 PCIe GPUs, torch symmetric memory without
multicast, MSCCL++ without its package, ...). A configuration that asked for a
variant and got NCCL measured NCCL; its number must not be reported as the
variant's. The only witness is the server's own log, so:

- :data:`SIGNATURES` holds SGLang's log lines for each variant being active or
  falling back, each regex written from the format string in the 0.5.23 wheel
  (``source``: file:line; ``literal``: a verbatim fragment of the format string,
  checked against the wheel by a slow test);
- :func:`parse_nccl` reads NCCL's ``NCCL INFO`` / ``NCCL WARN`` lines (version,
  env it honoured, channels, transports, per-collective algorithm/protocol when
  NCCL_DEBUG_SUBSYS includes TUNING, "no algorithm/protocol available");
- :func:`variant_evidence` combines them for one plan. A requested variant
  with a fallback line is ``fell_back`` (the summary marks the configuration
  ``fallback``); one with neither line is ``unproven``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specsweep.engines.sglang.rules import requested_variants


@dataclass(frozen=True)
class Signature:
    variant: str
    kind: str  # "active" | "fallback"
    pattern: re.Pattern[str]
    source: str  # file:line in the sglang 0.5.23 wheel
    literal: str  # verbatim fragment of the format string at ``source``


def _sig(variant: str, kind: str, pattern: str, source: str, literal: str) -> Signature:
    return Signature(variant, kind, re.compile(pattern), source, literal)


_DCOMM = "sglang/srt/distributed/device_communicators"
# cls_name passed to can_use_custom_all_reduce_with_nvlink (custom_all_reduce.py:91, custom_all_reduce_v2.py:595)
_CA = r"(?:CustomAllreduce|CustomAllReduceV2)"

SIGNATURES: tuple[Signature, ...] = (
    # --- custom all-reduce (no INFO line when it is on; only the reasons it is off)
    _sig("custom_allreduce", "fallback",
         _CA + r" is disabled because it's not supported on more than two PCIe-only GPUs",
         f"{_DCOMM}/custom_all_reduce_utils.py:494", "is disabled because it's not supported on"),
    _sig("custom_allreduce", "fallback", _CA + r" is disabled due to an unsupported world size: \d+",
         f"{_DCOMM}/custom_all_reduce_utils.py:469", "is disabled due to an unsupported world"),
    _sig("custom_allreduce", "fallback", _CA + r" is disabled because your platform lacks GPU P2P capability",
         f"{_DCOMM}/custom_all_reduce_utils.py:506", "is disabled because your platform lacks "),
    _sig("custom_allreduce", "fallback", _CA + r" is disabled because this process group spans across nodes",
         f"{_DCOMM}/custom_all_reduce_utils.py:462", "is disabled because this process group spans across nodes."),
    _sig("custom_allreduce", "fallback", r"Setup Custom allreduce failed with",
         "sglang/srt/distributed/parallel_state.py:515", "Setup Custom allreduce failed with"),
    # --- MSCCL++
    _sig("mscclpp", "active", r"Created MSCCL\+\+ communicator: group=\S+ world_size=\d+",
         f"{_DCOMM}/pymscclpp.py:1123", "Created MSCCL++ communicator: group=%s world_size=%d device=%s "),
    _sig("mscclpp", "fallback", r"PyMscclpp is unavailable because its dependencies failed to import",
         f"{_DCOMM}/pymscclpp.py:1053", "PyMscclpp is unavailable because its dependencies failed to import: %s"),
    _sig("mscclpp", "fallback", r"PyMscclpp is disabled due to an unsupported world size",
         f"{_DCOMM}/pymscclpp.py:1077", "PyMscclpp is disabled due to an unsupported world"),
    _sig("mscclpp", "fallback", r"PyMscclpp is disabled due to an unsupported group",
         f"{_DCOMM}/pymscclpp.py:1089", "PyMscclpp is disabled due to an unsupported group %s."),
    _sig("mscclpp", "fallback", r"PyMscclpp did not produce any usable tuned configurations",
         f"{_DCOMM}/pymscclpp.py:1120", "PyMscclpp did not produce any usable tuned configurations."),
    # --- torch symmetric memory (no INFO line when it is on)
    _sig("torch_symm_mem", "fallback", r"TorchSymmMemCommunicator: Device capability .* not supported",
         f"{_DCOMM}/torch_symm_mem.py:85", "TorchSymmMemCommunicator: Device capability %s not supported, "),
    _sig("torch_symm_mem", "fallback", r"TorchSymmMemCommunicator: World size \d+ not supported",
         f"{_DCOMM}/torch_symm_mem.py:92", "TorchSymmMemCommunicator: World size %d not supported, "),
    _sig("torch_symm_mem", "fallback",
         r"TorchSymmMemCommunicator: torch symmetric memory multicast operations are not supported",
         f"{_DCOMM}/torch_symm_mem.py:118", "TorchSymmMemCommunicator: torch symmetric memory "),
    # --- FlashInfer all-reduce + RMSNorm fusion
    _sig("flashinfer_fusion", "active", r"FlashInfer AllReduce Fusion enabled and workspace initialized: backend=\S+",
         "sglang/srt/layers/flashinfer_comm_fusion.py:580",
         "FlashInfer AllReduce Fusion enabled and workspace initialized: "),
    _sig("flashinfer_fusion", "fallback", r"FlashInfer workspace preflight probe failed .*Skipping allreduce fusion",
         "sglang/srt/layers/flashinfer_comm_fusion.py:368", "FlashInfer workspace preflight probe failed (%s). "),
    _sig("flashinfer_fusion", "fallback",
         r"FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank\. Skipping allreduce fusion",
         "sglang/srt/layers/flashinfer_comm_fusion.py:387",
         "FlashInfer workspace preflight: cuMemCreate probe failed on at "),
    _sig("flashinfer_fusion", "fallback", r"FlashInfer AllReduce fusion disabled: the \d+ ranks of this group",
         "sglang/srt/layers/flashinfer_comm_fusion.py:500",
         "FlashInfer AllReduce fusion disabled: the %d ranks of this group are "),
    _sig("flashinfer_fusion", "fallback", r"Failed to initialize FlashInfer workspace \(backend=\S+\): .*Disabling",
         "sglang/srt/layers/flashinfer_comm_fusion.py:593",
         "Failed to initialize FlashInfer workspace (backend={backend}): "),
    _sig("flashinfer_fusion", "fallback", r"FlashInfer allreduce fusion disabled globally",
         "sglang/srt/layers/flashinfer_comm_fusion.py:737", "FlashInfer allreduce fusion disabled globally because "),
    _sig("flashinfer_fusion", "fallback", r"flashinfer\.comm (?:unified )?allreduce_fusion API is not available",
         "sglang/srt/layers/flashinfer_comm_fusion.py:132",
         "flashinfer.comm allreduce_fusion API is not available (%s), "),
    _sig("flashinfer_fusion", "fallback", r"FlashInfer comm not available, skipping workspace initialization",
         "sglang/srt/layers/flashinfer_comm_fusion.py:475",
         "FlashInfer comm not available, skipping workspace initialization"),
    _sig("flashinfer_fusion", "fallback", r"FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs",
         "sglang/srt/layers/flashinfer_comm_fusion.py:50",
         "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."),
    # --- FlashInfer PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1)
    _sig("pcie_ipc_allreduce", "active", r"FlashInfer PCIe-IPC all-reduce enabled \(world=\d+",
         f"{_DCOMM}/pcie_ipc_ar.py:242", "FlashInfer PCIe-IPC all-reduce enabled (world=%d, workspace sized on "),
    _sig("pcie_ipc_allreduce", "fallback",
         r"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm",
         f"{_DCOMM}/pcie_ipc_ar.py:228", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has "),
    _sig("pcie_ipc_allreduce", "fallback", r"Deterministic inference is on; leaving PCIe-IPC all-reduce off",
         f"{_DCOMM}/pcie_ipc_ar.py:92", "Deterministic inference is on; leaving PCIe-IPC all-reduce off. Its "),
    _sig("pcie_ipc_allreduce", "fallback", r"Setup FlashInfer PCIe-IPC allreduce failed with",
         "sglang/srt/distributed/parallel_state.py:501", "Setup FlashInfer PCIe-IPC allreduce failed with {e}."),
    _sig("pcie_ipc_allreduce", "fallback",
         r"FlashInfer PCIe-IPC workspace \(max_numel=\d+\) failed: .*reductions stay on NCCL",
         f"{_DCOMM}/pcie_ipc_ar.py:288", "FlashInfer PCIe-IPC workspace (max_numel=%d) failed: %s; "),
    _sig("pcie_ipc_allreduce", "fallback", r"FlashInfer PCIe-IPC all-reduce skipped: unsupported world size \d+",
         f"{_DCOMM}/pcie_ipc_ar.py:214", "FlashInfer PCIe-IPC all-reduce skipped: unsupported world size %d"),
    # --- DeepEP (when on, nothing at INFO without --deepep-config; a missing package raises)
    _sig("deepep", "active", r"Use DeepEP Config: ",
         "sglang/srt/layers/moe/token_dispatcher/deepep.py:347", "Use DeepEP Config: {config_parsed}"),
    _sig("deepep", "fallback", r"DeepEP is not available\. Please install DeepEP package",
         "sglang/srt/layers/moe/token_dispatcher/deepep.py:383",
         "DeepEP is not available. Please install DeepEP package from "),
)

# Further lines: partial use (kind "note": reported, not a fallback) and the PCIe-IPC
# workspace really built (kind "active").
NOTES: tuple[Signature, ...] = (
    _sig("pcie_ipc_allreduce", "note", r"FlashInfer PCIe-IPC all-reduce serves bf16 only; \S+ reductions stay on NCCL",
         f"{_DCOMM}/pcie_ipc_ar.py:121",
         "FlashInfer PCIe-IPC all-reduce serves bf16 only; %s reductions stay on NCCL."),
    _sig("pcie_ipc_allreduce", "active", r"FlashInfer PCIe-IPC workspace built \(world=\d+, max_numel=\d+",
         f"{_DCOMM}/pcie_ipc_ar.py:299", "FlashInfer PCIe-IPC workspace built (world=%d, max_numel=%d, hidden=%d)"),
)

# --- NCCL ------------------------------------------------------------------

# "host:pid:tid [dev] NCCL INFO message" (NCCL's debug.cc prefix), level INFO/WARN/TRACE.
_NCCL_LINE = re.compile(r"\bNCCL (?P<level>INFO|WARN|TRACE)\s+(?P<msg>.*?)\s*$")
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?:\+(?P<build>[\w.]+))?")
# param.cc / ncclGetEnv users: "NCCL_ALGO set by environment to Ring" (ints end with a '.')
_NCCL_ENV = re.compile(r"^(?P<key>NCCL_\w+) set by environment to (?P<value>.*?)\.?$")
# enqueue.cc (NCCL_TUNING): "AllReduce: 28672 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..15}"
_NCCL_TUNING = re.compile(
    r"(?P<coll>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
)
# init.cc: "Channel 00/16 :    0   1   2 ..." (ring order per channel)
_NCCL_CHANNEL = re.compile(r"^Channel (?P<idx>\d+)/(?P<n>\d+) :")
# transport lines: "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
_NCCL_VIA = re.compile(r" via (?P<transport>[A-Za-z0-9_/]+)")
_NCCL_COLL_CHANNELS = re.compile(r"(?P<n>\d+) coll channels")
_NCCL_NO_ALGO = re.compile(
    r"no algorithm/protocol available(?: for function (?P<func>\w+)(?: with datatype (?P<dtype>\w+))?)?"
)
_NCCL_TREES = re.compile(r"^Trees \[")
# Not what NCCL chose, only how it was asked to log; left out of the env check.
_NCCL_ENV_IGNORED = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"})


def parse_nccl(log: str) -> dict[str, Any]:
    """Summarise NCCL_DEBUG=INFO output in ``log`` (all ranks interleaved).

    Returns ``{"version", "build", "env": {key: value}, "collectives":
    {coll: {"algorithms": [...], "protocols": [...], "calls": n}}, "channels",
    "coll_channels", "transports", "trees", "no_algorithm": [lines], "warnings":
    [lines], "lines": n}``. Absent facts are ``None``/empty, never guessed:
    per-collective choices appear only with NCCL_DEBUG_SUBSYS including TUNING.
    """
    out: dict[str, Any] = {
        "version": None,
        "build": None,
        "env": {},
        "collectives": {},
        "channels": None,
        "coll_channels": None,
        "transports": [],
        "trees": False,
        "no_algorithm": [],
        "warnings": [],
        "lines": 0,
    }
    transports: set[str] = set()
    for raw in log.splitlines():
        m = _NCCL_LINE.search(raw)
        if not m:
            continue
        out["lines"] += 1
        level, msg = m.group("level"), m.group("msg")
        if level == "WARN":
            out["warnings"].append(raw.strip())
        if (v := _NCCL_VERSION.search(msg)) and out["version"] is None:
            out["version"], out["build"] = v.group("version"), v.group("build")
            continue
        if e := _NCCL_ENV.match(msg):
            out["env"].setdefault(e.group("key"), e.group("value").strip())
            continue
        if t := _NCCL_TUNING.search(msg):
            coll = out["collectives"].setdefault(t.group("coll"), {"algorithms": [], "protocols": [], "calls": 0})
            coll["calls"] += 1
            if t.group("algo") not in coll["algorithms"]:
                coll["algorithms"].append(t.group("algo"))
            if t.group("proto") not in coll["protocols"]:
                coll["protocols"].append(t.group("proto"))
            continue
        if c := _NCCL_CHANNEL.match(msg):
            via = _NCCL_VIA.search(msg)
            if via:
                transports.add(via.group("transport"))
            else:
                n = int(c.group("n"))
                out["channels"] = max(out["channels"] or 0, n)
            continue
        if (cc := _NCCL_COLL_CHANNELS.search(msg)) and out["coll_channels"] is None:
            out["coll_channels"] = int(cc.group("n"))
        if _NCCL_TREES.match(msg):
            out["trees"] = True
        if _NCCL_NO_ALGO.search(msg):
            out["no_algorithm"].append(raw.strip())
    out["transports"] = sorted(transports)
    return out


def _nccl_env_evidence(nccl: Mapping[str, Any], env: Mapping[str, str]) -> tuple[bool, list[str]]:
    """Whether NCCL reports every NCCL_* value the plan set; mismatching lines for the ones it changed."""
    wanted = {k: str(v) for k, v in env.items() if k.startswith("NCCL_") and k not in _NCCL_ENV_IGNORED}
    seen = nccl["env"]
    mismatched = [
        f"NCCL reports {k} set by environment to {seen[k]} (plan: {v})"
        for k, v in wanted.items()
        if k in seen and seen[k] != v
    ]
    proven = bool(wanted) and all(k in seen and seen[k] == v for k, v in wanted.items())
    return proven, mismatched


def variant_evidence(log: str, plan: Mapping[str, Any]) -> dict[str, Any]:
    """Compare what ``plan`` requested (its ``variant`` list) with what ``log`` shows.

    Returns ``{"requested", "active", "fell_back": [{"variant", "line"}],
    "unproven", "notes": [{"variant", "line"}], "nccl"}``. ``active`` lists
    every variant with a positive line (requested or not) and no fallback
    line; ``fell_back`` only requested variants (a variant nobody asked for
    falling back is normal: custom all-reduce on PCIe); ``unproven`` the
    requested ones with neither. NCCL errors such as "no algorithm/protocol
    available" make ``nccl_env`` fall back.
    """
    requested = requested_variants(plan)
    lines = log.splitlines()
    active_hits: dict[str, str] = {}
    fallback_hits: dict[str, str] = {}
    notes: list[dict[str, str]] = []
    for line in lines:
        for sig in SIGNATURES + NOTES:
            if sig.pattern.search(line):
                if sig.kind == "active":
                    active_hits.setdefault(sig.variant, line.strip())
                elif sig.kind == "fallback":
                    fallback_hits.setdefault(sig.variant, line.strip())
                else:
                    note = {"variant": sig.variant, "line": line.strip()}
                    if note not in notes:
                        notes.append(note)
    nccl = parse_nccl(log)
    env_proven, env_mismatch = _nccl_env_evidence(nccl, plan.get("env") or {})
    if env_proven:
        active_hits["nccl_env"] = "NCCL reports every NCCL_* value of the plan as set by environment"
    if env_mismatch:
        fallback_hits["nccl_env"] = env_mismatch[0]
    if nccl["no_algorithm"]:
        fallback_hits["nccl_env"] = nccl["no_algorithm"][0]

    active = sorted(v for v in active_hits if v not in fallback_hits)
    fell_back = [{"variant": v, "line": fallback_hits[v]} for v in requested if v in fallback_hits]
    unproven = [v for v in requested if v not in active_hits and v not in fallback_hits]
    return {
        "requested": requested,
        "active": active,
        "fell_back": fell_back,
        "unproven": unproven,
        "notes": notes,
        "nccl": nccl,
    }
