"""CPU check: bf16 token agreement and error of the fixed-shape (graph) path against the eager path.

The 61-layer refengine-kimi-gpu model on the CPU, 4 requests of 64 prompt tokens each, prefilled eager;
then verifies of 4 tokens per request (batch 4), computed eager (per-segment attention), eager one
request at a time, and through the fixed-shape forwards that the CUDA graphs hold (run directly,
nothing captured). Prints, for bf16 and float32, how many argmax tokens agree over 4 verifies, and
for one verify the relative error ||x - ref|| / ||ref|| of the bf16 logits against the float32 model.

Run from the repository root (about 5 minutes on 2 cores):
    PYTHONPATH=$PWD python3 docs/measurements/2026-12-01-h200-tp1-graphs/bf16_cpu_check.py
"""

from __future__ import annotations

import torch

from specsweep.refengine.comm import make_communicator, prepare_spec
from specsweep.refengine.config import load_config
from specsweep.refengine.cudagraph import GraphPlan, GraphRunner, pool_capacity
from specsweep.refengine.model import Segment, TPModel

CFG = load_config("config/models/refengine-kimi-gpu")
SEGS = [Segment(s, 63, 4) for s in range(4)]


def build(dtype: torch.dtype) -> tuple[TPModel, GraphRunner]:
    m = TPModel(CFG, 0, 1, make_communicator(0, prepare_spec("shm", 1, "cpu")), torch.device("cpu"), dtype, 0, True)
    m.enable_pool(4, pool_capacity(256))
    runner = GraphRunner(m, GraphPlan((4,), (128,), (("target", 4),)), logits=True, capture=False)
    runner.capture()
    gen = torch.Generator().manual_seed(0)
    for s in range(4):
        prompt = torch.randint(0, 256, (64,), generator=gen).tolist()
        m.alloc(s, 200)
        m.forward_target(prompt, [Segment(s, 0, 64)], "last")
    return m, runner


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def main() -> None:
    torch.set_num_threads(2)
    models = {dtype: build(dtype) for dtype in (torch.float32, torch.bfloat16)}
    gen = torch.Generator().manual_seed(5)
    for dtype, (m, runner) in models.items():
        total = static_ok = single_ok = 0
        for _ in range(4):
            ids = torch.randint(0, CFG.vocab_size, (16,), generator=gen).tolist()
            batched = m.forward_target(ids, SEGS, "all").argmax(-1)
            single = torch.cat([m.forward_target(ids[4 * s:4 * s + 4], [SEGS[s]], "all") for s in range(4)]).argmax(-1)
            static = runner.run(runner.lookup("target", SEGS), ids, SEGS, "all").argmax(-1)
            total += 16
            static_ok += int((static == batched).sum())
            single_ok += int((single == batched).sum())
        print(f"{dtype}: fixed-shape vs eager (batch 4) {static_ok}/{total} tokens equal; "
              f"eager one request at a time vs eager batch 4 {single_ok}/{total}", flush=True)
    ids = torch.randint(0, CFG.vocab_size, (16,), generator=gen).tolist()
    ref = models[torch.float32][0].forward_target(ids, SEGS, "all")
    m, runner = models[torch.bfloat16]
    eager = m.forward_target(ids, SEGS, "all")
    static = runner.run(runner.lookup("target", SEGS), ids, SEGS, "all")
    print(f"bf16 vs float32 relative error: eager {rel(eager, ref):.4f}, fixed-shape {rel(static, ref):.4f}; "
          f"fixed-shape vs eager {rel(static, eager):.4f}")
    print(f"argmax equal to float32's: eager {int((eager.argmax(-1) == ref.argmax(-1)).sum())}/16, "
          f"fixed-shape {int((static.argmax(-1) == ref.argmax(-1)).sum())}/16")
    top2 = ref.topk(2, -1).values
    print(f"float32 logits: std {float(ref.std()):.3f}, median top-1 minus top-2 gap {float((top2[:, 0] - top2[:, 1]).median()):.3f}")


if __name__ == "__main__":
    main()
