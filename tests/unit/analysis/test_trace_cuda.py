"""The trace analysis on a real CUDA trace: the reference engine on an H200, TP=1, CUDA graphs on.

Fixture: tests/fixtures/traces/refengine-h200-tp1.trace.json.gz (made by the
graphs work, issue 18; its README says how and what is in it: 2 speculation
cycles of 3 draft forwards and 1 verify, each a replayed CUDA graph, the
verify's 2,737 kernels linked to its cudaGraphLaunch by correlation).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from specsweep.analysis.kernels import classify_kernel
from specsweep.analysis.trace import analyze_traces
from specsweep.testing.workflow import REPO

TRACE = REPO / "tests/fixtures/traces/refengine-h200-tp1.trace.json.gz"


@pytest.fixture(scope="module")
def analysis() -> dict:
    return analyze_traces([TRACE])


def test_forwards_come_from_the_engine_annotations_and_the_graph_replays(analysis):
    assert analysis["mode"] == "gpu" and analysis["attribution"] == ["annotations"]
    assert analysis["target"] == "verify"
    (rank,) = analysis["ranks"].values()
    f = rank["forwards"]
    assert set(f) == {"draft", "verify"}
    assert (f["verify"]["count"], f["verify"]["graph_forwards"]) == (2, 2)
    assert (f["draft"]["count"], f["draft"]["graph_forwards"]) == (6, 6)


def test_compute_kernels_are_classified_as_compute(analysis):
    verify = next(iter(analysis["ranks"].values()))["forwards"]["verify"]
    # README: the verify's kernels run 6.34 ms of 7.04 ms first-start-to-last-end; the analysis also
    # counts the verify's input copy and argmax read (gpu_memcpy), so its figures are a little larger.
    assert 6.3 < verify["compute_ms"] < 6.5
    assert 7.0 < verify["span_ms"] < 7.2
    assert verify["idle_ms"] == pytest.approx(verify["span_ms"] - verify["compute_ms"])
    kernels = Counter(e["name"] for e in json.loads(gzip.open(TRACE).read())["traceEvents"]
                      if e.get("cat") == "kernel")
    assert len(kernels) > 20 and all(classify_kernel(name) is None for name in kernels)


def test_at_tp1_no_communication_is_invented(analysis):
    assert analysis["implementations"] == {} and analysis["comm_kernel_names"] == {}
    assert analysis["unmatched_comm_like"] == {}
    for stats in next(iter(analysis["ranks"].values()))["forwards"].values():
        assert stats["comm_ms"] == 0 and stats["allreduce_max"] == 0 and stats["comm_share"] == 0
    assert all("absent" in v for v in analysis["rank_skew"].values())
