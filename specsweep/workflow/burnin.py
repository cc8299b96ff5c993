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
  before it, and its time to ready within ``ready_tolerance`` of the unit
  before (plus one readiness poll, ``serve.server.READY_POLL_S``, the step a
  time to ready is measured in), after at least ``min_units`` units. The
  decode rate alone is not enough: on an H100 the rule stopped after two
  units at a steady rate while the time to ready was still falling (25.1,
  then 21.3 s; later launches about 18 s), and round 1 then ran slow
  (docs/measurements/2026-12-06-h100-tp1-rounds);
* or ``max_units`` units ran: the sweep goes on, and the report says the
  host never settled, and which of the two kept moving.

Each unit's files stay under results/rounds/burn-in/unit-<k>/ (never read by
a summary); the record (results/rounds/burn-in.json) has every unit's
decode rate, time to ready and wall time, and whether it settled. It enters
no verdict.

Format history of the record (``BURN_IN_FORMAT_VERSION``):
  1  config, units (unit, status, decode_tok_s, ready_s, started_at, wall_s), steady, tolerance, min_units,
     max_units, requests, started_at, wall_s.
  2  + ready_tolerance, ready_poll_s (the stop rule's time to ready), rate_steady and ready_steady (each part of
     the rule at the last unit).
  3  + for: what it ran for (its params', ``workflow.stored.burn_in_for``), read back while nothing is to be
     measured, so that it does not run again then.
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
from specsweep.serve.server import READY_POLL_S

BURN_IN_DIR = "results/rounds/burn-in"
BURN_IN_FORMAT_VERSION = 3


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


def _within(values: list[float | None], tolerance: float, slack: float = 0.0) -> bool:
    """The last value within ``tolerance`` (a fraction) of the one before, plus ``slack``; both measured."""
    if len(values) < 2 or values[-1] is None or values[-2] is None:
        return False
    return abs(values[-1] - values[-2]) <= tolerance * abs(values[-2]) + slack


def stop_rule(rates: list[float | None], ready: list[float | None], tolerance: float, ready_tolerance: float,
              min_units: int, ready_poll_s: float = READY_POLL_S) -> dict[str, bool]:
    """The stop rule after the last unit: ``rate_steady`` (its decode rate within ``tolerance`` of the unit
    before), ``ready_steady`` (its time to ready within ``ready_tolerance`` of the unit before, plus one
    readiness poll) and ``steady``: both, after at least ``min_units`` units."""
    rate, up = _within(rates, tolerance), _within(ready, ready_tolerance, ready_poll_s)
    return {"steady": len(rates) >= max(2, min_units) and rate and up, "rate_steady": rate, "ready_steady": up}


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


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
    ready_tolerance = float(settings["ready_tolerance"])
    units: list[dict[str, Any]] = []
    rates: list[float | None] = []
    ready: list[float | None] = []
    rule = stop_rule(rates, ready, tolerance, ready_tolerance, min_units)
    t0 = time.time()
    _say(host, f"specsweep {plan.name} burn-in: up to {max_units} unmeasured launches, until its decode rate "
               f"(within {tolerance:.0%}) and its time to ready (within {ready_tolerance:.0%}) are steady from one "
               "launch to the next")
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
        ready.append(record.get("ready_s"))
        start, end = outcome.get("started_at"), outcome.get("ended_at")
        units.append({"unit": k, "status": outcome.get("status"), "decode_tok_s": rate,
                      "ready_s": record.get("ready_s"), "started_at": start,
                      "wall_s": end - start if start is not None and end is not None else None})
        print(f"burn-in unit {k}: {outcome.get('status')}, decode {rate if rate is None else round(rate, 1)} tok/s, "
              f"ready after {_shown(ready[-1])} s", file=log)
        rule = stop_rule(rates, ready, tolerance, ready_tolerance, min_units)
        if rule["steady"]:
            break
    _say(host, f"specsweep {plan.name} burn-in: {'steady' if rule['steady'] else 'not steady'} after {len(rates)} "
               f"unit(s), decode {', '.join(map(_shown, rates))} tok/s, ready after {', '.join(map(_shown, ready))} s")
    out = {"format_version": BURN_IN_FORMAT_VERSION, "config": plan.name, "units": units, **rule,
           "tolerance": tolerance, "ready_tolerance": ready_tolerance, "ready_poll_s": READY_POLL_S,
           "min_units": min_units, "max_units": max_units, "requests": int(settings["requests"]), "started_at": t0,
           "wall_s": time.time() - t0, "for": settings.get("for")}
    write_json_atomic(out_path, out)
    return out
