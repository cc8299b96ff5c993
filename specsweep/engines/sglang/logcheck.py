"""What a server log proves ran: SGLang's variant on/fallback lines and NCCL_DEBUG=INFO.

Why: every communication variant in SGLang 0.5.23 can silently fall back to
NCCL (custom all-reduce on >2 PCIe GPUs, torch symmetric memory without
multicast, MSCCL++ without its package, ...). A configuration that asked for a
variant and got NCCL measured NCCL; its number must not be reported as the
variant's. The only witness is the server's own log, so:

- :data:`SIGNATURES` holds SGLang's log lines for each variant being active or
  falling back, read from the variants' entries (``engines.variants``), each
  regex written from the format string in the 0.5.23 wheel
  (``source``: file:line; ``literal``: a verbatim fragment of the format string;
  ``level``: the logging call that prints it), all checked against the wheel
  by a slow test, which also requires each to print at the server's log level
  (``--log-level info``, SGLang's default): a line that prints only at DEBUG
  never reaches the log, so it is no evidence either way;
- :data:`FAILURES` the lines that name why a server failed (CUDA-graph capture
  failing in decode, EAGLE draft or prefill, FlashInfer fusion on an
  unsupported GPU, DeepEP on experts it cannot run; with NCCL finding no
  algorithm from :data:`NCCL_SIGNATURES`); a known-failing configuration
  (``expect: failure``) is an expected failure only when its own
  ``expect_signature`` matched;
- :data:`NCCL_SIGNATURES` the NCCL format strings :func:`parse_nccl` relies on,
  cited at NCCL v2.30.7-1 (the NCCL that torch 2.14.1 pins) and checked
  against the cited source fixture and the pinned ``libnccl.so.2``;
- :data:`ALLREDUCE_PRECEDENCE` SGLang's dispatch order for one all-reduce (the
  entries' ``precedence``):
  when two requested variants would both serve it, the one SGLang gives the
  call is credited and the other is ``shadowed`` (it may still log "enabled");
- :func:`parse_nccl` reads NCCL's ``NCCL INFO`` / ``NCCL WARN`` lines (version,
  env it honoured, channels, transports, per-collective algorithm/protocol when
  NCCL_DEBUG_SUBSYS includes TUNING, "no algorithm/protocol available");
- :func:`variant_evidence` combines them for one plan. A requested variant
  with a fallback line is ``fell_back`` (the summary marks the configuration
  ``fallback``); one with neither line is ``unproven``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Signature, log_line, requested_variants
from specsweep.engines.variants import allreduce_precedence, log_signatures

_sig = log_line


#: Python logging levels by name; "raise" = an exception whose traceback the
#: scheduler process logs at ERROR (``managers/scheduler.py`` run_scheduler_process).
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "exception": 40, "raise": 40, "critical": 50,
          "stderr": 50}
#: SGLang's default ``--log-level``.
DEFAULT_LOG_LEVEL = "info"


def prints_at(level: str, server_log_level: str = DEFAULT_LOG_LEVEL) -> bool:
    """Whether a line logged at ``level`` reaches a server log at ``server_log_level``."""
    return LEVELS[level] >= LEVELS[server_log_level.lower()]


#: SGLang's log lines for each variant being active or falling back, and further lines (kind "note":
#: partial use, reported, not a fallback): the variant entries' (``engines.variants``), SGLang's own.
SIGNATURES: tuple[Signature, ...] = tuple(s for s in log_signatures("sglang", "sglang") if s.kind != "note")
NOTES: tuple[Signature, ...] = tuple(s for s in log_signatures("sglang", "sglang") if s.kind == "note")

_BREAKABLE = r"Fail when using backend: breakable for prefill runner\."
_BREAKABLE_AT = "sglang/srt/model_executor/runner_backend_utils/breakable_cuda_graph/context.py:48"
_BREAKABLE_TEMPLATE = ("sglang/srt/model_executor/runner_backend_utils/__init__.py:24",
                       "Fail when using backend: {backend} for prefill runner.")

# Why a server failed, by name (``expect_signature`` in config.yaml names them).
# An exception raised in a TP scheduler is logged with its traceback at ERROR
# ("Scheduler hit an exception: ...", managers/scheduler.py:6372), hence "raise".
FAILURES: tuple[Signature, ...] = (
    _sig("flashinfer_fusion_arch", "failure", r"FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs",
         "sglang/srt/layers/flashinfer_comm_fusion.py:50",
         "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.", "raise"),
    _sig("cuda_graph_capture_failed", "failure", r"Capture cuda graph failed: ",
         "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:603",
         'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"', "raise"),
    _sig("cuda_graph_capture_failed", "failure", r"Capture cuda graph failed: ",
         "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py:297",
         'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"', "raise"),
    # Prefill uses the breakable CUDA graph by default on CUDA (model_executor/cuda_graph_config.py:119-154),
    # captured before decode (model_runner_components/cuda_graph_setup.py:421-424): a failure there is
    # logged with PREFILL_CUDA_GRAPH_CAPTURE_FAILED_MSG formatted with backend=Backend.BREAKABLE
    # ("breakable", cuda_graph_config.py:46) and re-raised, so the decode line above never comes.
    # The same line comes from any exception inside enable_breakable_cuda_graph()
    # (breakable_cuda_graph/context.py:35-49), at capture and at every prefill replay while serving
    # (runner/prefill_cuda_graph_runner.py:2351, ``execute``, through runner_backend/
    # breakable_cuda_graph_backend.py:270-271): capture happens before the HTTP server
    # answers /ready, so the line is a capture failure before readiness and a serving crash (an OOM, an
    # NCCL or illegal-address error in a prefill) after it.
    _sig("cuda_graph_capture_failed", "failure", _BREAKABLE, _BREAKABLE_AT, 'f"{type(exc).__name__}: {exc}\\n{msg}"',
         "error", _BREAKABLE_TEMPLATE, when="before_ready"),
    _sig("prefill_graph_replay_failed", "failure", _BREAKABLE, _BREAKABLE_AT,
         'f"{type(exc).__name__}: {exc}\\n{msg}"', "error", _BREAKABLE_TEMPLATE, when="after_ready"),
    # DeepEP with experts quantized other than FP8 / W4AFP8 (Kimi-K2.5's compressed-tensors INT4):
    # every MoE layer is a DeepEPMoE (layers/moe/ep_moe/layer.py:352-364); with a quantization,
    # low_latency (or auto) mode first asserts that DeepGEMM's JIT kernels load (:167-177, on a
    # GPU where they do not), then its low-latency forward asserts (:297-301), normal mode its
    # contiguous forward (:292-296). Preflight's deepep-quantization rule says so before launch.
    _sig("deepep_quantization", "failure", r"DeepEP \S+ mode requires deep_gemm",
         "sglang/srt/layers/moe/ep_moe/layer.py:177", 'f"DeepEP {self.deepep_mode} mode requires deep_gemm"',
         "raise"),
    _sig("deepep_quantization", "failure", r"forward_deepgemm_masked is deprecated",
         "sglang/srt/layers/moe/ep_moe/layer.py:301", '"forward_deepgemm_masked is deprecated"', "raise"),
    _sig("deepep_quantization", "failure", r"forward_deepgemm_contiguous is deprecated",
         "sglang/srt/layers/moe/ep_moe/layer.py:296", '"forward_deepgemm_contiguous is deprecated"', "raise"),
)

# --- NVSHMEM (DeepEP's low-latency transport): the variant entries' lines that NVSHMEM prints, cited at
# NVIDIA/nvshmem v3.4.5-0 (``engines.variants``, DeepEP's entry, says why they are its evidence), and the
# failures below. Level "info" = NVSHMEM INFO (needs NVSHMEM_DEBUG=INFO); "stderr" = NVSHMEMI_ERROR_PRINT,
# always printed; copied into tests/fixtures/nvshmem/source-v3.4.5.txt and checked against the pinned
# libnvshmem_host.so.3 by a slow test.
#
# Why DeepEP failed without RDMA ("deepep_rdma"): where DeepGEMM's kernels load (so the early
# assert at ep_moe/layer.py:167-177 passes), DeepEP's low-latency buffer brings NVSHMEM up
# before any MoE forward (sgl-deep-ep 0.1.2.post1 deep_ep/buffers/legacy.py:104-131 sets
# NVSHMEM_IB_ENABLE_IBGDA=1, then runtime.sync initialises NVSHMEM), so on a host without RDMA
# NVSHMEM's error comes before run_moe_core's assert (:297-301). IBGDA's init fails
# (transport.cpp:282); with no transport at all (P2P off: NVSHMEM_DISABLE_P2P=1 where NVLink is
# not allowed for low-latency mode, legacy.py:108) NVSHMEM says so (transport.cpp:294), its
# init swallows the error (init/init.cu:1103-1112) and the next NVSHMEM call exits the process
# with "nvshmem initialization failed, exiting" (init/init.cu:1114-1122, NVSHMEMI_ERROR_EXIT:
# exit(-1), no Python traceback).
NVSHMEM_SIGNATURES: tuple[Signature, ...] = log_signatures("sglang", "nvshmem") + (
    Signature("deepep_rdma", "failure", re.compile(r"init failed for transport: IBGDA"),
              "src/host/transport/transport.cpp:282", '"init failed for transport: IBGDA"', "stderr",
              library="nvshmem"),
    Signature("deepep_rdma", "failure", re.compile(r"Unable to initialize any transports"),
              "src/host/transport/transport.cpp:294", '"Unable to initialize any transports. returning error."',
              "stderr", library="nvshmem"),
    Signature("deepep_rdma", "failure", re.compile(r"nvshmem initialization failed, exiting"),
              "src/host/init/init.cu:1119", '"nvshmem initialization failed, exiting \\n"', "stderr",
              library="nvshmem"),
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
# 2.30.7: "No algorithm/protocol available for ..."; 2.27 and older: "Error : no algorithm/protocol available ...".
_NCCL_NO_ALGO = re.compile(
    r"(?:No|Error : no) algorithm/protocol available(?: for function (?P<func>\w+)(?: with datatype (?P<dtype>\w+))?)?"
)
_NCCL_TREES = re.compile(r"^Trees \[")
_NCCL_SRC = "NVIDIA/nccl@v2.30.7-1"
#: The NCCL lines parse_nccl relies on: (pattern, source, literal format string, level). Cited at
#: NCCL v2.30.7-1 (commit 73cf112295c33aee2b895f329f592f2a9b4b0f97), copied into
#: tests/fixtures/nccl/source-v2.30.7.txt and checked against the pinned libnccl.so.2 by a slow test.
#: NCCL_DEBUG=INFO prints INFO and WARN; TUNING lines only with NCCL_DEBUG_SUBSYS including TUNING.
NCCL_SIGNATURES: tuple[Signature, ...] = (
    Signature("nccl_line", "nccl", re.compile(r"NCCL INFO "), "src/debug.cc:354", '"[%d] NCCL INFO %s\\n"', "info"),
    Signature("nccl_line", "nccl", re.compile(r"NCCL WARN "), "src/debug.cc:345", '"[%d] %s:%d (%s) NCCL WARN %s\\n"',
              "warning"),
    Signature("version", "nccl", _NCCL_VERSION, "src/init.cc:695", '"NCCL version " STR(NCCL_MAJOR)', "info"),
    Signature("env", "nccl", _NCCL_ENV, "src/misc/param.cc:100", '"%s set by environment to %lld."', "info"),
    Signature("env", "nccl", _NCCL_ENV, "src/graph/tuning.cc:460", '"NCCL_ALGO set by environment to %s"', "info"),
    Signature("env", "nccl", _NCCL_ENV, "src/graph/tuning.cc:455", '"NCCL_PROTO set by environment to %s"', "info"),
    Signature("env", "nccl", _NCCL_ENV, "src/graph/paths.cc:274", '"%s set by environment to %s"', "info"),
    Signature("tuning", "nccl", _NCCL_TUNING, "src/enqueue.cc:822",
              '"%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"', "info"),
    Signature("channel", "nccl", _NCCL_CHANNEL, "src/graph/rings.cc:48", '"Channel %02d/%02d :"', "info"),
    Signature("transport", "nccl", _NCCL_VIA, "src/transport/p2p.cc:423",
              '"Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s"', "info"),
    Signature("coll_channels", "nccl", _NCCL_COLL_CHANNELS, "src/init.cc:1646",
              '"%d coll channels, %d collnet channels',
              "info"),
    Signature("trees", "nccl", _NCCL_TREES, "src/init.cc:1497", '"Trees%s"', "info"),
    Signature("nccl_no_algorithm", "failure", _NCCL_NO_ALGO, "src/enqueue.cc:2063",
              '"No algorithm/protocol available for function %s with datatype %s.%s%s"', "warning"),
)

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


#: SGLang 0.5.23's order for one TP all-reduce (``distributed/parallel_state.py:673``,
#: ``GroupCoordinator.all_reduce``; ``:949-989``, ``_resolve_outplace_all_reduce_method``): a group tagged
#: for FlashInfer's all-reduce
#: (``--flashinfer-allreduce-fusion-backend``, ``_tag_groups_for_flashinfer_allreduce_only``)
#: sends every 2-D tensor its fusion workspace fits (decode/verify sizes) to
#: ``flashinfer_allreduce`` before anything else; then
#: ``_resolve_outplace_all_reduce_method`` tries custom all-reduce ("ca") and
#: PCIe IPC only when MSCCL++ does not take the tensor, then MSCCL++, then torch
#: symmetric memory. So of two variants that are both active, the earlier one
#: here gets the call and the later one is shadowed.
ALLREDUCE_PRECEDENCE: tuple[str, ...] = allreduce_precedence("sglang")  # the entries' ``precedence``
PRECEDENCE_SOURCE = "sglang/srt/distributed/parallel_state.py:959-989 (_resolve_outplace_all_reduce_method)"


def _shadowed(active: list[str]) -> list[dict[str, str]]:
    """Active all-reduce variants that a higher-precedence active variant takes the call from."""
    competing = [v for v in ALLREDUCE_PRECEDENCE if v in active]
    if len(competing) < 2:
        return []
    winner = competing[0]
    return [
        {"variant": v, "by": winner,
         "why": f"SGLang dispatches the all-reduce to {winner} before {v} ({PRECEDENCE_SOURCE}); "
                f"{v} may still log that it is enabled, but the measured all-reduces are {winner}'s"}
        for v in competing[1:]
    ]


def failure_signatures(ready: bool) -> tuple[Signature, ...]:
    """The failure signatures that can name a failure of a server that did (``ready``) or did not answer
    /ready: SGLang's (:data:`FAILURES`, each ``when`` it applies) and NVSHMEM's."""
    when = "after_ready" if ready else "before_ready"
    return tuple(s for s in FAILURES + NVSHMEM_SIGNATURES if s.kind == "failure" and s.when in (None, when))


def variant_evidence(log: str, requested: Sequence[str], env: Mapping[str, str], ready: bool = False
                     ) -> dict[str, Any]:
    """Compare what was requested (the ``variant`` label's names, sorted: ``contracts.variants.requested_variants``)
    with what ``log`` shows, the plan's ``env`` telling which NCCL settings NCCL must report.

    ``log`` is the server's log with the NCCL debug files appended (NCCL_DEBUG_FILE); ``ready``:
    whether the server answered /ready (launch.json's ``ready_s``), which tells a breakable-graph
    failure at capture (before) from a crash while serving (after).
    Returns ``{"requested", "active", "fell_back": [{"variant", "line"}],
    "shadowed": [{"variant", "by", "why"}], "unproven", "notes": [{"variant",
    "line"}], "failures": [{"signature", "line"}], "nccl"}``. ``active`` lists
    every variant with a positive line (requested or not), no fallback line,
    and not shadowed; ``fell_back`` only requested variants (a variant nobody
    asked for falling back is normal: custom all-reduce on PCIe); ``shadowed``
    requested variants whose positive line appears but whose all-reduces a
    higher-precedence active variant takes (:data:`ALLREDUCE_PRECEDENCE`);
    ``unproven`` the requested ones with neither line. NCCL errors such as
    "No algorithm/protocol available" make ``nccl_env`` fall back.
    """
    requested = list(requested)
    lines = log.splitlines()
    active_hits: dict[str, str] = {}
    fallback_hits: dict[str, str] = {}
    notes: list[dict[str, str]] = []
    failures: list[dict[str, str]] = []
    failing = failure_signatures(ready)
    for line in lines:
        for sig in SIGNATURES + NOTES + NVSHMEM_SIGNATURES:
            if sig.kind != "failure" and sig.pattern.search(line):
                if sig.kind == "active":
                    active_hits.setdefault(sig.variant, line.strip())
                elif sig.kind == "fallback":
                    fallback_hits.setdefault(sig.variant, line.strip())
                else:
                    note = {"variant": sig.variant, "line": line.strip()}
                    if note not in notes:
                        notes.append(note)
        for sig in failing:
            if sig.pattern.search(line) and all(f["signature"] != sig.variant for f in failures):
                failures.append({"signature": sig.variant, "line": line.strip()})
    nccl = parse_nccl(log)
    if nccl["no_algorithm"]:
        failures.append({"signature": "nccl_no_algorithm", "line": nccl["no_algorithm"][0]})
    env_proven, env_mismatch = _nccl_env_evidence(nccl, env)
    if env_proven:
        active_hits["nccl_env"] = "NCCL reports every NCCL_* value of the plan as set by environment"
    if env_mismatch:
        fallback_hits["nccl_env"] = env_mismatch[0]
    if nccl["no_algorithm"]:
        fallback_hits["nccl_env"] = nccl["no_algorithm"][0]

    proven = sorted(v for v in active_hits if v not in fallback_hits)
    shadowed = [s for s in _shadowed(proven) if s["variant"] in requested]
    shadowed_names = {s["variant"] for s in _shadowed(proven)}
    active = [v for v in proven if v not in shadowed_names]
    fell_back = [{"variant": v, "line": fallback_hits[v]} for v in requested if v in fallback_hits]
    unproven = [v for v in requested if v not in active_hits and v not in fallback_hits]
    return {
        "requested": requested,
        "active": active,
        "fell_back": fell_back,
        "shadowed": shadowed,
        "unproven": unproven,
        "notes": notes,
        "failures": failures,
        "nccl": nccl,
    }


def failure_names() -> list[str]:
    """Names ``expect_signature`` may take."""
    return sorted({s.variant for s in FAILURES}
                  | {s.variant for s in NCCL_SIGNATURES + NVSHMEM_SIGNATURES if s.kind == "failure"})


def evidence_warnings(plan: Plan, labels: Mapping[str, Any]) -> list[str]:
    """Requested variants (the ``labels``' ``variant``) whose "on" line cannot reach this plan's logs (the
    result would be unproven).

    SGLang's lines must print at the server's ``--log-level`` (default info);
    NCCL's "set by environment" lines need ``NCCL_DEBUG=INFO`` with the ENV
    subsystem; NVSHMEM's (DeepEP) need ``NVSHMEM_DEBUG=INFO``.
    """
    name = plan.name
    sa = plan.server_args
    env = plan.env
    level = str(sa.get("log-level") or DEFAULT_LOG_LEVEL).lower()
    out: list[str] = []
    for variant in requested_variants(labels):
        if variant == "nccl_env":
            subsys = str(env.get("NCCL_DEBUG_SUBSYS") or "INIT,BOOTSTRAP,ENV").upper().split(",")
            if str(env.get("NCCL_DEBUG") or "").upper() not in ("INFO", "TRACE") or (
                    "ENV" not in subsys and "ALL" not in subsys):
                out.append(f"configurations.{name}.env.NCCL_DEBUG: variant nccl_env is proven only by NCCL's "
                           f"'set by environment' lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS with ENV)")
            continue
        sglang = [s for s in SIGNATURES + NOTES if s.variant == variant and s.kind == "active"]
        nvshmem = [s for s in NVSHMEM_SIGNATURES if s.variant == variant and s.kind == "active"]
        if sglang and not any(prints_at(s.level, level) for s in sglang):
            out.append(f"configurations.{name}.server_args.log-level: variant {variant}'s evidence prints at "
                       f"{sglang[0].level}, below --log-level {level}: the result will be unproven")
        if nvshmem and str(env.get("NVSHMEM_DEBUG") or "").upper() not in ("INFO", "TRACE"):
            out.append(f"configurations.{name}.env.NVSHMEM_DEBUG: variant {variant} is proven only by NVSHMEM's "
                       f"INFO line ({nvshmem[0].source}); set NVSHMEM_DEBUG=INFO (NVSHMEM_DEBUG_SUBSYS=INIT)")
    return out
