"""The trace analysis on real CPU traces of the reference engine (gloo and shm, TP=2, trimmed to 2 cycles)."""

from __future__ import annotations

import pytest

from specsweep.analysis.trace import analyze_traces
from specsweep.testing.workflow import REPO

TRACES = REPO / "tests/fixtures/traces"


@pytest.mark.parametrize("backend", ["gloo", "shm"])
def test_real_cpu_traces(backend):
    a = analyze_traces(sorted((TRACES / f"refengine-cpu-tp2-{backend}").glob("*.trace.json.gz")))
    assert a["mode"] == "cpu" and a["attribution"] == ["annotations"] and a["target"] == "verify"
    assert sorted(a["ranks"]) == ["0", "1"]
    for rank in a["ranks"].values():
        f = rank["forwards"]
        assert (f["verify"]["count"], f["draft"]["count"]) == (2, 6)
        # 10 layers x 2 per verify; the draft is one TP-sharded layer: 2.
        assert f["verify"]["allreduce_min"] == f["verify"]["allreduce_max"] == 20
        assert f["draft"]["allreduce_min"] == f["draft"]["allreduce_max"] == 2
        assert f["verify"]["allreduce_impl"] == {backend: 40}
        v = f["verify"]
        assert 0 < v["comm_ms"] < v["span_ms"] and v["compute_ms"] > 0 and v["idle_ms"] >= 0
        assert v["comm_ms"] + v["compute_ms"] + v["idle_ms"] == pytest.approx(v["span_ms"])
    skew = a["rank_skew"]["verify"]
    assert skew["matched_forwards"] == 2 and skew["unmatched_forwards"] == 0
    # A rank waits inside its own all-reduce calls: never longer than it spends in them.
    for r, wait in enumerate(skew["per_rank_wait_ms"]):
        assert 0 <= wait <= a["ranks"][str(r)]["forwards"]["verify"]["comm_ms"]
    assert skew["wait_ms_per_forward"] > 0
    assert a["implementations"] == {backend: 2 * (40 + 12)}
