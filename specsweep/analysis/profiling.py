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
  the same profiled requests (``trace.comm_share_agreement``; only the
  reference engine reports that timing);
* ``allreduce_check``: all-reduces per target forward in the trace against
  the expected ``layers x per_layer + outside_layers`` (``Engine.comm_profile``;
  layers from the model's config.json as the micro-benchmark read it): the
  seeds' 122 for Kimi-K2.5's 61 layers;
* ``bench``: the micro-benchmark's median latency at the verify's size, and
  that latency x the trace's all-reduces per target forward
  (``bench_ms_per_forward``), to set beside the trace's comm ms: the gap is
  what the loop does not see (rank skew, interleaving with compute);
* ``variant``: ``trace.trace_variant_evidence`` (a configuration that asked
  for MSCCL++ and whose verify shows only NCCL kernels has fallen back).

A stage that did not run or failed leaves its reason under ``absent``; the
metrics it would have fed are then absent with that reason, never 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from specsweep.analysis.trace import (
    analyze_traces,
    comm_share_agreement,
    target_stats,
    trace_variant_evidence,
)
from specsweep.contracts.vocabulary import RequestStatus, StageStatus
from specsweep.files import read_jsonl


def _bench(bench: dict[str, Any] | None) -> dict[str, Any]:
    if not bench or not bench.get("enabled"):
        return {"absent": "profiling is off"}
    if bench.get("status") != StageStatus.OK:
        return {"absent": f"micro-benchmark {bench.get('status')}: {bench.get('reason')} {bench.get('detail') or ''}"
                .strip(), "seconds": bench.get("seconds")}
    result = bench["result"]
    size = result["sizes"][0]
    return {"runner": result["runner"], "backend": result["backend"], "world_size": result["world_size"],
            "device": result["device"], "dtype": result["dtype"], "tokens": size["tokens"], "bytes": size["bytes"],
            "median_us": size["median_us"], "p10_us": size["p10_us"], "p90_us": size["p90_us"],
            "iters": size["iters"], "seconds": bench.get("seconds"), "model": result.get("model")}


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
