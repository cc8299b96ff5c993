"""Model correctness (KV cache, tensor parallelism) and speculative-decoding rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specsweep.refengine.comm import make_communicator
from specsweep.refengine.config import load_config
from specsweep.refengine.engine import Engine, Request
from specsweep.refengine.model import Segment, TPModel
from specsweep.refengine.multirank import run_on_ranks
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.refengine.spec import SimulatedAcceptance, greedy_accept, parse_simulate_acc_len
from specsweep.refengine.worker import Driver
from specsweep.testing.refengine import PROMPT, SMALL
from specsweep.testing.workflow import REPO


def _model(world_size: int = 1, rank: int = 0, comm=None, seed: int = 0) -> TPModel:
    comm = comm or make_communicator(0, prepare_spec("shm", 1, "cpu"))
    return TPModel(SMALL, rank, world_size, comm, torch.device("cpu"), torch.float32, seed, with_draft=True)


def test_verify_forward_matches_single_token_steps() -> None:
    """One forward over k+1 tokens gives the same logits as k+1 one-token forwards (KV cache correct)."""
    m = _model()
    new = [11, 12, 13, 14]
    for slot in (0, 1):
        m.alloc(slot, 64)
        m.forward_target(PROMPT, [Segment(slot, 0, len(PROMPT))], "last")
    batched = m.forward_target(new, [Segment(0, len(PROMPT), len(new))], "all")
    single = torch.cat([m.forward_target([t], [Segment(1, len(PROMPT) + i, 1)], "all") for i, t in enumerate(new)])
    torch.testing.assert_close(batched, single, atol=1e-4, rtol=1e-4)
    # The draft's aux features stored by position agree as well.
    torch.testing.assert_close(m.slots[0].feats[:13], m.slots[1].feats[:13], atol=1e-4, rtol=1e-4)


def test_packed_batch_matches_separate_requests() -> None:
    """Two requests packed in one forward give what each gives alone (per-segment attention)."""
    m = _model()
    other = [1, 2, 3]
    for slot in range(4):
        m.alloc(slot, 64)
    both = m.forward_target(PROMPT + other, [Segment(0, 0, len(PROMPT)), Segment(1, 0, 3)], "last")
    a = m.forward_target(PROMPT, [Segment(2, 0, len(PROMPT))], "last")
    b = m.forward_target(other, [Segment(3, 0, 3)], "last")
    torch.testing.assert_close(both, torch.cat([a, b]), atol=1e-4, rtol=1e-4)


def _run_sequence(rank: int, comm, world_size: int) -> dict[str, list]:
    """Prefill, a 4-token verify, a draft extend and a chain draft step; logits from every rank."""
    m = TPModel(SMALL, rank, world_size, comm, torch.device("cpu"), torch.float32, 0, with_draft=True)
    m.alloc(0, 64)
    out = {"prefill": m.forward_target(PROMPT, [Segment(0, 0, len(PROMPT))], "last").tolist()}
    out["verify"] = m.forward_target([11, 12, 13, 14], [Segment(0, len(PROMPT), 4)], "all").tolist()
    out["draft"] = m.forward_draft(PROMPT + [11], [Segment(0, 0, len(PROMPT) + 1)], "target", "last").tolist()
    out["chain"] = m.forward_draft([12], [Segment(0, len(PROMPT) + 1, 1)], "draft", "last").tolist()
    return out


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_tp2_equals_tp1(backend: str) -> None:
    ref = _run_sequence(0, make_communicator(0, prepare_spec("shm", 1, "cpu")), 1)
    results = run_on_ranks(_run_sequence, backend, 2, args=(2,))
    for rank_out in results:
        for key, value in ref.items():
            torch.testing.assert_close(torch.tensor(rank_out[key]), torch.tensor(value), atol=2e-4, rtol=1e-4,
                                       msg=f"{key} differs between TP=2 ({backend}) and TP=1")


def test_two_all_reduces_per_layer() -> None:
    m = _model()
    m.alloc(0, 64)
    m.comm.reset_stats()
    m.forward_target(PROMPT, [Segment(0, 0, len(PROMPT))], "last")
    assert m.comm.stats()[0] == 2 * SMALL.num_hidden_layers
    m.comm.reset_stats()
    m.forward_draft([1], [Segment(0, 0, 1)], "target", "last")
    assert m.comm.stats()[0] == 2


def test_weights_depend_on_seed_only() -> None:
    a, b, c = _model(seed=1), _model(seed=1), _model(seed=2)
    assert torch.equal(a.lm_head, b.lm_head)
    assert not torch.equal(a.lm_head, c.lm_head)


# ------------------------------------------------------------------ acceptance
@pytest.mark.parametrize(("draft", "target", "expected"), [
    ([1, 2, 3], [1, 2, 3, 4], 3),
    ([1, 2, 3], [1, 2, 9, 4], 2),
    ([1, 2, 3], [9, 2, 3, 4], 0),
    ([5], [5, 6], 1),
    ([1, 9, 3], [1, 2, 3, 4], 1),  # a later match after a miss does not count
])
def test_greedy_accept(draft: list[int], target: list[int], expected: int) -> None:
    assert greedy_accept(draft, target) == expected


def test_greedy_accept_rejects_wrong_lengths() -> None:
    with pytest.raises(ValueError):
        greedy_accept([1, 2], [1, 2])


@pytest.mark.parametrize("mean", [1.0, 1.3, 2.0, 2.5, 3.7, 4.0])
def test_simulated_acceptance_mean(mean: float) -> None:
    sim = SimulatedAcceptance(mean, 4, seed=0, key=[1, 2, 3])
    lengths = [sim.next() for _ in range(1000)]
    assert all(1 <= n <= 4 for n in lengths)
    assert abs(sum(lengths) / len(lengths) - mean) < 2e-3
    assert set(lengths) <= {int(mean), -int(-mean // 1)}


def test_simulated_acceptance_deterministic_per_seed_and_prompt() -> None:
    a = [SimulatedAcceptance(2.5, 4, 0, [1]).next() for _ in range(5)]
    b = [SimulatedAcceptance(2.5, 4, 0, [1]).next() for _ in range(5)]
    assert a == b


def test_parse_simulate_acc_len() -> None:
    assert parse_simulate_acc_len(None, 3) is None
    assert parse_simulate_acc_len("-1", 3) is None
    assert parse_simulate_acc_len("2.5", 3) == 2.5
    with pytest.raises(ValueError, match="outside"):
        parse_simulate_acc_len("4.5", 3)
    with pytest.raises(ValueError, match="speculative decoding is off"):
        parse_simulate_acc_len("2", None)


# ------------------------------------------------------------------ engine level
def _generate(engine: Engine, prompt: list[int], max_new: int) -> dict:
    done: list[dict] = []
    engine.submit(Request(input_ids=prompt, max_new_tokens=max_new, ignore_eos=True,
                          sink=lambda s: done.append(s) if s["finished"] else None))
    while not done:
        engine._drain(block=False)
        engine._admit()
        if engine.running:
            engine._step()
    return done[0]


def _engine(k: int | None, simulate: float | None) -> Engine:
    model = _model()
    return Engine(Driver(model, []), eos_token_id=256, spec_steps=k, simulate_acc_len=simulate, seed=0,
                  max_running=4, context_length=256, chunk_tokens=8)


@pytest.mark.parametrize("mean", [1.5, 2.5, 3.0])
def test_engine_simulated_accept_length(mean: float) -> None:
    """With SGLANG_SIMULATE_ACC_LEN the per-request accept length is the requested mean (up to the last step)."""
    snap = _generate(_engine(3, mean), PROMPT, 121)
    meta = snap["meta_info"]
    assert meta["completion_tokens"] == 121
    # The first token comes from prefill; the last verify may be cut by max_new_tokens.
    assert abs(meta["spec_accept_length"] - mean) < 0.1
    assert meta["timing"]["forward_ct"] == meta["spec_verify_ct"]
    assert meta["timing"]["allreduce_ct"] == 2 * SMALL.num_hidden_layers * meta["spec_verify_ct"]


def test_greedy_speculation_emits_the_target_greedy_sequence() -> None:
    """Without simulation, speculative output must equal plain greedy decoding (lossless)."""
    plain = _generate(_engine(None, None), PROMPT, 24)
    spec = _generate(_engine(3, None), PROMPT, 24)
    assert spec["output_ids"] == plain["output_ids"]
    assert "spec_verify_ct" not in plain["meta_info"]
    assert plain["meta_info"]["timing"]["draft_s"] == 0.0


def test_simulated_output_deterministic() -> None:
    a = _generate(_engine(3, 2.5), PROMPT, 30)
    b = _generate(_engine(3, 2.5), PROMPT, 30)
    assert a["output_ids"] == b["output_ids"]


def test_chunked_prefill_matches_single_chunk() -> None:
    long_prompt = list(range(40, 70))
    e1 = _engine(None, None)
    e1.chunk_tokens = 7
    e2 = _engine(None, None)
    e2.chunk_tokens = 1024
    assert _generate(e1, long_prompt, 6)["output_ids"] == _generate(e2, long_prompt, 6)["output_ids"]


def test_packaged_configs_load(tmp_path: Path) -> None:
    base = REPO / "specsweep" / "refengine" / "configs"
    tiny = load_config(base / "tiny")
    kimi = load_config(base / "kimi-k25-scaled")
    assert kimi.num_hidden_layers == 61 and kimi.n_routed_experts > 0
    assert 8 <= tiny.num_hidden_layers <= 12 and tiny.hidden_size == 256
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        load_config(tmp_path)


def test_dense_moe_equals_sparse_top_k_reference() -> None:
    """The batched MoE equals a per-token loop over the k chosen experts (plus the shared expert)."""
    m = _model()
    layer = m.layers[1]
    assert "router" in layer
    x = torch.randn(5, SMALL.hidden_size, generator=torch.Generator().manual_seed(3))
    got = m._moe(x, layer)
    ref = torch.zeros_like(x)
    for t in range(x.shape[0]):
        scores = torch.sigmoid(x[t] @ layer["router"])
        w, idx = scores.topk(SMALL.num_experts_per_tok)
        w = w / w.sum() * SMALL.routed_scaling_factor
        for wi, e in zip(w.tolist(), idx.tolist()):
            ref[t] += wi * m._mlp(x[t:t + 1], {"wgu": layer["wgu"][e], "wd": layer["wd"][e]})[0]
        ref[t] += m._mlp(x[t:t + 1], layer["shared"])[0]
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_long_prompt_speculation_keeps_cycle_batches_small() -> None:
    """Draft prefill is chunked, so a cycle's forwards stay within max_running * (k + 1) tokens."""
    engine = _engine(3, None)
    engine.chunk_tokens = 8
    seen: list[int] = []
    call = engine.driver.call

    def spy(cmd: tuple):
        if cmd[0] in ("draft", "target"):
            seen.append(len(cmd[1]))
        return call(cmd)

    engine.driver.call = spy  # type: ignore[method-assign]
    long_prompt = list(range(40, 90))
    spec = _generate(engine, long_prompt, 10)
    assert max(seen) <= max(engine.chunk_tokens, engine.max_running * 4)
    assert spec["output_ids"] == _generate(_engine(None, None), long_prompt, 10)["output_ids"]


def test_bfloat16_generation_runs() -> None:
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu"))
    model = TPModel(SMALL, 0, 1, comm, torch.device("cpu"), torch.bfloat16, 0, with_draft=True)
    engine = Engine(Driver(model, []), eos_token_id=256, spec_steps=3, simulate_acc_len=None, seed=0,
                    max_running=2, context_length=256, chunk_tokens=8)
    snap = _generate(engine, PROMPT, 12)
    assert snap["meta_info"]["completion_tokens"] == 12
    assert all(0 <= t < SMALL.vocab_size for t in snap["output_ids"])
