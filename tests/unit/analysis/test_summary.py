"""summary.json: status rules, run-only accept length, atomic writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsweep.analysis.summary import build_summary, speculative_algorithm
from specsweep.files import read_jsonl, write_json_atomic, write_jsonl_atomic
from specsweep.records import new_record
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import MS, OK, config_summary

WORKLOAD = {
    "endpoint": "generate", "num_prompts": 4, "input_len": 8, "output_len": 8, "concurrency": 1,
    "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 10,
    "warmup": {"window": 2, "tolerance": 0.1, "min_windows": 2, "max_requests": 8},
}


def plan(spec: str | None = "EAGLE3") -> dict:
    args = {"tp-size": 2}
    if spec is not None:
        args["speculative-algorithm"] = spec
    return {"name": "cfg", "engine": "reference", "image": None, "server_args": args, "workload": WORKLOAD,
            "facts": engine_facts("reference", args)}


def record(i: int, *, phase: str = "measured", run_id: str = "this", tokens: int = 8, verify: int | None = 4,
           status: str = "ok", window: int | None = None, spacing_ms: int = 100) -> dict:
    t0 = i * spacing_ms * MS
    chunks = [t0 + 10 * MS, t0 + 20 * MS, t0 + 30 * MS]
    return new_record(
        run_id=run_id, request_id=f"{run_id}-{phase}-{i}", phase=phase,
        repeat=0 if phase == "measured" else None, window=window, index=i, endpoint="generate",
        input_len=8, output_len=8, send_ns=t0, chunk_ns=chunks, chunk_tokens=[1, 3, tokens - 4],
        end_ns=chunks[-1], http_status=200, prompt_tokens=8,
        completion_tokens=tokens if status == "ok" else None, spec_verify_ct=verify if status == "ok" else None,
        status=status, error=None if status == "ok" else "boom",
    )


def test_accept_length_comes_from_this_runs_measured_requests_only():
    """Warmup records and requests of an earlier run (lifetime counters) never enter accept length."""
    warmup = [record(i, phase="warmup", tokens=8, verify=1, window=i // 2) for i in range(4)]  # accept 8
    warmup += [record(i, phase="warmup", run_id="earlier", window=0) for i in range(2)]
    earlier = [record(i, run_id="earlier", tokens=8, verify=8) for i in range(4)]  # accept 1
    this = [record(10 + i, tokens=8, verify=4) for i in range(4)]  # accept 2
    s = build_summary(plan(), {"provenance": {"gpu": "x"}}, OK, warmup, earlier + this, None)
    assert s["status"] == "ok", s["detail"]
    assert s["metrics"]["accept_length"]["value"] == pytest.approx(2.0)
    assert s["metrics"]["counts"]["other_run_excluded"] == 4
    assert s["metrics"]["counts"]["measured"] == 4
    # a lifetime average over everything would be (32 + 32 + 32) / (4 + 32 + 16) = 1.85
    assert s["warmup"]["requests"] == 4


def test_warmup_section_recomputed_from_records():
    # back-to-back requests (30 ms each): both windows run at 16 tokens / 60 ms
    warmup = [record(i, phase="warmup", window=i // 2, spacing_ms=30) for i in range(4)]
    s = build_summary(plan(), None, OK, warmup, [record(10 + i) for i in range(4)], None)
    w = s["warmup"]
    assert w["requests"] == 4 and w["windows_tok_s"] == pytest.approx([16 / 0.06, 16 / 0.06])
    assert w["converged"] is True
    assert w["tolerance"] == 0.1 and "max/min" in w["criterion"]
    assert s["provenance"] == {"absent": "no launch record"}


def test_shape():
    s = build_summary(plan(), {"provenance": {"driver": "1"}, "argv": ["a"]}, OK, [], [record(i) for i in range(4)],
                      {"requested": [], "active": [], "fell_back": []})
    for key in ("config", "status", "stage", "reason", "detail", "log_tail", "engine", "image",
                "plan", "metrics", "warmup", "provenance", "variant"):
        assert key in s
    assert "format_version" not in s, "a launch's summary is a point of summary.json, which carries the version"
    assert s["config"] == "cfg" and s["engine"] == "reference"
    assert s["provenance"]["driver"] == "1" and s["provenance"]["launch"] == {"argv": ["a"]}
    json.dumps(s, allow_nan=False)
    # the point record of summary.json holds it as it is, plus its point, workload and launches
    point = config_summary(s).points[0].to_dict()
    assert point == {**s, "point": "default", "workload": plan()["workload"], "launches": []}


def test_missing_accept_length_under_speculation_fails():
    s = build_summary(plan("EAGLE3"), None, OK, [], [record(i, verify=None) for i in range(4)], None)
    assert (s["status"], s["stage"], s["reason"]) == ("failed", "summarize", "missing_metric")
    assert "accept_length" in s["detail"]
    assert "accept_length" not in s["metrics"]  # absent, never 0


def test_no_speculation_needs_no_accept_length():
    s = build_summary(plan(None), None, OK, [], [record(i, verify=None) for i in range(4)], None)
    assert s["status"] == "ok"
    s = build_summary(plan("NONE"), None, OK, [], [record(i, verify=None) for i in range(4)], None)
    assert s["status"] == "ok"


def test_missing_completion_tokens_fails():
    recs = [record(i) for i in range(4)]
    recs[0]["completion_tokens"] = None
    s = build_summary(plan(None), None, OK, [], recs, None)
    assert s["reason"] == "missing_metric" and "completion_tokens" in s["detail"]


def test_failed_outcome_passes_through():
    outcome = {"status": "failed", "stage": "launch", "reason": "server_exited", "detail": "code 1",
               "log_tail": "Traceback..."}
    s = build_summary(plan(), None, outcome, [], [], None)
    assert (s["status"], s["stage"], s["reason"], s["log_tail"]) == ("failed", "launch", "server_exited",
                                                                      "Traceback...")


def test_fallback_from_evidence():
    ev = {"requested": ["all-reduce:custom"], "active": ["all-reduce:nccl"],
          "fell_back": [{"variant": "all-reduce:custom", "line": "all-reduce backend: nccl"}]}
    s = build_summary(plan(), None, OK, [], [record(i) for i in range(4)], ev)
    assert s["status"] == "fallback" and "all-reduce:custom" in s["detail"]
    assert s["variant"] == ev


def test_all_requests_failed_is_failed():
    s = build_summary(plan(), None, OK, [], [record(i, status="error") for i in range(4)], None)
    assert (s["status"], s["reason"]) == ("failed", "no_successful_requests")
    assert s["metrics"]["counts"]["error"] == 4


def test_failed_requests_are_counted_and_warned():
    recs = [record(i) for i in range(4)] + [record(9, status="incomplete")]
    s = build_summary(plan(), None, OK, [], recs, None)
    assert s["status"] == "ok" and s["metrics"]["counts"]["incomplete"] == 1
    assert any("incomplete" in w for w in s["warnings"])


def test_speculative_algorithm():
    assert speculative_algorithm({"speculative-algorithm": "EAGLE3"}) == "EAGLE3"
    assert speculative_algorithm({"speculative-algorithm": None}) is None
    assert speculative_algorithm({"speculative_algorithm": "none"}) is None
    assert speculative_algorithm({}) is None


def test_write_json_atomic(tmp_path: Path):
    p = tmp_path / "a" / "s.json"
    write_json_atomic(p, {"b": 1, "a": [1.5]})
    assert json.loads(p.read_text()) == {"a": [1.5], "b": 1}
    with pytest.raises(ValueError):
        write_json_atomic(p, {"x": float("nan")})
    assert json.loads(p.read_text()) == {"a": [1.5], "b": 1}  # the old file survives a failed write
    assert [f.name for f in p.parent.iterdir()] == ["s.json"]  # no temp file left behind


def test_jsonl_roundtrip(tmp_path: Path):
    recs = [record(i) for i in range(3)]
    write_jsonl_atomic(tmp_path / "r.jsonl", recs)
    assert read_jsonl(tmp_path / "r.jsonl") == recs


def test_a_result_measured_beside_another_server_is_contaminated_never_ok():
    host = {"samples": 5, "cpus": 2, "running_max": 7, "load1_max": 5.5, "others_seen": [{"kind": "process"}]}
    outcome = {"status": "contaminated", "stage": "benchmark", "reason": "other_server",
               "detail": "measured beside other specsweep servers: processes [1] (...)", "run_id": "this", "host": host}
    s = build_summary(plan(), None, outcome, [], [record(i) for i in range(4)], None)
    assert (s["status"], s["stage"], s["reason"]) == ("contaminated", "benchmark", "other_server")
    assert s["run_id"] == "this" and s["host"] == host
    assert "accept_length" in s["metrics"], "the numbers stay for inspection"
    assert any("7 runnable tasks on 2 CPUs" in w for w in s["warnings"])


def test_load_alone_is_a_warning_not_contamination():
    host = {"samples": 5, "cpus": 2, "running_max": 9, "load1_max": 8.0, "others_seen": []}
    s = build_summary(plan(), None, dict(OK, host=host), [], [record(i) for i in range(4)], None)
    assert s["status"] == "ok" and any("runnable tasks" in w for w in s["warnings"])
