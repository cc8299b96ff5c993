"""Is the CPU's launch-to-launch noise the launch or the machine? Servers of one configuration, measured in turn.

N reference-engine servers of the same configuration are up at once (an idle
server blocks and uses no CPU); requests go round-robin over them, one at a
time, R rounds. Per request the engine's own cycle time
(``(draft_s + verify_s) / forward_ct``, from ``meta_info.timing``) is kept.
Two-way layout, rounds x servers, one request a cell, on the log scale:

* **between rounds** (time): every server slows down and speeds up together;
  the machine's speed changed (other tenants of the host, its clock), and
  no placement or launch procedure inside it can remove that;
* **between servers** (launch): a server stays faster or slower than the
  others through every round; that is what a launch effect is (placement,
  memory layout), and what replicated launches average out.

The table gives each server's cycle time per round and the two standard
deviations (main effects of a two-way ANOVA without replication: the SD of
the round means, the SD of the server means, and the residual).

This is a diagnostic, not a measurement of a configuration: the servers run
beside each other, which the workflow never reports as ``ok``.

    python benchmarks/bench_cpu_drift.py                  # 4 servers, TP=1, EAGLE3, 10 rounds
    python benchmarks/bench_cpu_drift.py --tp 2 --servers 3
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cpu_affinity import cycle_ms  # noqa: E402  (the one cycle-time formula of these benchmarks)
from bench_refengine import Server  # noqa: E402  (the one supervised benchmark server)


def two_way(table: list[list[float]]) -> dict[str, float]:
    """SDs (log scale, so ~relative) of round means, server means and the residual of ``table[round][server]``."""
    logs = [[math.log(x) for x in row] for row in table]
    rounds, servers = len(logs), len(logs[0])
    grand = statistics.fmean(v for row in logs for v in row)
    r_means = [statistics.fmean(row) for row in logs]
    s_means = [statistics.fmean(logs[r][s] for r in range(rounds)) for s in range(servers)]
    resid = [logs[r][s] - r_means[r] - s_means[s] + grand for r in range(rounds) for s in range(servers)]
    df = (rounds - 1) * (servers - 1)
    return {"sd_rounds": statistics.stdev(r_means), "sd_servers": statistics.stdev(s_means),
            "sd_residual": math.sqrt(sum(e * e for e in resid) / df) if df else float("nan")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--backend", default="shm", help="--all-reduce-backend of the servers (TP > 1)")
    p.add_argument("--model-path", default=str(REPO / "specsweep" / "refengine" / "configs" / "tiny"))
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--log-dir", default="/tmp/bench_cpu_drift")
    p.add_argument("--json", default=None, help="also write the table here")
    ns = p.parse_args()

    log_dir = Path(ns.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    args = ["--model-path", ns.model_path, "--tp-size", str(ns.tp), "--all-reduce-backend", ns.backend,
            "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"]
    env = {"OMP_NUM_THREADS": "1", "SGLANG_SIMULATE_ACC_LEN": "2.5"}
    prompt = [97 + j % 26 for j in range(32)]
    servers: list[Server] = []
    table: list[list[float]] = []
    try:
        for i in range(ns.servers):
            servers.append(Server(args, env, log_dir / f"server-{i}.log"))
        for s in servers:  # warmup
            for _ in range(3):
                s.generate(prompt, ns.output_len)
        for _ in range(ns.rounds):
            table.append([cycle_ms(s.generate(prompt, ns.output_len)["meta_info"]) for s in servers])
    finally:
        for s in servers:
            s.close()

    print(f"\n== engine cycle time (ms) per round, {ns.servers} servers of one configuration (TP={ns.tp}, EAGLE3), "
          f"one request each in turn ==")
    print("round " + "".join(f"{'server ' + str(i):>10}" for i in range(ns.servers)))
    for r, row in enumerate(table):
        print(f"{r:>5} " + "".join(f"{x:>10.2f}" for x in row))
    sds = two_way(table)
    print(f"SD between rounds (the machine over time): {sds['sd_rounds'] * 100:.1f} %; between servers (the launch): "
          f"{sds['sd_servers'] * 100:.1f} %; residual: {sds['sd_residual'] * 100:.1f} %")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"args": vars(ns), "cycle_ms": table, "sd": sds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
