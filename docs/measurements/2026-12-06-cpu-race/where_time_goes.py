"""Where a run's time went, launch by launch: read from a results/ directory after the run.

    python3 where_time_goes.py results [wall_s of the whole run]

Per launch (results/<config>/plans/<plan>/launch-<id>/): the job's wall time (logs/benchmark_server.tsv),
its wait for the host lock (launch.json host_lock.waited_s), the server's start to ready (ready_s), the
warmup and the measured requests (first send to last chunk, from warmup.jsonl and requests.jsonl), and the
rest of the job (its own start, the teardown). The burn-in's units from results/rounds/burn-in.json.
"""

import json
import statistics
import sys
from pathlib import Path


def span_s(path: Path) -> float:
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not recs:
        return 0.0
    first = min(r["send_ns"] for r in recs)
    last = max((r.get("chunk_ns") or [r["send_ns"]])[-1] for r in recs)
    return (last - first) / 1e9


def main(results: Path, run_wall: float | None) -> None:
    rows = []
    for launch in sorted(results.glob("*/plans/*/launch-*")):
        tsv = launch / "logs" / "benchmark_server.tsv"
        if not tsv.exists() or not (launch / "launch.json").exists():
            continue
        wall = float(tsv.read_text().splitlines()[1].split("\t")[0])
        rec = json.loads((launch / "launch.json").read_text())
        wait = float((rec.get("host_lock") or {}).get("waited_s") or 0.0)
        ready = float(rec.get("ready_s") or 0.0)
        warm = span_s(launch / "warmup.jsonl") if (launch / "warmup.jsonl").exists() else 0.0
        meas = span_s(launch / "requests.jsonl") if (launch / "requests.jsonl").exists() else 0.0
        rows.append((wall, wait, ready, warm, meas, wall - wait - ready - warm - meas))
    names = ["job wall", "host-lock wait", "start to ready", "warmup", "measured requests", "rest (job start, teardown)"]
    print(f"{len(rows)} measured launches")
    for k, name in enumerate(names):
        col = [r[k] for r in rows]
        print(f"  {name:28s} sum {sum(col):7.1f} s  median {statistics.median(col):5.2f} s")
    burn = results / "rounds" / "burn-in.json"
    if burn.exists():
        units = json.loads(burn.read_text()).get("units") or []
        print(f"burn-in: {len(units)} units, {sum(u['wall_s'] for u in units):.1f} s")
    if run_wall:
        print(f"run wall {run_wall:.0f} s; launches' job wall {sum(r[0] for r in rows):.0f} s; the rest (Snakemake's "
              f"own jobs: plans, preflights, summaries, judgements, report; its scheduling) "
              f"{run_wall - sum(r[0] for r in rows) - sum(u['wall_s'] for u in units):.0f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
