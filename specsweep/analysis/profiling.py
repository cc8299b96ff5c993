"""The ``profile`` section of summary.json: the profiling stages' files turned into evidence.

Inputs are what the server job left (``specsweep.serve.profile``):
``profile.json`` (the stage record, trace file names), the traces and the
profiled requests under ``profile/``, and ``allreduce_bench.json`` (the
micro-benchmark). Out comes one dict (``profile_section``) that the metrics
table reads (``analysis.metrics`` kind ``profile``) and the report shows:

* ``analysis``: ``analysis.trace.analyze_traces`` of every rank's trace;
* ``target``: the target forward (verify under speculation, decode without)
  on rank 0, the figures the metrics take;
* ``agreement``: the trace's comm share against the engine's own ``timing`` of
  the same profiled requests (``comm_share_agreement``; only the
  reference engine reports that timing);
* ``allreduce_check``: all-reduces per target forward in the trace against
  the expected ``layers x per_layer + outside_layers`` (``Engine.comm_profile``;
  layers from the model's config.json as the micro-benchmark read it): the
  the Kimi-K2.5 case's 122 for its 61 layers (docs/sglang.md);
* ``bench``: the micro-benchmark's median latency at the verify's size, and
  that latency x the trace's all-reduces per target forward
  (``bench_ms_per_forward``), to set beside the trace's comm ms: the gap is
  what the loop does not see (rank skew, interleaving with compute);
* ``variant``: ``trace_variant_evidence`` (a configuration that asked
  for MSCCL++ and whose verify shows only NCCL kernels has fallen back).

A stage that did not run or failed leaves its reason under ``absent``; the
metrics it would have fed are then absent with that reason, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from specsweep.analysis.kernels import IMPLEMENTATIONS
from specsweep.analysis.trace import analyze_traces, target_stats
from specsweep.contracts.vocabulary import RequestStatus, StageStatus
from specsweep.files import read_jsonl

#: Absolute tolerance on the communication share (0..1) within which the
#: trace-derived figure must agree with the engine's own ``timing`` for the
#: same requests (measured on the reference engine, gloo and shm, CPU: see
#: docs/measurements/2026-12-01-cpu-profile/README.md).
COMM_SHARE_TOLERANCE = 0.05


def _bench(bench: dict[str, Any] | None) -> dict[str, Any]:
    if not bench or not bench.get("enabled"):
        return {"absent": "profiling is off"}
    if bench.get("status") != StageStatus.OK:
        return {"absent": f"micro-benchmark {bench.get('status')}: {bench.get('reason')} {bench.get('detail') or ''}"
                .strip(), "seconds": bench.get("seconds")}
    result = bench["result"]
    size = result["sizes"][0]
    # Format 1 of the script's JSON timed back to back only; format 2 says how (allreduce_bench.py, Timing).
    out = {"runner": result["runner"], "backend": result["backend"], "world_size": result["world_size"],
           "device": result["device"], "dtype": result["dtype"], "tokens": size["tokens"], "bytes": size["bytes"],
           "timing": size.get("timing", "back_to_back"), "median_us": size["median_us"], "p10_us": size["p10_us"],
           "p90_us": size["p90_us"], "iters": size.get("iters", size.get("forwards")),
           "seconds": bench.get("seconds"), "model": result.get("model")}
    if "back_to_back" in size:
        out["back_to_back_us"] = size["back_to_back"]["median_us"]
    return out


def allreduce_check(target: dict[str, Any] | None, comm: dict[str, Any] | None,
                    model: dict[str, Any] | None) -> dict[str, Any]:
    """All-reduces per target forward: the trace's against ``layers x per_layer + outside_layers``."""
    if target is None:
        return {"absent": "no target forward in the trace"}
    layers = (model or {}).get("num_hidden_layers")
    per_layer = (comm or {}).get("allreduces_per_layer")
    outside = (comm or {}).get("allreduces_outside_layers")
    out: dict[str, Any] = {"measured": target["allreduce_per_forward"], "min": target["allreduce_min"],
                           "max": target["allreduce_max"], "layers": layers, "per_layer": per_layer,
                           "outside_layers": outside, "note": (comm or {}).get("note")}
    if not isinstance(layers, int) or per_layer is None or outside is None:
        out["absent"] = ("the expected count is unknown (no num_hidden_layers from the micro-benchmark, or the "
                         "engine cannot state it for this plan)")
        return out
    out["expected"] = layers * per_layer + outside
    out["matches"] = target["allreduce_min"] == target["allreduce_max"] == out["expected"]
    return out


def profile_section(plan: dict[str, Any], profile: dict[str, Any] | None, bench: dict[str, Any] | None,
                    profile_dir: Path, variants: Sequence[str] = ()) -> dict[str, Any] | None:
    """The summary's ``profile`` section, or None when profiling is off for the plan."""
    if not (plan.get("profile") or {}).get("enabled"):
        return None
    section: dict[str, Any] = {
        "enabled": True,
        "settings": plan["profile"],
        "status": (profile or {}).get("status", StageStatus.MISSING),
        "seconds": (profile or {}).get("seconds"),
        "bench": _bench(bench),
        "comm": (bench or {}).get("comm"),
    }
    if not profile or profile.get("status") != StageStatus.OK:
        section["absent"] = (f"profiling stage {section['status']}: {(profile or {}).get('reason')} "
                             f"{(profile or {}).get('detail') or ''}").strip()
        return section
    files = [profile_dir / f for f in profile["files"]]
    try:
        analysis = analyze_traces(files)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a trace that cannot be read is a result, not a crash
        section["absent"] = f"trace analysis failed: {type(exc).__name__}: {exc}"
        return section
    section["analysis"] = analysis
    target = target_stats(analysis, "0") or target_stats(analysis)
    section["target"] = target
    section["target_kind"] = analysis.get("target")
    section["rank_skew"] = analysis["rank_skew"].get(analysis.get("target") or "", {"absent": "no target forward"})
    requests_path = profile_dir.parent / profile["requests"] if profile.get("requests") else None
    records = read_jsonl(requests_path) if requests_path is not None and requests_path.exists() else []
    section["profiled_requests"] = {"records": len(records),
                                    "ok": sum(r.get("status") == RequestStatus.OK for r in records)}
    section["agreement"] = comm_share_agreement(analysis, records)
    model = section["bench"].get("model") if "absent" not in section["bench"] else None
    section["allreduce_check"] = allreduce_check(target, section.get("comm"), model)
    if target is not None and "median_us" in section["bench"]:
        section["bench"]["ms_per_forward"] = section["bench"]["median_us"] * target["allreduce_per_forward"] / 1e3
    section["variant"] = trace_variant_evidence(analysis, variants)
    return section


def profile_warnings(section: dict[str, Any] | None) -> list[str]:
    """Warnings for summary.json: a failed stage, a comm share off the engine's, an unexpected count."""
    if section is None:
        return []
    out = []
    if "absent" in section:
        out.append(f"profiling: {section['absent']}")
    if "absent" in section["bench"] and section["bench"]["absent"] != "profiling is off":
        out.append(f"profiling: {section['bench']['absent']}")
    agreement = section.get("agreement") or {}
    if agreement.get("within_tolerance") is False:
        out.append(f"profiling: the trace's comm share {agreement['trace_comm_share']:.3f} differs from the engine's "
                   f"{agreement['engine_comm_share']:.3f} by more than {agreement['tolerance']:.2f}")
    check = section.get("allreduce_check") or {}
    if check.get("matches") is False:
        out.append(f"profiling: {check['measured']:g} all-reduces per {section.get('target_kind')} forward in the "
                   f"trace, expected {check['expected']} ({check['layers']} layers x {check['per_layer']} + "
                   f"{check['outside_layers']})")
    unmatched = (section.get("analysis") or {}).get("unmatched_comm_like") or {}
    if unmatched:
        out.append(f"profiling: kernels named like collectives that no pattern knows (counted as compute): "
                   f"{list(unmatched)[:3]}")
    return out


def trace_variant_evidence(analysis: dict[str, Any], variants: Sequence[str]) -> dict[str, Any]:
    """What the trace proves about the requested variants: the target forward's all-reduces must show them.

    Only the target forward (verify, or decode) counts: MSCCL++ runs only inside
    CUDA-graph capture and the custom all-reduce only below a size limit, so
    prefill falling to NCCL is expected and proves nothing.
    """
    stats = target_stats(analysis)
    seen = set((stats or {}).get("comm_impl") or {})
    out: dict[str, Any] = {"seen": sorted(seen), "proven": [], "fell_back": [], "unproven": []}
    for variant in variants:
        impl = next((i for i, v in IMPLEMENTATIONS.items() if variant in v["variants"]), None)
        if impl is None:
            continue
        if impl in seen:
            out["proven"].append(variant)
        elif not seen:
            out["unproven"].append({"variant": variant, "why": f"no communication in the {analysis.get('target')} "
                                                                "forwards of the trace"})
        else:
            calls = ", ".join(f"{k}: {v}" for k, v in (stats or {}).get("comm_impl", {}).items())
            out["fell_back"].append({"variant": variant, "source": "trace",
                                     "line": f"profiler trace: {analysis.get('target')} forwards ran {calls} "
                                             f"communication calls, none of {IMPLEMENTATIONS[impl]['label']}"})
    return out


def engine_verify_timing(records: Iterable[dict[str, Any]]) -> dict[str, float] | None:
    """The engine's own verify timing over ok records: ``comm_share = sum(timing.verify_comm_s) /
    sum(timing.verify_s)``, and ms per target forward (``/ sum(timing.forward_ct)``); None when any lacks them."""
    comm = total = forwards = 0.0
    n = 0
    for r in records:
        if r.get("status") != RequestStatus.OK:
            continue
        t = r.get("timing") or {}
        if t.get("verify_comm_s") is None or t.get("verify_s") is None or not t.get("forward_ct"):
            return None
        comm += t["verify_comm_s"]
        total += t["verify_s"]
        forwards += t["forward_ct"]
        n += 1
    if not n or total <= 0:
        return None
    return {"comm_share": comm / total, "verify_ms": total / forwards * 1e3, "comm_ms": comm / forwards * 1e3}


def comm_share_agreement(analysis: dict[str, Any], records: Sequence[dict[str, Any]],
                         tolerance: float = COMM_SHARE_TOLERANCE) -> dict[str, Any]:
    """Trace-derived comm share of the target forward (rank 0) against the engine's ``timing`` of the same requests."""
    stats = target_stats(analysis, "0") or target_stats(analysis)
    engine = engine_verify_timing(records)
    if stats is None or stats.get("comm_share") is None:
        return {"absent": "the trace has no target forward"}
    if engine is None:
        return {"absent": "the profiled requests carry no engine timing.verify_comm_s (SGLang reports none; "
                          "the reference engine under CUDA graphs reports it absent)",
                "trace_comm_share": stats["comm_share"]}
    diff = stats["comm_share"] - engine["comm_share"]
    return {"trace_comm_share": stats["comm_share"], "engine_comm_share": engine["comm_share"],
            "engine_verify_ms": engine["verify_ms"], "engine_comm_ms": engine["comm_ms"], "difference": diff,
            "tolerance": tolerance, "within_tolerance": abs(diff) <= tolerance}
