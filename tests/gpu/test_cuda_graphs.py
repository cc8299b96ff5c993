"""On a CUDA GPU: the reference engine's CUDA graphs (captured, replayed, their collectives timed).

The gpu tier (its folder marks every test ``gpu``); the CPU tests of the same code paths (static
shapes without capture) are in tests/unit/refengine/test_graphs.py.
"""

from __future__ import annotations

import pytest
import torch

from specsweep.refengine import trace
from specsweep.refengine.cudagraph import GraphKey, GraphRunner, make_plan
from specsweep.refengine.model import Segment
from specsweep.testing.refengine import SMALL
from specsweep.testing.refmodel import (
    CONTEXT,
    PREFILL_TOKENS,
    PROMPTS,
    count_prefill_calls,
    generate_all,
    small_engine,
    small_model,
)


@pytest.mark.parametrize("k", [3, None])
def test_cuda_graphs_give_the_eager_tokens(k: int | None) -> None:
    """Replayed CUDA graphs (float32), prefill included, produce exactly the tokens of the eager engine, batch of 3
    padded to 4."""
    eager = generate_all(small_engine(k, "off", device="cuda"), PROMPTS, 24)
    engine = small_engine(k, "cuda", device="cuda")
    calls = count_prefill_calls(engine)
    graphs = generate_all(engine, PROMPTS, 24)
    for e, g in zip(eager, graphs):
        assert g["output_ids"] == e["output_ids"]
        t = g["meta_info"]["timing"]
        assert t["verify_graph_ct"] == t["forward_ct"] > 0
        assert t["prefill_graph_ct"] > 0
        assert t["allreduce_ct"] == 2 * SMALL.num_hidden_layers * t["forward_ct"]  # counted inside replays
        assert t["verify_comm_s"] == 0.0  # one rank: no collective runs, eager or replayed
    replays = engine.driver.executor.graphs.replays_by_kind
    assert replays["prefill"] == calls[trace.PREFILL] and replays["draft_prefill"] == calls[trace.DRAFT_PREFILL]


def test_cuda_graph_replay_matches_eager_logits() -> None:
    """A prompt prefilled by a replayed prefill graph (35 tokens padded to 64), then a verify replayed on the cache
    that graph wrote: logits as eager's, the same greedy tokens."""
    a, b = small_model(pool=True, device="cuda"), small_model(pool=True, device="cuda")
    runner = GraphRunner(b, make_plan(4, CONTEXT, 3, prefill_tokens=PREFILL_TOKENS), logits=True, capture=True)
    report = runner.capture()
    assert not report["failed"] and len(report["captured"]) == len(runner.plan.keys()) and report["pools"] == 1
    prompt = PROMPTS[2]
    p = len(prompt)
    for m in (a, b):
        m.alloc(0, 64)
    prefill = (prompt, [Segment(0, 0, p)])
    want = a.forward_target(*prefill, "last")
    key = runner.lookup("prefill", prefill[1])
    assert key == GraphKey("prefill", 64, 1, 64)
    got = runner.run(key, *prefill, "last")
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    draft = (prompt[:-1], [Segment(0, 0, p - 1)])
    a.forward_draft(*draft, "target", "none")
    assert runner.run(runner.lookup("draft_prefill", draft[1]), *draft, "none") is None
    torch.testing.assert_close(b.pool_draft_hidden[0], a.pool_draft_hidden[0], atol=1e-3, rtol=1e-3)
    verify = ([prompt[-1], 11, 12, 13], [Segment(0, p - 1, 4)])
    want = a.forward_target(*verify, "all")
    got = runner.run(runner.lookup("target", verify[1]), *verify, "all")
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


class _OneCaptureFails(GraphRunner):
    """A real runner whose forward for one key does what a capture must not (read a device value on the host)."""

    broken: GraphKey | None = None

    def _forward(self, key: GraphKey, logits: bool):
        out = super()._forward(key, logits)
        if key == self.broken and torch.cuda.is_current_stream_capturing():
            self.buffers[key.kind, key.n].packed[0].item()  # "operation not permitted when stream is capturing"
        return out


def test_a_failed_capture_does_not_fail_the_captures_after_it() -> None:
    """One capture fails: it is reported with its own error, the graphs before and after it are captured (in a
    fresh memory pool, not the one the failed capture left recording) and replay as eager computes."""
    m = small_model(pool=True, device="cuda")
    runner = _OneCaptureFails(m, make_plan(4, CONTEXT, 3, prefill_tokens=PREFILL_TOKENS), logits=True, capture=True)
    keys = runner.plan.keys()
    runner.broken = keys[1]
    report = runner.capture()
    assert list(report["failed"]) == [str(tuple(keys[1]))], report["failed"]
    assert "already recording" not in report["failed"][str(tuple(keys[1]))]
    assert len(report["captured"]) == len(keys) - 1 and report["pools"] == 2
    assert torch.cuda.current_stream() == torch.cuda.default_stream()  # the failed capture's stream is not left current
    ref = small_model(pool=True, device="cuda")
    for model in (m, ref):
        model.alloc(0, 64)
        model.forward_target(PROMPTS[0], [Segment(0, 0, len(PROMPTS[0]))], "none")
    segs = [Segment(0, len(PROMPTS[0]) - 1, 4)]
    got = runner.run(runner.lookup("target", segs), [PROMPTS[0][-1], 1, 2, 3], segs, "all")
    want = ref.forward_target([PROMPTS[0][-1], 1, 2, 3], segs, "all")
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)


def test_capture_after_an_engine_dropped_in_the_same_process() -> None:
    """An engine with graphs, used and dropped (its scheduler thread keeps it in a reference cycle, so only the
    garbage collector frees it), then a second engine captures every graph."""
    generate_all(small_engine(3, "cuda", device="cuda"), PROMPTS, 8)
    engine = small_engine(3, "cuda", device="cuda")  # asserts that nothing failed and everything was kept
    assert engine.driver.executor.graphs.pools == 1


def _graph_comm_timing(rank: int, comm) -> tuple:
    """Three all-reduces captured in a graph with timing events, replayed twice."""
    t = torch.ones(7168, device=comm.device, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        comm.all_reduce(t)  # warm: the communicator is initialised before capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    why = comm.begin_capture_timing()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(3):
            comm.all_reduce(t)
    pairs = comm.end_capture_timing()
    comm.reset_stats()
    for _ in range(2):
        comm.harvest()
        graph.replay()
        comm.note_replay(3, pairs)
    count, seconds = comm.stats()
    return why, len(pairs or []), count, seconds, float(t.float().sub(1.0).abs().max())


@pytest.mark.parametrize("backend", ["nccl", "symm_mem"])
def test_collectives_inside_graphs_are_timed(backend: str) -> None:
    """Real collectives (forced on one GPU) replayed from a graph: counted, timed, and still correct."""
    from specsweep.refengine.multirank import run_on_ranks

    why, pairs, count, seconds, err = run_on_ranks(_graph_comm_timing, backend, 1, device="cuda",
                                                  force_collectives=True)[0]
    assert why is None and pairs == 3 and count == 6
    assert seconds is not None and 0 < seconds < 1.0
    assert err == 0.0  # one rank: every sum has one term, so the tensor stays all ones


def _engine_comm_timing(rank: int, comm) -> dict:
    out = {}
    for graphs in ("off", "cuda"):
        snap = generate_all(small_engine(3, graphs, device="cuda", comm=comm), [PROMPTS[0]], 16)[0]
        out[graphs] = {"timing": snap["meta_info"]["timing"], "absent": snap["meta_info"].get("timing_absent"),
                       "output_ids": snap["output_ids"]}
    return out


def test_engine_times_collectives_under_graphs() -> None:
    """The engine with graphs and a communicating NCCL (forced on one GPU) reports a measured verify_comm_s."""
    from specsweep.refengine.multirank import run_on_ranks

    out = run_on_ranks(_engine_comm_timing, "nccl", 1, device="cuda", force_collectives=True)[0]
    assert out["cuda"]["output_ids"] == out["off"]["output_ids"]
    for mode in ("off", "cuda"):
        t = out[mode]["timing"]
        assert out[mode]["absent"] is None
        assert t["verify_comm_s"] is not None and 0 < t["verify_comm_s"] < t["verify_s"], (mode, t)
        assert t["allreduce_ct"] == 2 * SMALL.num_hidden_layers * t["forward_ct"]
    assert out["cuda"]["timing"]["verify_graph_ct"] == out["cuda"]["timing"]["forward_ct"] > 0
