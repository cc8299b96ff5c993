"""Step-time spread of the reference engine on the CPU with and without pinning its ranks to cores.

Two servers of the same configuration are up at once, one with
``--cpu-affinity auto`` (each rank on cores of its own, the rest left to the
client: this process) and one with ``--cpu-affinity none``; requests
alternate between them (an idle server blocks and uses no CPU), so the drift
of a shared machine's load falls on both alike. Per request the engine's
cycle time (``(draft_s + verify_s) / forward_ct``) is taken from its
``meta_info``; the table gives, per mode, the median, the 10th and 90th
percentiles, the spread ``(p90 - p10) / median`` and ``max / min``. Whether
the "auto" server really pinned (the host needs ranks x cores per rank + 1
cores) is read from its ``/server_info`` ``cpu_placement`` and printed.

``--busy N`` starts N busy-looping processes for the measurement (a
competing load; they are ended by pid afterwards).

    python benchmarks/bench_cpu_affinity.py                   # TP=1, EAGLE3, tiny model
    python benchmarks/bench_cpu_affinity.py --tp 2 --busy 2   # on a host with 3+ cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_refengine import Server  # noqa: E402  (the one supervised benchmark server)

MODES = ("auto", "none")


def cycle_ms(meta: dict[str, Any]) -> float:
    """Engine cycle time of one request, ms: ``(draft_s + verify_s) / forward_ct`` (a decode step without
    speculation)."""
    t = meta["timing"]
    return (t["draft_s"] + t["verify_s"]) / t["forward_ct"] * 1e3


def spread(values: list[float]) -> dict[str, float]:
    """median, p10, p90 (``statistics.quantiles``, exclusive method, n=10), (p90 - p10) / median, max / min."""
    deciles = statistics.quantiles(values, n=10)
    med = statistics.median(values)
    return {"n": len(values), "median": med, "p10": deciles[0], "p90": deciles[-1],
            "p90_p10_rel": (deciles[-1] - deciles[0]) / med, "max_min": max(values) / min(values)}


def _placement(server: Server) -> dict[str, Any]:
    with urllib.request.urlopen(server.base + "/server_info", timeout=30) as r:
        return json.loads(r.read())["cpu_placement"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--model-path", default=str(REPO / "specsweep" / "refengine" / "configs" / "tiny"))
    p.add_argument("--speculative", action=argparse.BooleanOptionalAction, default=True,
                   help="EAGLE3 with 3 steps and SGLANG_SIMULATE_ACC_LEN=2.0 (default), or no speculation")
    p.add_argument("--num-requests", type=int, default=30, help="measured requests per mode")
    p.add_argument("--warmup-requests", type=int, default=2)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=48)
    p.add_argument("--omp-threads", type=int, default=1, help="OMP_NUM_THREADS of the servers (0: unset)")
    p.add_argument("--busy", type=int, default=0, help="busy-looping processes competing during the measurement")
    p.add_argument("--log-dir", default="/tmp/bench_cpu_affinity")
    p.add_argument("--json", default=None, help="also write the per-request cycle times and the table here")
    ns = p.parse_args()

    log_dir = Path(ns.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    args = ["--model-path", ns.model_path, "--tp-size", str(ns.tp)]
    env = {"OMP_NUM_THREADS": str(ns.omp_threads)} if ns.omp_threads else {}
    if ns.speculative:
        args += ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4"]
        env["SGLANG_SIMULATE_ACC_LEN"] = "2.0"
    servers: dict[str, Server] = {}
    busy: list[subprocess.Popen] = []
    cycles: dict[str, list[float]] = {m: [] for m in MODES}
    try:
        for mode in MODES:
            servers[mode] = Server(args + ["--cpu-affinity", mode], env, log_dir / f"{mode}.log")
        placements = {m: _placement(s) for m, s in servers.items()}
        prompts = [[97 + (i * 7 + j) % 26 for j in range(ns.input_len)]
                   for i in range(ns.warmup_requests + ns.num_requests)]
        for prompt in prompts[:ns.warmup_requests]:
            for s in servers.values():
                s.generate(prompt, ns.output_len)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(ns.busy)]
        for i, prompt in enumerate(prompts[ns.warmup_requests:]):
            order = MODES if i % 2 == 0 else MODES[::-1]  # neither mode always goes first
            for mode in order:
                cycles[mode].append(cycle_ms(servers[mode].generate(prompt, ns.output_len)["meta_info"]))
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
        for s in servers.values():
            s.close()

    rows = {m: spread(v) for m, v in cycles.items()}
    print(f"\n== cycle time per request, TP={ns.tp}, {'EAGLE3' if ns.speculative else 'no speculation'}, "
          f"{ns.num_requests} requests per mode, alternating, {ns.busy} busy process(es) ==")
    for mode in MODES:
        pl = placements[mode]
        where = "; ".join(f"rank {r} on {c}" for r, c in enumerate(pl["rank_cores"]))
        print(f"--cpu-affinity {mode}: {'pinned' if pl['pinned'] else 'not pinned'} ({pl['reason']}); {where}")
    print(f"{'mode':<6}{'median ms':>11}{'p10':>9}{'p90':>9}{'(p90-p10)/med':>15}{'max/min':>9}")
    for mode, r in rows.items():
        print(f"{mode:<6}{r['median']:>11.2f}{r['p10']:>9.2f}{r['p90']:>9.2f}{r['p90_p10_rel'] * 100:>14.1f}%"
              f"{r['max_min']:>9.3f}")
    if not placements["auto"]["pinned"]:
        print("the auto server did not pin on this host: both rows measure the same placement")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"args": vars(ns), "placements": placements, "cycles_ms": cycles,
                                             "spread": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
