"""The reference engine's small test model built on one rank, and an engine over it, stepped in the test's
thread: for the CPU tests of CUDA-graph shapes and the GPU tier (imports torch; ``testing.refengine`` does not).
"""

from __future__ import annotations

import collections

import torch

from specsweep.refengine import trace
from specsweep.refengine.comm import make_communicator
from specsweep.refengine.cudagraph import GraphRunner, make_plan, pool_capacity
from specsweep.refengine.engine import Engine, Request
from specsweep.refengine.model import TPModel
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.refengine.worker import Driver
from specsweep.testing.refengine import SMALL

#: Prompts of SMALL's vocabulary: a short one, a tiny one, one longer than two prefill chunks.
PROMPTS = [[5, 17, 99, 3, 250, 42, 7, 8, 9], [1, 2, 3], list(range(40, 75))]
#: The context length of the test models and engines.
CONTEXT = 256


def small_model(pool: bool, seed: int = 0, device: str = "cpu", comm=None, max_slots: int = 4) -> TPModel:
    """``SMALL`` on one rank (float32), its KV cache a pool of ``max_slots`` slots when ``pool``."""
    comm = comm or make_communicator(0, prepare_spec("shm" if device == "cpu" else "nccl", 1, device))
    m = TPModel(SMALL, 0, 1, comm, torch.device(device), torch.float32, seed, with_draft=True)
    if pool:
        m.enable_pool(max_slots, pool_capacity(CONTEXT))
    return m


CHUNK = 16  # the test engines' prefill chunk
PREFILL_TOKENS = 4 * CHUNK  # the largest prefill graph (batch x bucket): one chunk of up to 4 prompts fits


def small_engine(k: int | None, graphs: str, device: str = "cpu", max_running: int = 4, comm=None,
            prefill: bool = True) -> Engine:
    """graphs: 'off' (per-slot caches, eager), 'static' (pool + fixed-shape forwards run directly), 'cuda';
    prefill: prefill graphs too (as the server by default), else prefill runs eager."""
    model = small_model(pool=graphs != "off", device=device, comm=comm, max_slots=max_running)
    runner = None
    if graphs != "off":
        plan = make_plan(max_running, CONTEXT, k, prefill_tokens=PREFILL_TOKENS if prefill else 0)
        runner = GraphRunner(model, plan, logits=True, capture=graphs == "cuda")
    driver = Driver(model, [], runner)
    report = driver.capture_graphs()  # what the server does at start (None with graphs off)
    if runner is not None:
        assert report is not None and not report["failed"]
        assert len(report["captured"]) == len(runner.plan.keys()) == report["kept_per_rank"][0]
    return Engine(driver, eos_token_id=256, spec_steps=k, simulate_acc_len=None, seed=0,
                  max_running=max_running, context_length=CONTEXT, chunk_tokens=CHUNK)


def count_prefill_calls(engine: Engine) -> collections.Counter:
    """Count the engine's prefill commands by phase (the real Driver.call still runs them)."""
    counts: collections.Counter = collections.Counter()
    call = engine.driver.call

    def counting(cmd: tuple):
        if cmd[0] in ("target", "draft") and cmd[-1] in (trace.PREFILL, trace.DRAFT_PREFILL):
            counts[cmd[-1]] += 1
        return call(cmd)

    engine.driver.call = counting  # type: ignore[method-assign]
    return counts


def generate_all(engine: Engine, prompts: list[list[int]], max_new: int) -> list[dict]:
    """Every prompt to the end (``max_new`` tokens, EOS ignored), stepping the engine in this thread."""
    done: dict[int, dict] = {}
    for i, p in enumerate(prompts):
        engine.submit(Request(input_ids=p, max_new_tokens=max_new, ignore_eos=True,
                              sink=lambda s, i=i: done.__setitem__(i, s) if s["finished"] else None))
    while len(done) < len(prompts):
        engine._drain(block=False)
        engine._admit()
        if engine.running:
            engine._step()
    return [done[i] for i in range(len(prompts))]
