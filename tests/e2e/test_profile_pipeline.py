"""Verify-path profiling through the whole workflow on the reference engine (issue 12).

One pipeline run (module fixture): gloo and shm with profiling on, the
Kimi-K2.5 shape (61 layers) on shm with profiling on, the baseline with it
off. The traces are analysed, the trace-derived comm share must agree with
the engine's own timing of the same requests within
``analysis.profiling.COMM_SHARE_TOLERANCE``, all-reduces per verify must be 2 x
layers (122 for the Kimi shape), and the report must show the micro-benchmark
figure next to the trace's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsweep.analysis.profiling import COMM_SHARE_TOLERANCE
from specsweep.testing.workflow import (
    SNAKEMAKE,
    copy_workflow,
    job_counts,
    launch_path,
    only_point,
    plain_default_config,
    run,
    run_pipeline,
)

pytestmark = pytest.mark.slow

SMALL = {"num_prompts": 2, "output_len": 16, "repeats": 2,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 1}}
PROFILE = {"enabled": True, "requests": 2, "allreduce_iters": 100}


def profile_config() -> dict:
    config = plain_default_config()
    config["defaults"]["workload"].update(SMALL)
    config["configurations"]["eagle3-gloo"]["profile"] = PROFILE  # eagle3-shm extends it
    config["configurations"]["eagle3-shm-kimi"] = {
        "description": "Kimi-K2.5 shape (61 layers) scaled to CPU, shared memory, profiled",
        "extends": "eagle3-shm",
        "server_args": {"model-path": "specsweep/refengine/configs/kimi-k25-scaled"},
        "workload": {"num_prompts": 1, "output_len": 8, "repeats": 1},
        "profile": {"requests": 1},
    }
    return config


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    return run_pipeline(copy_workflow(tmp_path_factory.mktemp("profile")), profile_config())


summary = only_point  # the one point of a configuration


@pytest.mark.parametrize("name,backend", [("eagle3-gloo", "gloo"), ("eagle3-shm", "shm")])
def test_trace_comm_share_agrees_with_the_engine_and_counts_2_per_layer(pipeline, name, backend):
    s = summary(pipeline, name)
    assert s["status"] == "ok", s["detail"]
    p = s["profile"]
    assert p["status"] == "ok" and p["analysis"]["mode"] == "cpu" and p["analysis"]["attribution"] == ["annotations"]
    assert sorted(p["analysis"]["ranks"]) == ["0", "1"]
    agreement = p["agreement"]
    assert agreement["tolerance"] == COMM_SHARE_TOLERANCE
    assert abs(agreement["trace_comm_share"] - agreement["engine_comm_share"]) <= COMM_SHARE_TOLERANCE, agreement
    check = p["allreduce_check"]
    assert (check["layers"], check["expected"], check["matches"]) == (10, 20, True)
    for rank in ("0", "1"):
        for kind, stats in p["analysis"]["ranks"][rank]["forwards"].items():
            per_layer = 2 if kind in ("draft", "draft_prefill") else 20  # the draft is one TP-sharded layer
            assert stats["allreduce_min"] == stats["allreduce_max"] == per_layer, (rank, kind)
            assert stats["allreduce_impl"] == {backend: per_layer * stats["count"]}
    m = s["metrics"]
    assert m["trace_allreduce_impl"]["value"] == backend
    assert m["trace_allreduce_per_verify"]["value"] == 20
    assert 0 < m["trace_verify_comm_ms"]["value"] < m["trace_verify_ms"]["value"]
    assert m["allreduce_bench_us"]["value"] > 0 and m["profile_seconds"]["value"] > 0
    assert m["allreduce_bench_ms_per_verify"]["value"] == pytest.approx(m["allreduce_bench_us"]["value"] * 20 / 1e3)
    assert p["variant"]["proven"] == [f"all-reduce:{backend}"]
    assert (launch_path(pipeline, name) / "profile" / "requests.jsonl").exists()


def test_kimi_k25_shape_has_122_all_reduces_per_verify(pipeline):
    s = summary(pipeline, "eagle3-shm-kimi")
    assert s["status"] == "ok", s["detail"]
    check = s["profile"]["allreduce_check"]
    assert (check["layers"], check["expected"], check["measured"], check["matches"]) == (61, 122, 122, True)
    assert s["metrics"]["trace_allreduce_per_verify"]["value"] == 122


def test_profiling_off_leaves_the_plan_and_records_it(pipeline):
    s = summary(pipeline, "nospec")
    assert "profile" not in s["plan"] and s["profile"] is None
    assert json.loads((launch_path(pipeline, "nospec") / "profile.json").read_text())["enabled"] is False
    assert not (launch_path(pipeline, "nospec") / "profile").exists()
    assert not any(k.startswith("trace_") for k in s["metrics"]["absent"])


def test_report_puts_the_micro_benchmark_beside_the_trace(pipeline):
    md = (pipeline / "results" / "report.md").read_text()
    section = md.split("## Verify-path profile", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| eagle3")}
    assert set(rows) == {"eagle3-gloo", "eagle3-shm", "eagle3-shm-kimi"}
    assert " x 20 = " in rows["eagle3-shm"] and "(122)" in rows["eagle3-shm-kimi"]
    assert (pipeline / "results" / "plots" / "comm_split.png").stat().st_size > 10_000


def test_nothing_reruns(pipeline):
    result = run(SNAKEMAKE + ["-n", "all"], pipeline)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {}, result.stdout[-3000:]
