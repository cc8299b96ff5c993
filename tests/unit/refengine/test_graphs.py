"""CUDA graphs in the reference engine: when the graph path is taken, and that it computes what eager does.

On the CPU nothing can be captured, so the fixed-shape forwards that the graphs
hold run directly (``GraphRunner(capture=False)``): that checks the static
pool, padding, buckets and the graph-or-eager decision against the eager
forwards. tests/gpu/test_cuda_graphs.py captures and replays real CUDA graphs.
"""

from __future__ import annotations

import collections
import re
from multiprocessing import Pipe

import pytest
import torch

from specsweep.analysis import formulas as M
from specsweep.refengine import trace
from specsweep.refengine.cli import check_args, cuda_graph_enabled, parse_args
from specsweep.refengine.comm import make_communicator
from specsweep.refengine.config import load_config
from specsweep.refengine.cudagraph import (
    GraphKey,
    GraphRunner,
    capture_batch_sizes,
    graph_key,
    kv_buckets,
    make_plan,
    pack_inputs,
    pool_capacity,
    prefill_buckets,
)
from specsweep.refengine.engine import GRAPH_COMM_ABSENT, Request, _add_comm
from specsweep.refengine.model import Segment, TPModel
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.refengine.server import rank_setup
from specsweep.refengine.worker import Driver, build_graphs, build_rank
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
from specsweep.testing.workflow import REPO


# ------------------------------------------------------------ selection
def _setup(argv: list[str]):
    ns = parse_args(argv)
    cfg = load_config(ns.model_path)
    spec = prepare_spec("shm", 1, "cpu")
    return ns, rank_setup(ns, cfg, None, spec, None, CONTEXT, 1)


def test_graphs_on_by_default_on_cuda_only() -> None:
    assert not cuda_graph_enabled(parse_args([]))  # cpu default
    assert cuda_graph_enabled(parse_args(["--device", "cuda"]))
    assert not cuda_graph_enabled(parse_args(["--device", "cuda", "--disable-cuda-graph"]))
    assert not cuda_graph_enabled(parse_args(["--disable-cuda-graph"]))
    assert check_args(["--device", "cuda", "--disable-cuda-graph"]) == []


def test_setup_carries_the_decision_to_every_rank() -> None:
    assert _setup(["--device", "cuda"])[1].cuda_graph
    assert _setup(["--device", "cuda"])[1].graph_comm_timing
    assert not _setup(["--device", "cuda", "--disable-graph-comm-timing"])[1].graph_comm_timing
    assert not _setup(["--device", "cuda", "--disable-cuda-graph"])[1].cuda_graph
    assert _setup(["--device", "cuda"])[1].prefill_graph_tokens == 1024  # one prefill chunk
    assert _setup(["--device", "cuda", "--disable-prefill-cuda-graph"])[1].prefill_graph_tokens == 0
    assert _setup(["--device", "cuda", "--disable-cuda-graph"])[1].prefill_graph_tokens == 0
    ns, setup = _setup([])
    assert setup.prefill_graph_tokens == 0
    assert not setup.cuda_graph
    model = build_rank(0, setup, timed=True)
    assert build_graphs(model, setup) is None and model.pool_capacity is None  # cpu: eager, per-slot caches


def test_capture_refused_off_cuda() -> None:
    m = small_model(pool=True)
    with pytest.raises(RuntimeError, match="--device cuda"):
        GraphRunner(m, make_plan(4, CONTEXT, 3), logits=True, capture=True)
    with pytest.raises(RuntimeError, match="static pool"):
        GraphRunner(small_model(pool=False), make_plan(4, CONTEXT, 3), logits=True, capture=False)


def test_plan_sizes() -> None:
    assert capture_batch_sizes(16) == (1, 2, 4, 8, 16)
    assert capture_batch_sizes(12) == (1, 2, 4, 8, 12)
    assert capture_batch_sizes(1) == (1,)
    assert kv_buckets(4096) == (64, 128, 256, 512, 1024, 2048, 4096)
    assert kv_buckets(300) == (64, 128, 256, 300)
    assert kv_buckets(40) == (40,)
    assert pool_capacity(4096) == 4098
    spec = make_plan(16, 4096, 3)
    assert spec.kinds == (("target", 4), ("draft_extend", 4), ("draft_step", 1))
    assert len(spec.keys()) == 3 * 5 * 7
    assert make_plan(16, 4096, 1).kinds == (("target", 2), ("draft_extend", 2))  # k=1: no chain step
    assert make_plan(16, 4096, None).kinds == (("target", 1),)
    assert spec.prefill_kinds == () and spec.prefill_buckets == ()  # prefill graphs only when asked for
    assert prefill_buckets(1024, 4096) == (16, 32, 64, 128, 256, 512, 1024)
    assert prefill_buckets(1024, 100) == (16, 32, 64, 100)
    assert prefill_buckets(0, 4096) == ()
    full = make_plan(16, 4096, 3, prefill_tokens=1024)
    assert full.prefill_kinds == ("prefill", "draft_prefill") and full.kinds == spec.kinds
    assert make_plan(16, 4096, None, prefill_tokens=1024).prefill_kinds == ("prefill",)  # no draft to prefill
    # batch x bucket <= 1024: 5 batch sizes at 16..64 tokens, 4 at 128, 3 at 256, 2 at 512, 1 at 1024
    prefill = [k for k in full.keys() if k.kind == "prefill"]
    assert len(prefill) == 5 + 5 + 5 + 4 + 3 + 2 + 1
    assert all(k.batch * k.n <= 1024 and k.kv_len == max(64, k.n) for k in prefill)
    assert len(full.keys()) == 2 * len(prefill) + 3 * 5 * 7
    assert full.keys()[0] == GraphKey("prefill", 1024, 1, 1024)  # the largest first: the pool is reused


def test_graph_key_decides_graph_or_eager() -> None:
    plan = make_plan(16, 4096, 3)
    verify = [Segment(0, 70, 4), Segment(3, 10, 4), Segment(5, 20, 4)]
    assert graph_key(plan, "target", verify) == GraphKey("target", 4, 4, 128)  # 3 padded to 4; 74 -> bucket 128
    assert graph_key(plan, "target", [Segment(0, 0, 9)]) is None  # a prefill chunk runs eager
    assert graph_key(plan, "target", [Segment(0, 9, 4), Segment(1, 0, 3)]) is None  # mixed lengths
    assert graph_key(plan, "target", [Segment(i, 0, 4) for i in range(17)]) is None  # above the largest batch
    assert graph_key(plan, "target", [Segment(0, 4093, 4)]) is None  # past the largest kv bucket
    assert graph_key(plan, "target", [Segment(0, 4092, 4)]) == GraphKey("target", 4, 1, 4096)
    assert graph_key(plan, "draft_extend", [Segment(0, 8, 2), Segment(1, 3, 4)]) == GraphKey("draft_extend", 4, 2, 64)
    assert graph_key(plan, "draft_extend", [Segment(0, 0, 5)]) is None  # longer than k+1: a prefill chunk
    assert graph_key(plan, "draft_step", [Segment(0, 60, 1)]) == GraphKey("draft_step", 1, 1, 64)
    assert graph_key(plan, "draft_step", [Segment(0, 60, 2)]) is None
    assert graph_key(plan, "target", []) is None
    nospec = make_plan(4, 256, None)
    assert graph_key(nospec, "target", [Segment(0, 9, 1)]) == GraphKey("target", 1, 1, 64)
    assert graph_key(nospec, "draft_step", [Segment(0, 9, 1)]) is None
    assert graph_key(plan, "prefill", [Segment(0, 0, 9)]) is None  # no prefill graphs planned


def test_graph_key_for_prefill() -> None:
    plan = make_plan(16, 4096, 3, prefill_tokens=1024)
    assert graph_key(plan, "prefill", [Segment(0, 0, 65)]) == GraphKey("prefill", 128, 1, 128)
    assert graph_key(plan, "prefill", [Segment(0, 0, 64)]) == GraphKey("prefill", 64, 1, 64)
    assert graph_key(plan, "draft_prefill", [Segment(0, 0, 63)]) == GraphKey("draft_prefill", 64, 1, 64)
    assert graph_key(plan, "prefill", [Segment(0, 0, 3)]) == GraphKey("prefill", 16, 1, 64)
    # three prompts of one forward: padded to the longest, the batch to 4
    assert graph_key(plan, "prefill", [Segment(0, 0, 100), Segment(1, 0, 7), Segment(2, 0, 128)]) == \
        GraphKey("prefill", 128, 4, 128)
    assert graph_key(plan, "prefill", [Segment(i, 0, 100) for i in range(9)]) is None  # 16 x 128 > 1024 tokens
    assert graph_key(plan, "prefill", [Segment(0, 0, 1025)]) is None  # longer than one chunk
    assert graph_key(plan, "prefill", [Segment(0, 1024, 500)]) is None  # a later chunk: past the kv bucket
    assert graph_key(plan, "prefill", [Segment(0, 20, 30)]) == GraphKey("prefill", 32, 1, 64)  # still fits
    assert graph_key(plan, "target", [Segment(0, 0, 9)]) is None  # decode graphs never take a prompt


def test_pack_inputs_layout_and_padding() -> None:
    key = GraphKey("draft_extend", 3, 2, 64)
    t = pack_inputs(key, 4, [11, 12, 13, 14], [Segment(5, 10, 1), Segment(2, 20, 3)], scratch_slot=9).tolist()
    n, m = 3, 4
    ids, pos, slots, last = t[:m * n], t[m * n:2 * m * n], t[2 * m * n:2 * m * n + m], t[2 * m * n + m:]
    assert ids == [11, 0, 0, 12, 13, 14, 0, 0, 0, 0, 0, 0]
    assert pos == [10, 11, 12, 20, 21, 22, 0, 1, 2, 0, 1, 2]
    assert slots == [5, 2, 9, 9]
    assert last == [0, 5, 8, 11]
    with pytest.raises(ValueError, match="token ids"):
        pack_inputs(key, 4, [1, 2], [Segment(5, 10, 1)], scratch_slot=9)


# ------------------------------------------------------ static == eager
@pytest.mark.parametrize("k", [3, 1, None])
@pytest.mark.parametrize("prefill", [True, False])
def test_static_forwards_give_the_eager_tokens(k: int | None, prefill: bool) -> None:
    """Three requests prefilled and decoded together (batch 3, padded to 4; prompts of 9, 3 and 35 tokens in
    chunks of 16, so later chunks start past 0): the fixed-shape path gives eager's tokens."""
    eager = generate_all(small_engine(k, "off"), PROMPTS, 20)
    engine = small_engine(k, "static", prefill=prefill)
    calls = count_prefill_calls(engine)
    static = generate_all(engine, PROMPTS, 20)
    for e, s in zip(eager, static):
        assert s["output_ids"] == e["output_ids"]
        t = s["meta_info"]["timing"]
        assert t["verify_graph_ct"] == t["forward_ct"] > 0  # every decode-phase target forward took the graph path
        assert (t["prefill_graph_ct"] > 0) == prefill
        assert e["meta_info"]["timing"]["verify_graph_ct"] == e["meta_info"]["timing"]["prefill_graph_ct"] == 0
    replays = engine.driver.executor.graphs.replays_by_kind
    # every prefill forward (these prompts fit the graphs) took the graph path, or none did
    assert replays["prefill"] == (calls[trace.PREFILL] if prefill else 0) and calls[trace.PREFILL] >= 3
    assert replays["draft_prefill"] == (calls[trace.DRAFT_PREFILL] if prefill and k else 0)


def test_static_prefill_matches_eager_logits_and_state() -> None:
    """Two prompts in one prefill forward (padded to 16 tokens, batch 2), then the draft's prefill: logits,
    KV entries, aux features and draft state agree with the eager forwards."""
    a, b = small_model(pool=True), small_model(pool=True)
    runner = GraphRunner(b, make_plan(4, CONTEXT, 3, prefill_tokens=PREFILL_TOKENS), logits=True, capture=False)
    runner.capture()
    p0, p1 = PROMPTS[0], PROMPTS[1]
    for m in (a, b):
        m.alloc(0, 64)
        m.alloc(2, 64)
    ids, segs = p0 + p1, [Segment(0, 0, len(p0)), Segment(2, 0, len(p1))]
    want = a.forward_target(ids, segs, "last")
    key = runner.lookup("prefill", segs)
    assert key == GraphKey("prefill", 16, 2, 64)
    got = runner.run(key, ids, segs, "last")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for slot, n in ((0, len(p0)), (2, len(p1))):
        torch.testing.assert_close(b.pool_k[:, slot, :, :n], a.pool_k[:, slot, :, :n], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.pool_feats[slot, :n], a.pool_feats[slot, :n], atol=1e-4, rtol=1e-4)
    dids, dsegs = p0[:-1] + p1[:-1], [Segment(0, 0, len(p0) - 1), Segment(2, 0, len(p1) - 1)]
    assert a.forward_draft(dids, dsegs, "target", "none") is None
    dkey = runner.lookup("draft_prefill", dsegs)
    assert dkey == GraphKey("draft_prefill", 16, 2, 64)
    assert runner.run(dkey, dids, dsegs, "none") is None
    for slot, n in ((0, len(p0) - 1), (2, len(p1) - 1)):
        torch.testing.assert_close(b.pool_dk[slot, :, :n], a.pool_dk[slot, :, :n], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.pool_draft_hidden[slot], a.pool_draft_hidden[slot], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="cannot give logits='all'"):
        runner.run(key, ids, segs, "all")
    with pytest.raises(ValueError, match="cannot give logits='last'"):
        runner.run(dkey, dids, dsegs, "last")


def test_static_forward_matches_eager_logits_and_state() -> None:
    """One verify and one draft extend + chain step: logits, KV entries and draft state agree."""
    a, b = small_model(pool=True), small_model(pool=True)
    runner = GraphRunner(b, make_plan(4, CONTEXT, 3), logits=True, capture=False)
    runner.capture()  # without CUDA: runs each planned fixed-shape forward once on the scratch slot
    prompt = PROMPTS[0]
    for m in (a, b):
        m.alloc(1, 64)
        m.forward_target(prompt, [Segment(1, 0, len(prompt))], "last")
        m.forward_draft(prompt[:-1], [Segment(1, 0, len(prompt) - 1)], "target", "none")
    p = len(prompt)
    verify = ([prompt[-1], 11, 12, 13], [Segment(1, p - 1, 4)])
    want = a.forward_target(*verify, "all")
    key = runner.lookup("target", verify[1])
    got = runner.run(key, *verify, "all")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.pool_k[:, 1, :, :p + 3], a.pool_k[:, 1, :, :p + 3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.pool_feats[1, :p + 3], a.pool_feats[1, :p + 3], atol=1e-4, rtol=1e-4)
    extend = ([prompt[-1], 11], [Segment(1, p - 1, 2)])  # 2 real tokens padded to 4
    want = a.forward_draft(*extend, "target", "last")
    got = runner.run(runner.lookup("draft_extend", extend[1]), *extend, "last")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b.pool_draft_hidden[1], a.pool_draft_hidden[1], atol=1e-5, rtol=1e-5)
    step = ([12], [Segment(1, p + 1, 1)])
    want = a.forward_draft(*step, "draft", "last")
    got = runner.run(runner.lookup("draft_step", step[1]), *step, "last")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def _static_sequence(rank: int, comm, world_size: int, graphs: bool) -> dict[str, list]:
    """Prefill (eager), then a verify, a draft extend and a chain step through the fixed-shape path."""
    m = TPModel(SMALL, rank, world_size, comm, torch.device("cpu"), torch.float32, 0, with_draft=True)
    m.enable_pool(4, pool_capacity(CONTEXT))
    runner = GraphRunner(m, make_plan(4, CONTEXT, 3), logits=rank == 0, capture=False)
    if graphs:
        runner.capture()
    prompt = PROMPTS[0]
    p = len(prompt)
    m.alloc(2, 64)
    m.forward_target(prompt, [Segment(2, 0, p)], "last" if rank == 0 else "none")
    m.forward_draft(prompt[:-1], [Segment(2, 0, p - 1)], "target", "none")
    calls = {"verify": ("target", [prompt[-1], 11, 12, 13], [Segment(2, p - 1, 4)], "all"),
             "extend": ("draft_extend", [prompt[-1], 11], [Segment(2, p - 1, 2)], "last"),
             "step": ("draft_step", [12], [Segment(2, p + 1, 1)], "last")}
    out = {}
    for name, (kind, ids, segs, logits) in calls.items():
        mode = logits if rank == 0 else "none"
        if graphs:
            got = runner.run(runner.lookup(kind, segs), ids, segs, mode)
        elif kind == "target":
            got = m.forward_target(ids, segs, mode)
        else:
            got = m.forward_draft(ids, segs, "target" if kind == "draft_extend" else "draft", mode)
        out[name] = None if got is None else got.tolist()
    return out


def test_static_path_over_two_ranks_equals_one_rank() -> None:
    """TP=2 over shm through the fixed-shape forwards (followers without logits) gives TP=1's logits."""
    from specsweep.refengine.multirank import run_on_ranks

    ref = _static_sequence(0, make_communicator(0, prepare_spec("shm", 1, "cpu")), 1, False)
    ranks = run_on_ranks(_static_sequence, "shm", 2, args=(2, True))
    assert all(v is None for v in ranks[1].values())
    for key, value in ref.items():
        torch.testing.assert_close(torch.tensor(ranks[0][key]), torch.tensor(value), atol=2e-4, rtol=1e-4,
                                   msg=f"{key}: TP=2 fixed-shape path differs from TP=1 eager")


def test_pool_alloc_checks() -> None:
    m = small_model(pool=True, max_slots=2)
    with pytest.raises(ValueError, match="outside the pool"):
        m.alloc(2, 10)  # slot 2 is the scratch slot
    with pytest.raises(ValueError, match="pool holds"):
        m.alloc(0, pool_capacity(CONTEXT) + 1)
    m.alloc(0, 10)
    assert m.slots[0].k.data_ptr() == m.pool_k[:, 0].data_ptr()
    with pytest.raises(RuntimeError, match="before the first alloc"):
        m.enable_pool(2, 64)


# ------------------------------------------------------------ timing
def test_replayed_allreduces_are_counted_not_timed() -> None:
    single = make_communicator(0, prepare_spec("shm", 1, "cpu"))  # one rank: nothing to communicate
    single.note_replay(8)
    assert single.stats() == (8, 0.0)
    forced = make_communicator(0, prepare_spec("shm", 1, "cpu", force_collectives=True))
    try:
        forced.all_reduce(torch.ones(4))
        forced.note_replay(8)
        assert forced.stats() == (9, None)  # a sum without the 8 replayed calls would look complete
        forced.reset_stats()
        forced.all_reduce(torch.ones(4))
        count, seconds = forced.stats()
        assert count == 1 and seconds is not None and seconds > 0
    finally:
        forced.close()


def test_unmeasured_comm_is_absent_downstream() -> None:
    r = Request(input_ids=[1], max_new_tokens=1, ignore_eos=True, sink=lambda s: None)
    _add_comm(r, "verify_comm_s", 0.002)
    _add_comm(r, "verify_comm_s", None)
    _add_comm(r, "verify_comm_s", 0.003)
    assert r.timing["verify_comm_s"] is None and r.timing_absent == {"verify_comm_s": GRAPH_COMM_ABSENT}
    record = {"status": "ok", "phase": "measured", "spec_verify_ct": 3,
              "timing": {"draft_s": 0.01, "verify_s": 0.03, "verify_comm_s": None, "allreduce_ct": 366,
                         "forward_ct": 3}}
    share = M.verify_comm_share([record])
    assert isinstance(share, M.Absent) and "verify_comm_s" in share.reason
    assert M.allreduce_per_forward([record]) == 122


# ------------------------------------------------------------ profiler ranges
def test_ranges_appear_in_a_profile() -> None:
    """Every phase name and the all-reduce name show up in a real torch profiler trace."""
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu", force_collectives=True))
    try:
        engine = small_engine(3, "off", comm=comm)
        assert trace.annotate(trace.VERIFY) is trace._NULL  # no profiler: no range at all
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            generate_all(engine, [list(range(30, 60))], 6)  # 30 tokens: two prefill chunks of 16
        names = {e.name for e in prof.events()}
    finally:
        comm.close()
    for name in (trace.PREFILL, trace.DRAFT_PREFILL, trace.DRAFT, trace.VERIFY, trace.ALL_REDUCE_PREFIX + "shm"):
        assert name in names, name
    assert trace.GRAPH_REPLAY not in names and trace.DECODE not in names


def test_graph_path_ranges() -> None:
    engine = small_engine(None, "static")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        generate_all(engine, [PROMPTS[1]], 4)
    names = {e.name for e in prof.events()}
    assert {trace.DECODE, trace.GRAPH_REPLAY, trace.PREFILL} <= names


def test_readme_lists_every_range_name() -> None:
    readme = (REPO / "specsweep" / "refengine" / "README.md").read_text()
    listed = set(re.findall(r"`(refengine\.[a-z_.<>]+)`", readme))
    assert set(trace.ALL_NAMES) <= listed, set(trace.ALL_NAMES) - listed


def test_followers_get_no_logits() -> None:
    """Rank 0 alone reads logits: the command a follower receives asks for none, the rest unchanged."""
    here, there = Pipe()
    driver = Driver(small_model(pool=False), [here])
    driver.model.alloc(0, 32)
    driver.call(("target", [1, 2], [Segment(0, 0, 2)], "last", trace.PREFILL))
    driver.call(("draft", [1], [Segment(0, 0, 1)], "target", "last", trace.DRAFT))
    assert there.recv() == ("target", [1, 2], [Segment(0, 0, 2)], "none", trace.PREFILL)
    assert there.recv() == ("draft", [1], [Segment(0, 0, 1)], "target", "none", trace.DRAFT)


def test_h200_trace_fixture_is_what_its_readme_says() -> None:
    """The committed H200 trace (for trace analysis) holds two cycles of replayed graphs with our ranges."""
    import gzip
    import json

    data = json.loads(gzip.open(REPO / "tests" / "fixtures" / "traces" / "refengine-h200-tp1.trace.json.gz").read())
    events = data["traceEvents"]
    ranges = collections.Counter(e["name"] for e in events if e.get("cat") == "user_annotation")
    assert ranges == {trace.DRAFT: 6, trace.VERIFY: 2, trace.GRAPH_REPLAY: 8}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"]
    kernels = collections.Counter(e["args"]["correlation"] for e in events if e.get("cat") == "kernel")
    per_launch = sorted(kernels[e["args"]["correlation"]] for e in launches)
    assert per_launch == [38, 38, 38, 38, 48, 48, 2737, 2737]
    assert not any("nccl" in e.get("name", "").lower() for e in events)  # TP=1: nothing communicates


def test_a_capture_error_names_its_first_cause() -> None:
    from specsweep.refengine.cudagraph import _error_chain

    try:
        try:
            raise RuntimeError("operation not permitted when stream is capturing")
        except RuntimeError:
            raise RuntimeError("operation failed due to a previous error during capture") from None
    except RuntimeError as exc:
        assert _error_chain(exc) == "RuntimeError: operation failed due to a previous error during capture"
    try:
        try:
            raise RuntimeError("operation not permitted when stream is capturing")
        except RuntimeError:
            raise RuntimeError("operation failed due to a previous error during capture")
    except RuntimeError as exc:
        assert _error_chain(exc) == ("RuntimeError: operation not permitted when stream is capturing; then "
                                     "RuntimeError: operation failed due to a previous error during capture")
