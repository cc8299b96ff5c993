"""On a CUDA GPU: the reference engine's model and collectives, and the micro-benchmark over NCCL.

The gpu tier (its folder marks every test ``gpu``): deselected unless ``-m gpu`` names it, and then
each test fails, never skips, without a GPU. On a GPU host: ``python3 -m pytest -m gpu tests/gpu``.
"""

from __future__ import annotations

import pytest
import torch

from specsweep.refengine.comm import make_communicator
from specsweep.refengine.model import Segment, TPModel
from specsweep.refengine.multirank import run_on_ranks
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.testing.refengine import PROMPT, SMALL, run_allreduce_bench
from specsweep.testing.workflow import REPO


def test_cuda_matches_cpu() -> None:
    """The same seeded model gives the same logits on CUDA (float32) as on the CPU."""
    outs = []
    for device in ("cpu", "cuda"):
        comm = make_communicator(0, prepare_spec("shm" if device == "cpu" else "nccl", 1, device))
        m = TPModel(SMALL, 0, 1, comm, torch.device(device), torch.float32, 0, with_draft=True)
        m.alloc(0, 64)
        a = m.forward_target(PROMPT, [Segment(0, 0, len(PROMPT))], "last")
        b = m.forward_target([11, 12, 13, 14], [Segment(0, len(PROMPT), 4)], "all")
        c = m.forward_draft(PROMPT + [11], [Segment(0, 0, len(PROMPT) + 1)], "target", "last")
        outs.append(torch.cat([a, b, c]).cpu())
    torch.testing.assert_close(outs[1], outs[0], atol=2e-3, rtol=1e-3)


def _cuda_sums(rank: int, comm) -> list[float]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for numel in (8, 7168, 65536):
            t = torch.full((numel,), float(rank + 1), dtype=dtype, device=comm.device)
            comm.all_reduce(t)
            out.append(float(t.float().sub(sum(range(1, comm.world_size + 1))).abs().max()))
    return out


@pytest.mark.parametrize("backend", ["nccl", "symm_mem"])
def test_cuda_backends(backend: str) -> None:
    """On every visible GPU (or forced through the real collective on one GPU) the sum is right."""
    world = max(1, min(torch.cuda.device_count(), 4))
    results = run_on_ranks(_cuda_sums, backend, world, device="cuda", force_collectives=world == 1)
    assert all(err == 0.0 for rank_errs in results for err in rank_errs)


def test_torch_runner_over_nccl_on_the_gpus():
    n = torch.cuda.device_count()
    assert n >= 1, "needs a CUDA GPU"
    out = run_allreduce_bench("--runner", "torch", "--backend", "nccl", "--world-size", str(n), "--device", "cuda",
                              "--model-path", str(REPO / "specsweep/refengine/configs/kimi-k25-scaled"),
                              "--dtype", "bfloat16", "--tokens", "4", "--iters", "50")
    assert out["sizes"][0]["correct"] and out["nccl"]


@pytest.mark.parametrize("backend", ["nccl", "symm_mem"])
def test_in_forward_timing_reads_the_cuda_events_of_each_forward(backend: str) -> None:
    """The refengine runner's in_forward timing on CUDA (one GPU, the real collective forced): the model's
    target forwards run on the GPU and each forward's figure comes from the communicator's CUDA events."""
    from specsweep.serve.allreduce_bench import MIN_FORWARDS, _refengine_rank
    from specsweep.testing.refengine import TINY

    numels = [256, 1024]  # tiny: hidden 256 x 1 and 4 tokens
    (out,) = run_on_ranks(_refengine_rank, backend, 1, args=(numels, "float32", 30, 5, TINY), device="cuda",
                          force_collectives=True, max_bytes=1 << 16)
    for numel in numels:
        assert out[numel]["correct"] and out[numel]["calls_per_forward"] == 20
        assert len(out[numel]["forward_times"]) == MIN_FORWARDS and all(t > 0 for t in out[numel]["forward_times"])
