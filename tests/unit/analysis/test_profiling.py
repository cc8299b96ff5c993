"""The summary's profile section: trace analysis, the 2 x layers check, the micro-benchmark figure, metrics, status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specsweep.analysis.compute import compute_metrics
from specsweep.analysis.metrics import METRICS
from specsweep.analysis.profiling import allreduce_check, profile_section, profile_warnings
from specsweep.analysis.summary import build_summary
from specsweep.records import new_record
from specsweep.testing.doubles import engine_facts
from specsweep.testing.workflow import REPO

KERNELS = REPO / "tests/fixtures/traces/kernels"
PROFILE_METRICS = [m.name for m in METRICS.values() if m.kind == "profile"]


def plan(**profile) -> dict:
    return {"name": "cfg", "engine": "sglang", "image": "sglang", "server_args": {"speculative-algorithm": "EAGLE3"},
            "facts": engine_facts("sglang", {"speculative-algorithm": "EAGLE3"}),
            "workload": {"seed": 0, "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 0}},
            "profile": {"enabled": True, "requests": 2, **profile}}


def bench(layers: int, outside: int = 1, median_us: float = 50.0) -> dict:
    return {"enabled": True, "status": "ok", "seconds": 12.5,
            "comm": {"allreduces_per_layer": 2, "allreduces_outside_layers": outside, "note": "n"},
            "result": {"runner": "torch", "backend": "nccl", "world_size": 8, "device": "cuda", "dtype": "bfloat16",
                       "model": {"hidden_size": 7168, "num_hidden_layers": layers, "torch_dtype": "bfloat16"},
                       "sizes": [{"tokens": 4, "bytes": 57344, "median_us": median_us, "p10_us": 40.0,
                                  "p90_us": 70.0, "iters": 200}]}}


def staged(tmp_path: Path, fixture: str) -> tuple[dict, Path]:
    """A profile.json as the stage writes it, with the fixture as the rank-0 trace."""
    d = tmp_path / "profile"
    d.mkdir()
    shutil.copy(KERNELS / f"{fixture}-TP-0.trace.json", d / "run-TP-0.trace.json")
    rec = {"enabled": True, "status": "ok", "seconds": 7.0, "files": ["run-TP-0.trace.json"],
           "requests": "profile/requests.jsonl"}
    return rec, d


def test_section_from_an_nccl_trace(tmp_path):
    rec, d = staged(tmp_path, "nccl")
    # The fixture has 4 layers: 8 all-reduces per verify; SGLang's count adds the embedding's: 9 expected.
    s = profile_section(plan(), rec, bench(layers=4, outside=0), d, ["nccl_env"])
    assert s["status"] == "ok" and s["target_kind"] == "verify"
    assert s["target"]["allreduce_per_forward"] == 8
    assert s["allreduce_check"] == {**s["allreduce_check"], "expected": 8, "matches": True}
    assert s["bench"]["ms_per_forward"] == pytest.approx(50.0 * 8 / 1e3)
    assert s["variant"]["proven"] == ["nccl_env"]
    assert "absent" in s["agreement"]  # no engine timing in the profiled requests (none written here)
    m = compute_metrics([], seed=0, profile=s)
    assert m["trace_allreduce_impl"]["value"] == "nccl"
    assert m["trace_verify_comm_ms"]["value"] == pytest.approx(0.080)
    assert m["trace_verify_ms"]["value"] == pytest.approx(0.235)
    assert m["allreduce_bench_ms_per_verify"]["value"] == pytest.approx(0.4)
    assert m["profile_seconds"]["value"] == 7.0
    assert m["absent"]["trace_rank_skew_ms"] == "fewer than two ranks"


def test_kimi_k25_check_is_61_layers_times_2_plus_sglangs_embedding():
    target = {"allreduce_per_forward": 122.0, "allreduce_min": 122, "allreduce_max": 122}
    sglang = {"allreduces_per_layer": 2, "allreduces_outside_layers": 1}
    out = allreduce_check(target, sglang, {"num_hidden_layers": 61})
    assert (out["expected"], out["matches"]) == (123, False)
    assert allreduce_check(target, {**sglang, "allreduces_outside_layers": 0}, {"num_hidden_layers": 61})["matches"]
    assert "absent" in allreduce_check(target, {"allreduces_per_layer": None, "allreduces_outside_layers": None},
                                       {"num_hidden_layers": 61})


def test_mscclpp_requested_but_only_nccl_in_the_trace_is_a_fallback(tmp_path):
    rec, d = staged(tmp_path, "nccl")
    p = plan()
    p["variant"] = ["mscclpp"]
    s = profile_section(p, rec, bench(layers=4, outside=0), d, p["variant"])
    outcome = {"status": "ok"}
    records = [new_record(run_id="r", request_id="r-m0-00000", phase="measured", repeat=0, index=0,
                          endpoint="generate", input_len=4, output_len=4, send_ns=0, chunk_ns=[10, 20, 30],
                          chunk_tokens=[1, 2, 1], end_ns=40, http_status=200, prompt_tokens=4, completion_tokens=4,
                          spec_verify_ct=2, spec_accept_length=2.0, e2e_latency_s=0.1, finish_reason="length",
                          status="ok")]
    log_evidence = {"requested": ["mscclpp"], "active": ["mscclpp"], "fell_back": []}  # the log says it ran
    summary = build_summary(p, {"provenance": {}}, outcome, [], records, log_evidence, profile=s)
    assert summary["status"] == "fallback"
    assert summary["variant"]["fell_back"][0]["source"] == "trace"
    assert "none of MSCCL++" in summary["detail"]


def test_profiling_off_adds_nothing_and_a_failed_stage_is_absent_with_its_reason(tmp_path):
    p = plan()
    p.pop("profile")
    assert profile_section(p, {"enabled": False}, {"enabled": False}, tmp_path, []) is None
    m = compute_metrics([], seed=0, profile=None)
    assert not set(PROFILE_METRICS) & (set(m) | set(m["absent"]))
    failed = {"enabled": True, "status": "failed", "reason": "traces_missing", "detail": "1 of 2", "seconds": 3.0}
    s = profile_section(plan(), failed, {"enabled": True, "status": "failed", "reason": "bench_failed"}, tmp_path, [])
    m = compute_metrics([], seed=0, profile=s)
    assert m["absent"]["trace_verify_ms"].startswith("profiling stage failed: traces_missing")
    assert m["absent"]["allreduce_bench_us"].startswith("micro-benchmark failed: bench_failed")
    assert m["profile_seconds"]["value"] == 3.0
    assert any("traces_missing" in w for w in profile_warnings(s))


def test_unreadable_trace_is_a_result_not_a_crash(tmp_path):
    d = tmp_path / "profile"
    d.mkdir()
    (d / "x-TP-0.trace.json").write_text("{not json")
    s = profile_section(plan(), {"enabled": True, "status": "ok", "files": ["x-TP-0.trace.json"]}, None, d, [])
    assert s["absent"].startswith("trace analysis failed")


def test_engine_timing_of_the_profiled_requests_is_compared(tmp_path):
    rec, d = staged(tmp_path, "nccl")
    span, comm = 235e-6, 80e-6  # the fixture's verify
    rows = [{"status": "ok", "phase": "profile", "timing": {"verify_s": 2 * span * 1.5, "verify_comm_s": 2 * comm,
                                                            "forward_ct": 2}}]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = profile_section(plan(), rec, bench(layers=4, outside=0), d, [])
    assert s["agreement"]["within_tolerance"] is False  # the engine saw 1.5x the verify time
    assert any("differs from the engine's" in w for w in profile_warnings(s))
