"""Does profiling change the measured repeats? Interleaved server jobs with profiling on and off.

Runs the real server job (``specsweep.serve.job.run_config``) of one
configuration several times in one process, alternating the plan without
``profile`` and the same plan with ``profile.enabled`` (order flipped every
pair, so drift of this shared machine's load hits both alike). Prints, per
job, the measured repeats' median per-request tok/s and cycle time, and the
profiling stages' seconds; then the comparison of all "on" requests against
all "off" ones with the report's own verdict on the decode rate (each job
a launch, the launch variance pooled over both sides: ``analysis.stats.compare``).

The profiling stages run before launch (micro-benchmark) and after the
measured repeats (trace), so the claim under test is that neither leaks into
the repeats: "no significant difference" is the expected verdict.

    python benchmarks/bench_profile_overhead.py [--config eagle3-shm] [--pairs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specsweep.analysis.compute import compute_metrics  # noqa: E402
from specsweep.analysis.stats import VERDICT_METHOD, Sample, compare, pooled_noise  # noqa: E402
from specsweep.files import read_json, read_jsonl  # noqa: E402
from specsweep.plan.config import load_config  # noqa: E402
from specsweep.plan.resolve import resolve_plans  # noqa: E402
from specsweep.serve.job import JobPaths, run_config  # noqa: E402


def job(plan: dict, out: Path) -> dict:
    """One server job into ``out``; its measured metrics and the profiling stages' cost."""
    out.mkdir(parents=True)
    paths = JobPaths(out / "launch.json", out / "server.log", out / "warmup.jsonl", out / "requests.jsonl",
                     out / "outcome.json", profile=out / "profile.json", allreduce_bench=out / "allreduce_bench.json")
    t0 = time.monotonic()
    with (out / "job.log").open("w") as log:
        outcome = run_config(plan, paths, None, log)
    wall = time.monotonic() - t0
    if outcome["status"] != "ok":
        raise SystemExit(f"{out.name}: {outcome['stage']} {outcome['reason']}: {outcome['detail']}")
    m = compute_metrics(read_jsonl(paths.requests), seed=0)
    prof, bench = read_json(paths.profile), read_json(paths.allreduce_bench)
    return {
        "samples": m["samples"]["output_tok_s"]["values"],
        "decode": m["samples"]["decode_tok_s"]["values"],
        "repeat_medians": m["output_tok_s"]["per_repeat_median"],
        "tok_s": m["output_tok_s"]["p50"],
        "cycle_ms": (m.get("cycle_time_ms") or {}).get("value"),
        "profile_s": prof.get("seconds"),
        "bench_s": bench.get("seconds"),
        "profile_status": prof.get("status"),
        "wall_s": wall,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configfile", default=str(REPO / "config.yaml"))
    p.add_argument("--config", default="eagle3-shm")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--num-prompts", type=int, default=None, help="override the workload's num_prompts")
    p.add_argument("--repeats", type=int, default=None, help="override the workload's repeats")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    os.chdir(REPO)  # model paths in the plans are relative to the workflow root
    base = resolve_plans(load_config(Path(a.configfile)))[a.config]
    base.pop("profile", None)
    for key, value in (("num_prompts", a.num_prompts), ("repeats", a.repeats)):
        if value is not None:
            base["workload"][key] = value
    on = dict(base, profile={"enabled": True, "requests": 2, "num_steps": None, "activities": ["CPU", "GPU"],
                             "trace_timeout_s": 600, "allreduce_bench": True, "allreduce_iters": 200,
                             "allreduce_timeout_s": 600})
    print(f"bench_profile_overhead: {a.config} from {a.configfile}, {a.pairs} pairs, workload "
          f"{base['workload']['num_prompts']} prompts x {base['workload']['repeats']} repeats, "
          f"load average at start {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="profile-overhead-") as tmp:
        for i in range(a.pairs):
            order = (("off", base), ("on", on)) if i % 2 == 0 else (("on", on), ("off", base))
            for label, plan in order:
                r = job(plan, Path(tmp) / f"{i}-{label}")
                r["launch"] = f"{i}-{label}"
                runs.append((label, r))
                cyc = f"{r['cycle_ms']:.2f}" if r["cycle_ms"] is not None else "n/a"
                stages = (f"bench {r['bench_s']:.1f} s, trace stage {r['profile_s']:.1f} s ({r['profile_status']})"
                          if label == "on" else "no profiling stages")
                print(f"  pair {i} {label:>3}: median {r['tok_s']:.2f} tok/s, repeat medians "
                      f"{[round(x, 2) for x in r['repeat_medians']]}, cycle {cyc} ms, job {r['wall_s']:.0f} s, "
                      f"{stages}", flush=True)
    pooled = {k: [s for label, r in runs if label == k for s in r["samples"]] for k in ("off", "on")}
    sides = {k: Sample([d for label, r in runs if label == k for d in r["decode"]],
                       [r["launch"] for label, r in runs if label == k for _ in r["decode"]]) for k in ("off", "on")}
    v = compare(sides["on"], sides["off"], pooled_noise(list(sides.values())))
    print(f"\nmeasured repeats, profiling on vs off ({len(pooled['on'])} vs {len(pooled['off'])} requests): "
          f"median {statistics.median(pooled['on']):.2f} vs {statistics.median(pooled['off']):.2f} tok/s, "
          f"decode ratio {v.get('ratio', float('nan')):.3f} CI {v.get('ratio_ci')}, verdict: {v['verdict']}")
    print(f"  (verdict method: {VERDICT_METHOD})")
    on_runs = [r for label, r in runs if label == "on"]
    print(f"profiling stages per configuration: trace stage {statistics.mean(r['profile_s'] for r in on_runs):.1f} s "
          f"(runs: {[round(r['profile_s'], 1) for r in on_runs]}), micro-benchmark "
          f"{statistics.mean(r['bench_s'] for r in on_runs):.1f} s (runs: {[round(r['bench_s'], 1) for r in on_runs]})")
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": runs, "comparison": v}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
