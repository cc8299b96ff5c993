"""Prefill through CUDA graphs vs eager prefill: the launch-to-launch spread of the prompt's time, on one GPU.

The engine replays its decode phase from CUDA graphs either way; this compares
the default (prompts padded to a captured bucket and replayed too) with
``--disable-prefill-cuda-graph`` (prefill eager: some 2,500 kernels queued by
Python for the 61-layer model). Launches of the two alternate (graph, eager,
graph, eager, ...), each serving the same prompts one at a time after a short
warmup. Per launch: the median of the requests' ``prefill_s`` (the engine's
timer around the target's and the draft's prompt forwards, which is what the
time to first token holds besides queueing and the HTTP path), the median
``e2e_latency``, and the median cycle time ``(draft_s + verify_s) /
forward_ct``; per mode: the median over launches and the range ``max / min -
1`` of the per-launch medians (the launch effect). Also whether both modes
gave the same greedy tokens.

    python3 benchmarks/bench_prefill_graphs.py --launches 3 --out /tmp/prefill-graphs.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_refengine import Server  # noqa: E402  (the one supervised benchmark server)

MODEL = REPO / "config" / "models" / "refengine-kimi-gpu"
MODES = {"graph": [], "eager": ["--disable-prefill-cuda-graph"]}


def per_launch(metas: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over one launch's requests: prefill_s (ms), e2e_latency (ms), cycle (ms), prefill graphs used."""
    return {
        "prefill_ms": statistics.median(m["timing"]["prefill_s"] for m in metas) * 1e3,
        "e2e_ms": statistics.median(m["e2e_latency"] for m in metas) * 1e3,
        "cycle_ms": statistics.median((m["timing"]["draft_s"] + m["timing"]["verify_s"]) / m["timing"]["forward_ct"]
                                      for m in metas) * 1e3,
        "prefill_graph_ct": sum(m["timing"].get("prefill_graph_ct", 0) for m in metas),
    }


def launch_range(values: list[float]) -> float:
    """max / min - 1 of per-launch medians (the range statistic the sweep's noise floor also uses)."""
    return max(values) / min(values) - 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launches", type=int, default=3, help="launches per mode")
    p.add_argument("--num-requests", type=int, default=12)
    p.add_argument("--warmup-requests", type=int, default=3)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=48)
    p.add_argument("--log-dir", default="/tmp/bench_prefill_graphs")
    p.add_argument("--out", default=None, help="write every figure here (JSON)")
    ns = p.parse_args()
    log_dir = Path(ns.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    args = ["--model-path", str(MODEL), "--device", "cuda", "--dtype", "bfloat16", "--random-seed", "0",
            "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"]
    env = {"SGLANG_SIMULATE_ACC_LEN": "2.0", "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
    prompts = [[97 + (i * 7 + j * 3) % 26 for j in range(ns.input_len)]
               for i in range(ns.warmup_requests + ns.num_requests)]
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    tokens: dict[str, list[list[int]]] = {}
    for launch in range(ns.launches):
        for mode, extra in MODES.items():
            t0 = time.perf_counter()
            server = Server(args + extra, env, log_dir / f"{mode}-{launch + 1}.log")
            try:
                ready_s = time.perf_counter() - t0
                outs = [server.generate(prompt, ns.output_len) for prompt in prompts]
            finally:
                server.close()
            metas = [o["meta_info"] for o in outs[ns.warmup_requests:]]
            tokens.setdefault(mode, [o["output_ids"] for o in outs])
            rows[mode].append({"launch": launch + 1, "ready_s": ready_s, **per_launch(metas)})
            print(f"{mode} launch {launch + 1}: {rows[mode][-1]}", flush=True)
    summary = {mode: {key: {"median": statistics.median(r[key] for r in rs),
                            "launch_range": launch_range([r[key] for r in rs])}
                      for key in ("prefill_ms", "e2e_ms", "cycle_ms")} for mode, rs in rows.items()}
    same = tokens["graph"] == tokens["eager"]
    print(f"\n== prefill graphs vs eager prefill: {ns.launches} launches each, "
          f"{ns.num_requests} requests per launch ==")
    print(f"{'mode':<7}{'prefill ms':>12}{'range':>8}{'e2e ms':>10}{'range':>8}{'cycle ms':>10}{'range':>8}")
    for mode, s in summary.items():
        print(f"{mode:<7}" + "".join(f"{s[k]['median']:>{w}.2f}{s[k]['launch_range'] * 100:>7.1f}%"
                                     for k, w in (("prefill_ms", 12), ("e2e_ms", 10), ("cycle_ms", 10))))
    print(f"same greedy tokens with and without prefill graphs: {same}")
    if ns.out:
        Path(ns.out).write_text(json.dumps({"args": vars(ns), "launches": rows, "summary": summary,
                                            "same_tokens": same}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
