"""Reference engine parts for realistic workloads: chat template, acceptance histogram, the test-only all-reduce
fault."""

from __future__ import annotations

import pytest
import torch

from specsweep.refengine.comm import CorruptedComm, make_communicator, parse_test_fault
from specsweep.refengine.config import ModelConfig
from specsweep.refengine.engine import Engine, Request
from specsweep.refengine.model import TPModel
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.refengine.tokenizer import apply_chat_template
from specsweep.refengine.worker import Driver

SMALL = ModelConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                    vocab_size=300, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                    moe_intermediate_size=32, first_k_dense_replace=1, max_position_embeddings=256)
PROMPT = [5, 17, 99, 3, 250, 42, 7, 8, 9]


def _engine(k: int | None, simulate: float | None, fault: float | None = None) -> Engine:
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu", fault=fault))
    model = TPModel(SMALL, 0, 1, comm, torch.device("cpu"), torch.float32, 0, with_draft=True)
    return Engine(Driver(model, []), eos_token_id=256, spec_steps=k, simulate_acc_len=simulate, seed=0,
                  max_running=4, context_length=256, chunk_tokens=8)


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


def test_chat_template_golden():
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert apply_chat_template(messages) == "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"
    with pytest.raises(ValueError, match="non-empty list"):
        apply_chat_template([])
    with pytest.raises(ValueError, match="'role'"):
        apply_chat_template([{"content": "x"}])


@pytest.mark.parametrize("simulate", [None, 2.5])
def test_acceptance_histogram_counts_every_verify(simulate):
    """h[j] = verifies that accepted j drafts: k + 1 bins, summing to spec_verify_ct (SGLang's semantics)."""
    meta = _generate(_engine(3, simulate), PROMPT, 40)["meta_info"]
    hist = meta["spec_correct_drafts_histogram"]
    assert len(hist) == 4 and sum(hist) == meta["spec_verify_ct"]
    # Every verify emits its accepted drafts plus the bonus token; the last one may be cut by max_new_tokens.
    emitted = sum((j + 1) * n for j, n in enumerate(hist))
    assert emitted >= meta["completion_tokens"] - 1 > emitted - 4
    if simulate == 2.5:
        assert hist[0] == 0 and hist[3] == 0 and abs(hist[1] - hist[2]) <= 1  # lengths 2 and 3 alternate


def test_no_speculation_has_no_histogram():
    assert "spec_correct_drafts_histogram" not in _generate(_engine(None, None), PROMPT, 8)["meta_info"]


def test_corrupted_all_reduce_changes_the_output_but_not_the_bookkeeping():
    """The test-only fault: every all-reduce result scaled; counts and timing are the real ones."""
    good = _generate(_engine(3, None), PROMPT, 24)
    bad = _generate(_engine(3, None, fault=0.5), PROMPT, 24)
    assert bad["output_ids"] != good["output_ids"]
    assert bad["meta_info"]["timing"]["allreduce_ct"] == good["meta_info"]["timing"]["allreduce_ct"]
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu", fault=0.5))
    assert isinstance(comm, CorruptedComm) and "TEST FAULT" in comm.describe() and comm.name == "shm"
    assert comm.all_reduce(torch.ones(3)).tolist() == [0.5, 0.5, 0.5]


def test_parse_test_fault():
    assert parse_test_fault(None) is None and parse_test_fault(" ") is None
    assert parse_test_fault("0.5") == 0.5
    with pytest.raises(ValueError, match="SPECSWEEP_TEST_CORRUPT_ALLREDUCE"):
        parse_test_fault("half")
