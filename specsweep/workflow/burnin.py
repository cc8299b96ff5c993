"""The burn-in: unmeasured launches before the first measured one, until the host is steady.

Whatever ran on the host before the sweep (a test suite, a build, another
tenant) can leave it slow for minutes: on an H100 straight after other GPU
work the first two launches of a sweep ran 7 % and 14 % slow and took 25-32 s
to be ready instead of ~18 s, while the same design after a throwaway run of
the baseline's launches was within 2.7 % between rounds. So before round 1,
the burn-in launches the baseline's server (one unit = one launch, the plan's
warmup, ``requests`` measured requests of its workload, teardown: the same
job code as a measured launch) and stops by a rule, not after a fixed time:

* steady: a unit's median decode rate is within ``tolerance`` of the unit
  before it, after at least ``min_units`` units;
* or ``max_units`` units ran: the sweep goes on, and the report says the
  host never settled.

Each unit's files stay under results/rounds/burn-in/unit-<k>/ (never read by
a summary); the record (results/rounds/burn-in.json) has every unit's
decode rate, time to ready and wall time, and whether it settled. It enters
no verdict.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from specsweep.analysis.formulas import decode_tok_s
from specsweep.contracts.plan import Plan
from specsweep.files import read_json, read_jsonl, write_json_atomic
from specsweep.serve.job import run_config
from specsweep.serve.jobspec import JobHost, JobPaths

BURN_IN_DIR = "results/rounds/burn-in"


def unit_plan(plan: Plan, requests: int) -> Plan:
    """The plan of one burn-in unit: the configuration's own server and warmup, ``requests`` measured
    requests of its (first point's) workload in one repeat."""
    points = plan.points or ()
    workload = dict(points[0].workload if points else plan.workload)
    prompts = points[0].prompts if points else plan.prompts
    workload.update(num_prompts=min(int(workload.get("num_prompts", requests)), requests), repeats=1)
    return plan.replace(workload=workload, prompts=prompts, points=None)


def unit_rate(requests_path: Path) -> float | None:
    """A unit's median per-request decode rate (tok/s) over its ok requests; None without one."""
    rates = []
    for rec in read_jsonl(requests_path):
        value = decode_tok_s(rec)
        if isinstance(value, (int, float)):
            rates.append(float(value))
    return statistics.median(rates) if rates else None


def settled(rates: list[float | None], tolerance: float, min_units: int) -> bool:
    """The stop rule: at least ``min_units`` units, and the last unit's rate within ``tolerance`` of the
    one before it (both measured)."""
    if len(rates) < max(2, min_units) or rates[-1] is None or rates[-2] is None:
        return False
    return abs(rates[-1] / rates[-2] - 1) <= tolerance


def _say(host: JobHost | None, text: str) -> None:
    """A line of the burn-in on the terminal (the units' own console is off: a line as it starts, one at the
    end)."""
    stream = host.notice if host is not None else None
    if stream is not None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except OSError:
            pass  # a terminal that went away ends nothing: the log has the line


def burn_in(plan_path: str, settings: Mapping[str, Any], out_path: str, log: TextIO,
            image_manifest: dict | None = None, registry: Mapping[str, Any] | None = None,
            host: JobHost | None = None, unit_dir: str = BURN_IN_DIR) -> dict[str, Any]:
    """burn_in_host: units until steady or ``max_units`` (module docstring); writes and returns the record."""
    plan = Plan.load(plan_path)
    tolerance, min_units, max_units = float(settings["tolerance"]), int(settings["min_units"]), \
        int(settings["max_units"])
    units: list[dict[str, Any]] = []
    rates: list[float | None] = []
    t0 = time.time()
    _say(host, f"specsweep {plan.name} burn-in: up to {max_units} unmeasured launches, until its decode rate is "
               f"steady (within {tolerance:.0%} of the launch before)")
    for k in range(1, max_units + 1):
        d = Path(unit_dir) / f"unit-{k}"
        d.mkdir(parents=True, exist_ok=True)
        paths = JobPaths(d / "launch.json", d / "server.log", d / "warmup.jsonl", d / "requests.jsonl",
                         d / "outcome.json", profile=d / "profile.json", allreduce_bench=d / "allreduce_bench.json")
        outcome = run_config(unit_plan(plan, int(settings["requests"])), paths, image_manifest, log, registry,
                             host=host, launch_id=f"burn-in-{k}", console=False)  # its start and end, below
        record = read_json(paths.launch) if paths.launch.is_file() else {}
        rate = unit_rate(paths.requests) if paths.requests.is_file() else None
        rates.append(rate)
        start, end = outcome.get("started_at"), outcome.get("ended_at")
        units.append({"unit": k, "status": outcome.get("status"), "decode_tok_s": rate,
                      "ready_s": record.get("ready_s"), "started_at": start,
                      "wall_s": end - start if start is not None and end is not None else None})
        print(f"burn-in unit {k}: {outcome.get('status')}, decode {rate if rate is None else round(rate, 1)} tok/s",
              file=log)
        if settled(rates, tolerance, min_units):
            break
    shown = ", ".join("n/a" if r is None else f"{r:.1f}" for r in rates)
    _say(host, f"specsweep {plan.name} burn-in: {'steady' if settled(rates, tolerance, min_units) else 'not steady'} "
               f"after {len(rates)} unit(s), decode {shown} tok/s")
    out = {"format_version": 1, "config": plan.name, "units": units, "steady": settled(rates, tolerance, min_units),
           "tolerance": tolerance, "min_units": min_units, "max_units": max_units,
           "requests": int(settings["requests"]), "started_at": t0, "wall_s": time.time() - t0,
           "for": settings.get("for")}  # read back while nothing is to be measured (workflow.stored.burn_in_for)
    write_json_atomic(out_path, out)
    return out
