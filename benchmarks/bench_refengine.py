"""Benchmark of the reference engine: all-reduce micro-benchmark, then the real server.

1. All-reduce latency per backend (median over many iterations, rank 0's clock;
   on CUDA each call is bracketed by CUDA events) at several sizes, and the
   speed-up of the second backend over the first at 28 KiB.
2. Single-stream generation through the HTTP server for no speculation and
   EAGLE3 (SGLANG_SIMULATE_ACC_LEN fixes the accept length) over each backend:
   tok/s, accept length, verify ms and the share of verify spent in all-reduce,
   plus the break-even accept length (cycle time x baseline tok/s).

CPU (default):  python benchmarks/bench_refengine.py
GPU (H200):     python benchmarks/bench_refengine.py --device cuda --backends nccl,symm_mem --tp 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specsweep.refengine.multirank import run_on_ranks  # noqa: E402
from specsweep.serve.allreduce_bench import measure_sizes  # noqa: E402
from specsweep.serve.server import LaunchError, free_port  # noqa: E402
from specsweep.serve.server import Server as SupervisedServer  # noqa: E402


def _allreduce_latency(rank: int, comm: Any, sizes_kib: list[int], iters: int, warmup: int, dtype_name: str) -> dict:
    """Seconds per all-reduce for each size, timed on this rank (the one loop: serve.allreduce_bench)."""
    import torch

    dtype = getattr(torch, dtype_name)
    elem = torch.empty((), dtype=dtype).element_size()
    numels = [kib * 1024 // elem for kib in sizes_kib]
    per_numel = measure_sizes(comm._all_reduce, comm.all_reduce, comm.world_size, comm.device, numels, dtype,
                              iters, warmup)
    return {kib: per_numel[n] for kib, n in zip(sizes_kib, numels)}


def bench_allreduce(backends: list[str], tp: int, device: str, sizes: list[int], iters: int, dtype: str,
                    force: bool = False) -> dict:
    """Median latency per backend and size; backends alternate over ``rounds`` so load drift hits all alike."""
    rounds = 3
    pooled: dict[str, dict[int, list[float]]] = {b: {k: [] for k in sizes} for b in backends}
    correct: dict[str, dict[int, bool]] = {b: dict.fromkeys(sizes, True) for b in backends}
    for _ in range(rounds):
        for b in backends:
            n = max(20, (iters if b != "gloo" else iters // 5) // rounds)
            per_rank = run_on_ranks(_allreduce_latency, b, tp, args=(sizes, n, max(10, n // 10), dtype),
                                    device=device, max_bytes=max(sizes) * 1024 + 4096, force_collectives=force)
            for kib in sizes:
                pooled[b][kib].extend(per_rank[0][kib]["times"])
                correct[b][kib] &= all(r[kib]["correct"] for r in per_rank)
    results = {b: {k: {"median_s": statistics.median(pooled[b][k]), "iters": len(pooled[b][k]),
                       "correct": correct[b][k]} for k in sizes} for b in backends}
    print(f"\n== all-reduce latency, {tp} ranks on {device}, dtype {dtype} "
          f"(median of {results[backends[0]][sizes[0]]['iters']}+ calls in {rounds} alternating rounds, rank 0) ==")
    header = f"{'size':>8} " + " ".join(f"{b + ' (us)':>16}" for b in backends)
    print(header)
    for kib in sizes:
        row = f"{str(kib) + ' KiB':>8} " + " ".join(
            f"{results[b][kib]['median_s'] * 1e6:>16.1f}" + ("" if results[b][kib]["correct"] else " WRONG")
            for b in backends)
        print(row)
    if len(backends) >= 2 and 28 in sizes:
        a, b = backends[0], backends[1]
        ratio = results[a][28]["median_s"] / results[b][28]["median_s"]
        print(f"speed-up of {b} over {a} at 28 KiB: {ratio:.1f}x")
    return results


class Server:
    """One engine server, supervised by the pipeline's own specsweep.server.Server."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = open(log, "wb")
        port = free_port("127.0.0.1")
        self.server = SupervisedServer(
            argv=[sys.executable, "-m", "specsweep.refengine", "--port", str(port), *args],
            env={**os.environ, **env}, host="127.0.0.1", port=port, ready_path="/ready", log_file=self.log,
        )
        self.base = self.server.base_url
        self.server.start()
        try:
            self.server.wait_ready(600)
        except LaunchError as exc:
            self.close()
            raise RuntimeError(f"{exc}; see {log}") from exc

    def generate(self, input_ids: list[int], max_new: int) -> dict[str, Any]:
        body = {"input_ids": input_ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True,
                                                            "temperature": 0.0}}
        req = urllib.request.Request(self.base + "/generate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.server.stop()
        self.log.close()


def bench_servers(runs: list[tuple[str, list[str], dict[str, str]]], n_req: int, input_len: int, output_len: int,
                  warmup: int, log_dir: Path) -> list[dict[str, Any]]:
    """All servers up at once (idle ones block, they use no CPU), requests round-robin over them.

    Interleaving spreads the drift of a shared machine's load evenly over the
    configurations, so rows of one run compare fairly.
    """
    servers: list[tuple[str, Server]] = []
    try:
        for name, args, env in runs:
            servers.append((name, Server(args, env, log_dir / f"{name}.log")))
        prompts = [[(97 + (i * 7 + j) % 26) for j in range(input_len)] for i in range(warmup + n_req)]
        for p in prompts[:warmup]:
            for _, server in servers:
                server.generate(p, output_len)
        metas: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in servers}
        for p in prompts[warmup:]:
            for name, server in servers:
                metas[name].append(server.generate(p, output_len)["meta_info"])
    finally:
        for _, server in servers:
            server.close()
    return [summarize(name, m) for name, m in metas.items()]


def _sum(values: list[Any]) -> float | None:
    """Sum over requests; None when any request has None (the engine did not time it: CUDA graphs
    without comm timing report ``verify_comm_s: null``, never a partial sum, and neither is this)."""
    return None if any(v is None for v in values) else sum(values)


def summarize(name: str, metas: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-configuration figures from the requests' meta_info (sums over requests, then ratios).

    Figures from an untimed all-reduce (``verify_comm_s`` null: refengine README, "Under CUDA
    graphs") are None, with the engine's ``timing_absent`` reason kept, never 0.
    """
    tokens = sum(m["completion_tokens"] for m in metas)
    keys = [k for k, v in metas[0]["timing"].items() if v is None or isinstance(v, (int, float))]
    t = {k: _sum([m["timing"].get(k) for m in metas]) for k in keys}
    verify_ct = sum(m.get("spec_verify_ct", m["timing"]["forward_ct"]) for m in metas)
    comm = t.get("verify_comm_s")
    return {
        "name": name,
        "tok_s": tokens / sum(m["e2e_latency"] for m in metas),
        "accept_length": tokens / verify_ct if "spec_verify_ct" in metas[0] else None,
        "verify_ms": t["verify_s"] / t["forward_ct"] * 1e3,
        "draft_ms": t["draft_s"] / t["forward_ct"] * 1e3,
        "allreduce_per_verify": t["allreduce_ct"] / t["forward_ct"],
        "comm_share": comm / t["verify_s"] if comm is not None else None,
        "ar_us": comm / max(t["allreduce_ct"], 1) * 1e6 if comm is not None else None,
        "cycle_ms": (t["verify_s"] + t["draft_s"]) / t["forward_ct"] * 1e3,
        "timing_absent": sorted({f"{k}: {why}" for m in metas for k, why in (m.get("timing_absent") or {}).items()})
        or None,
    }


def print_server_table(rows: list[dict[str, Any]], label: str) -> None:
    print(f"\n== single stream through the HTTP server ({label}) ==")
    print(f"{'configuration':<16}{'tok/s':>8}{'accept':>8}{'draft ms':>10}{'verify ms':>10}{'AR/verify':>10}"
          f"{'AR us':>8}{'AR share':>10}{'cycle ms':>10}")
    for r in rows:
        acc = f"{r['accept_length']:.2f}" if r["accept_length"] is not None else "-"
        ar_us = f"{r['ar_us']:.1f}" if r["ar_us"] is not None else "-"
        share = f"{r['comm_share'] * 100:.1f}%" if r["comm_share"] is not None else "-"
        print(f"{r['name']:<16}{r['tok_s']:>8.1f}{acc:>8}{r['draft_ms']:>10.2f}{r['verify_ms']:>10.2f}"
              f"{r['allreduce_per_verify']:>10.0f}{ar_us:>8}{share:>10}"
              f"{r['cycle_ms']:>10.2f}")
        if r.get("timing_absent"):
            print(f"{'':<16}all-reduce not timed: {'; '.join(r['timing_absent'])}")
    base = next((r for r in rows if r["accept_length"] is None), None)
    if base:
        print(f"break-even accept length = cycle time x baseline tok/s (baseline {base['name']}, "
              f"{base['tok_s']:.1f} tok/s):")
        for r in rows:
            if r["accept_length"] is not None:
                be = r["cycle_ms"] / 1e3 * base["tok_s"]
                verdict = "pays" if r["accept_length"] > be else "does not pay"
                print(f"  {r['name']:<16} cycle {r['cycle_ms']:.2f} ms -> break-even {be:.2f}, "
                      f"accept {r['accept_length']:.2f}: speculation {verdict}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--backends", default=None, help="comma list (default: gloo,shm on cpu; nccl,symm_mem on cuda)")
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--sizes-kib", default="4,28,112,448")
    p.add_argument("--iters", type=int, default=2000, help="all-reduce iterations per size (gloo gets a fifth)")
    p.add_argument("--dtype", default=None, help="all-reduce dtype (default float32 on cpu, bfloat16 on cuda)")
    p.add_argument("--model-path", default=str(REPO / "specsweep" / "refengine" / "configs" / "tiny"))
    p.add_argument("--num-requests", type=int, default=6)
    p.add_argument("--warmup-requests", type=int, default=2)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--acc-len", default="2.5", help="SGLANG_SIMULATE_ACC_LEN for the EAGLE3 runs")
    p.add_argument("--num-steps", type=int, default=3)
    p.add_argument("--skip-allreduce", action="store_true")
    p.add_argument("--force-collectives", action="store_true",
                   help="run the real collective even with --tp 1 (checks a backend's code path on one GPU)")
    p.add_argument("--skip-server", action="store_true")
    p.add_argument("--log-dir", default="/tmp/bench_refengine")
    p.add_argument("--json", default=None, help="also write the raw results (all-reduce medians, server rows) here")
    a = p.parse_args()
    backends = (a.backends or ("gloo,shm" if a.device == "cpu" else "nccl,symm_mem")).split(",")
    dtype = a.dtype or ("float32" if a.device == "cpu" else "bfloat16")
    sizes = [int(s) for s in a.sizes_kib.split(",")]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_refengine: device={a.device} tp={a.tp} backends={backends} cpus={os.cpu_count()} "
          f"load average at start: {load} (the box is shared: compare rows of one run, not across runs)")
    record: dict[str, Any] = {"args": vars(a), "load_average_at_start": os.getloadavg(),
                              "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_"))}}
    if not a.skip_allreduce:
        record["allreduce"] = bench_allreduce(backends, a.tp, a.device, sizes, a.iters, dtype, a.force_collectives)
    if not a.skip_server:
        log_dir = Path(a.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        common = ["--model-path", a.model_path, "--tp-size", str(a.tp), "--device", a.device, "--random-seed", "0"]
        env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")} if a.device == "cpu" else {}
        spec = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(a.num_steps),
                "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(a.num_steps + 1)]
        runs = [(f"nospec-{b}", common + ["--all-reduce-backend", b], env) for b in backends]
        runs += [(f"eagle3-{b}", common + spec + ["--all-reduce-backend", b],
                  {**env, "SGLANG_SIMULATE_ACC_LEN": a.acc_len}) for b in backends]
        rows = bench_servers(runs, a.num_requests, a.input_len, a.output_len, a.warmup_requests, log_dir)
        # Baseline first: the fastest no-speculation run.
        nospec = sorted((r for r in rows if r["accept_length"] is None), key=lambda r: -r["tok_s"])
        ordered = nospec + [r for r in rows if r["accept_length"] is not None]
        print_server_table(ordered, f"{Path(a.model_path).name}, {a.input_len} in / {a.output_len} out, "
                           f"{a.num_requests} requests each, interleaved, SGLANG_SIMULATE_ACC_LEN={a.acc_len}")
        record["servers"] = ordered
    if a.json:
        Path(a.json).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
