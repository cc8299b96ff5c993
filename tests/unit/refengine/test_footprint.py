"""The footprint formula (``refengine.footprint``) against the bytes of a model the engine really builds."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specsweep.refengine.comm import make_communicator
from specsweep.refengine.config import load_config
from specsweep.refengine.cudagraph import pool_capacity
from specsweep.refengine.footprint import ALLOWANCE_BYTES, plan_server_bytes, server_bytes
from specsweep.refengine.model import TPModel
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.testing.refengine import SMALL
from specsweep.testing.workflow import REPO


def _tensor_bytes(obj, seen: set[int]) -> int:
    """Bytes of every distinct tensor reachable from a model's attributes (views of one storage once)."""
    if isinstance(obj, torch.Tensor):
        key = obj.untyped_storage().data_ptr()
        if key in seen:
            return 0
        seen.add(key)
        return obj.untyped_storage().nbytes()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v, seen) for v in obj)
    return 0


def _built_bytes(cfg, with_draft: bool, max_running: int, context: int) -> int:
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu"))
    model = TPModel(cfg, 0, 1, comm, torch.device("cpu"), torch.float32, 0, with_draft=with_draft)
    model.enable_pool(max_running, pool_capacity(context))
    seen: set[int] = set()
    return sum(_tensor_bytes(v, seen) for k, v in vars(model).items() if k != "_key_pos")


@pytest.mark.parametrize("with_draft", [False, True])
@pytest.mark.parametrize("moe", [False, True])
def test_the_formula_matches_the_tensors_of_a_built_model_within_two_percent(with_draft, moe):
    cfg = SMALL if not moe else replace(SMALL, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                        moe_intermediate_size=32, first_k_dense_replace=1)
    built = _built_bytes(cfg, with_draft, max_running=3, context=40)
    formula = server_bytes(cfg, with_draft=with_draft, dtype="float32", max_running=3, context=40) - ALLOWANCE_BYTES
    assert formula == pytest.approx(built, rel=0.02)


def test_the_gpu_model_at_its_full_context_needs_about_18_gib_and_at_512_a_few():
    """The figure an H100 showed: six servers of 18-19 GiB each did not fit in 80 GB (CUDA out of memory)."""
    args = {"model-path": "config/models/refengine-kimi-gpu", "dtype": "bfloat16", "speculative-algorithm": "EAGLE3"}
    full = plan_server_bytes(args, REPO) / 2**30
    short = plan_server_bytes({**args, "context-length": 512}, REPO) / 2**30
    assert 17 < full < 21
    assert short < 5
    assert plan_server_bytes({**args, "disable-cuda-graph": True}, REPO) < plan_server_bytes(args, REPO)


def test_a_model_path_that_cannot_be_read_is_a_value_error():
    with pytest.raises(ValueError, match="no config.json"):
        plan_server_bytes({"model-path": "no/such/model"}, REPO)


def test_the_tiny_cpu_model_is_read_from_its_package_path():
    cfg = load_config(REPO / "specsweep/refengine/configs/tiny")
    assert server_bytes(cfg, with_draft=True) > ALLOWANCE_BYTES
