"""benchmarks/bench_refengine.py's per-configuration figures from meta_info, including untimed all-reduces."""

from __future__ import annotations

import importlib.util

import pytest

from specsweep.refengine.engine import GRAPH_COMM_ABSENT, Request, _add_comm
from specsweep.testing.workflow import REPO


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_refengine", REPO / "benchmarks" / "bench_refengine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _meta(comm: float | None, tokens: int = 10, verify_ct: int = 4) -> dict:
    """A finished request's meta_info as the engine's snapshot shapes it (timing keys from the engine)."""
    r = Request(input_ids=[1, 2, 3], max_new_tokens=tokens, ignore_eos=True, sink=lambda _chunk: None)
    r.timing.update(draft_s=0.02, verify_s=0.04, allreduce_ct=40, forward_ct=verify_ct)
    _add_comm(r, "verify_comm_s", comm)
    meta = {"completion_tokens": tokens, "spec_verify_ct": verify_ct, "e2e_latency": 0.1,
            "timing": dict(r.timing)}
    if r.timing_absent:
        meta["timing_absent"] = dict(r.timing_absent)
    return meta


def test_timed_comm_gives_share_and_per_call_latency(bench):
    row = bench.summarize("eagle3-gloo", [_meta(0.01), _meta(0.03)])
    assert row["comm_share"] == pytest.approx(0.04 / 0.08)
    assert row["ar_us"] == pytest.approx(0.04 / 80 * 1e6)
    assert row["accept_length"] == pytest.approx(20 / 8)
    assert row["timing_absent"] is None


def test_untimed_comm_is_none_with_the_engines_reason_and_prints(bench, capsys):
    # One request untimed (CUDA graphs without comm events) makes the sum unknown, never a partial sum.
    row = bench.summarize("eagle3-nccl", [_meta(0.01), _meta(None)])
    assert row["comm_share"] is None and row["ar_us"] is None
    assert row["timing_absent"] == [f"verify_comm_s: {GRAPH_COMM_ABSENT}"]
    assert row["verify_ms"] == pytest.approx(0.08 / 8 * 1e3)
    bench.print_server_table([row], "test")
    out = capsys.readouterr().out
    assert "eagle3-nccl" in out and "all-reduce not timed: verify_comm_s" in out


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_affinity_bench_figures():
    bench = _load("bench_cpu_affinity")
    assert bench.cycle_ms(_meta(0.01, verify_ct=4)) == pytest.approx(0.06 / 4 * 1e3)
    s = bench.spread([10.0, 11, 12, 13, 14, 15, 16, 17, 18, 30])
    assert s["median"] == 14.5 and s["max_min"] == 3.0 and s["n"] == 10
    assert s["p90_p10_rel"] == pytest.approx((s["p90"] - s["p10"]) / 14.5) and s["p10"] < 11 < 18 < s["p90"]


def test_prefill_graphs_bench_figures():
    bench = _load("bench_prefill_graphs")
    metas = [_meta(0.01), _meta(0.01)]
    for m, prefill in zip(metas, (0.004, 0.006)):
        m["timing"]["prefill_s"] = prefill
        m["timing"]["prefill_graph_ct"] = 2
    row = bench.per_launch(metas)
    assert row == {"prefill_ms": pytest.approx(5.0), "e2e_ms": pytest.approx(100.0),
                   "cycle_ms": pytest.approx(15.0), "prefill_graph_ct": 4}
    assert bench.launch_range([10.0, 12.0, 11.0]) == pytest.approx(0.2)


def test_cpu_drift_bench_separates_the_machine_from_the_launch():
    """A table whose rounds scale every server alike has no server effect, and the other way round."""
    bench = _load("bench_cpu_drift")
    speed = [1.0, 1.7, 1.0, 1.6, 1.1]  # the machine over time
    launch = [1.0, 1.0, 1.0]
    sds = bench.two_way([[10.0 * t * s for s in launch] for t in speed])
    assert sds["sd_rounds"] > 0.2 and sds["sd_servers"] == pytest.approx(0.0, abs=1e-12)
    assert sds["sd_residual"] == pytest.approx(0.0, abs=1e-12)
    sds = bench.two_way([[10.0 * s for s in (1.0, 1.2, 0.9)] for _ in speed])
    assert sds["sd_rounds"] == pytest.approx(0.0, abs=1e-12) and sds["sd_servers"] > 0.1
