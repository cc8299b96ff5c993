"""A race's screen as Snakemake runs it (rules/screen.smk; the screen itself is ``analysis.screen``; what the rules
read at every start, its paths and params, is in ``workflow.inputs``).

* ``bench_setting``: one job per distinct communication setting (``plan.screen.bench_settings``), the
  all-reduce micro-benchmark (``serve.profile.run_allreduce_bench``, the server job's own stage) run for the
  configuration that stands for it, under the host lock, with no server up. Its file lives with that plan
  (``results/<config>/plans/<plan>/screen_bench.json``): a plan that changes benchmarks again.
* ``screen_grid``, a checkpoint: the screen from those files and the configurations measured so far, written to
  ``results/screen/screen.json``. The rounds read its set-aside list (``workflow.round_inputs.walk_rounds``): round 1
  and every later round hold only the configurations kept, so ``-n`` before it shows the micro-benchmarks and
  the screen, and after it the kept configurations' round.

What was measured so far is every summary under ``results/`` when the screen runs (``measured_rows``): on this
host, by this checkout. They are not inputs of the checkpoint: the grid's own summaries are made from the launches
that the screen decides, so an edge would be a cycle. A group's fixed part may come from a summary of another
name whose plan is the group's but for the settings (``plan.screen.group_key``: e.g. the same server measured by
another config file). The screen runs again when its params change (a configuration's plan, the settings,
``max_error``), not when a summary appears; ``-R screen_grid`` screens again on purpose.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from specsweep.analysis.screen import screen
from specsweep.analysis.sweep import analyze_sweep
from specsweep.contracts.plan import Plan
from specsweep.contracts.summary import ConfigSummary, SummaryError
from specsweep.contracts.vocabulary import StageStatus
from specsweep.files import read_json, write_json_atomic
from specsweep.plan.config import load_schema
from specsweep.plan.screen import group_key
from specsweep.serve.launch import gpu_ids, server_environment
from specsweep.serve.lock import LockSettings, host_lock
from specsweep.serve.profile import run_allreduce_bench
from specsweep.workflow.round_inputs import bench_path


def _profile_defaults() -> dict[str, Any]:
    """The schema's defaults of ``profile:`` (a plan without profiling still has its micro-benchmark's settings)."""
    props = load_schema()["$defs"]["config_entry"]["properties"]["profile"]["properties"]
    return {k: v.get("default") for k, v in props.items()}


def run_bench(plan_path: str, out_path: str, log: TextIO, image_manifest_path: str | None = None) -> dict:
    """bench_setting: the micro-benchmark of one plan's communication setting, in its server's environment (or
    image), under the host lock (no server may run beside it)."""
    plan = Plan.load(plan_path)
    settings = {**_profile_defaults(), **(plan.profile or {}), "enabled": True, "allreduce_bench": True}
    manifest = read_json(image_manifest_path) if image_manifest_path else None
    holder = {"config": plan.name, "stage": "screen micro-benchmark"}
    with host_lock(LockSettings.from_environ(os.environ), holder, gpu_ids(plan, os.environ), log):
        record = run_allreduce_bench(plan, settings, Path(out_path), manifest,
                                     server_environment(plan.env, dict(os.environ)), log)
    print(f"{plan.name}: micro-benchmark {record['status']}", file=log)
    return record


def latency_of(bench: Mapping[str, Any]) -> float | None:
    """The micro-benchmark's median at the verify's size, us (None unless it ran and summed correctly)."""
    if bench.get("status") != StageStatus.OK:
        return None
    return float(bench["result"]["sizes"][0]["median_us"])


def measured_rows(results: Path, settings: Sequence[str], group_keys: Mapping[str, str]
                  ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The report rows of every summary under ``results`` (``analysis.sweep.analyze_sweep``: the cost model
    and its residual as the report computes them), and for each group the measured configuration whose plan is
    the group's but for the settings."""
    summaries = []
    for path in sorted(results.glob("*/summary.json")):
        try:
            summaries.append(ConfigSummary.load(path))
        except SummaryError:  # another format: not measured by this checkout's rules until it is rebuilt
            continue
    if not summaries:
        return [], {}
    rows = analyze_sweep(summaries, None, {"smallest_effect": None})["rows"]
    by_key = {group_key(s.plan, settings): s.config for s in summaries if s.plan}
    return rows, {g: by_key[k] for g, k in group_keys.items() if k in by_key}


def screen_grid(params: str, out_path: str, log: TextIO, results: str = "results") -> dict[str, Any]:
    """screen_grid: the screen of the grid (``analysis.screen.screen``) from the micro-benchmarks' files and the
    configurations measured so far; written to ``out_path``."""
    p = json.loads(params)
    latencies: dict[str, float | None] = {}
    for run in p["runs"]:
        latency = latency_of(read_json(bench_path(run["config"], run["key"])))
        latencies.update({name: latency for name in run["members"]})
    rows, sources = measured_rows(Path(results), p["settings"], p["group_keys"])
    record = screen(p["groups"], p["settings"], rows, latencies, p["max_error"], benches=len(p["runs"]),
                    sources=sources, keep=[p["baseline"]] if p.get("baseline") else [])
    write_json_atomic(out_path, record)
    aside = ", ".join(record["set_aside"]) or "nothing"
    print(f"screen: set aside {aside}" + (f" ({record['why']})" if record["why"] else "")
          + f"; {len(p['runs'])} micro-benchmark runs", file=log)
    return record
