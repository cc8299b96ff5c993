"""Everything the workflow plans from a config, and what it reports from fixed records, written as files
to compare across two checkouts.

    PYTHONPATH=CHECKOUT python3 benchmarks/snapshot_plans.py [--results] OUT_DIR CONFIG [CONFIG ...]

Resolves CONFIG (several files are merged as ``snakemake --configfile A B`` does) the
way ``rules/common.smk`` does at every Snakemake start (strict YAML, schema, grids,
semantic checks, plans, labels and their checks) and writes, under OUT_DIR:

* ``plans/<config>.json``: each resolved plan, in the canonical JSON that
  ``resolve_plan`` writes and that Snakemake's params trigger compares;
* ``sweep.json``: the launch counts, the run order and job priorities, the labels
  and their findings, and every configuration's rule inputs and params
  (``specsweep.workflow.inputs``), i.e. what decides which jobs exist and rerun.

With ``--results``, also the summaries and the report of synthetic launches (every planned
launch, in run order, with the same deterministic records: ``testing.reports.sequential_records``,
a speed per configuration and its speculation): each launch directory as ``benchmark_server``
writes it, then ``summarize_config`` and ``render_report`` as the rules call them
(``workflow.jobs.summarize_files``, ``render_report_files``), into ``OUT_DIR/results/``.

Run it with the same working directory against two checkouts and ``diff -r`` the
outputs: a move of code between modules must leave them equal (a field that names a
module, e.g. ``python -m specsweep.refengine`` in an argv, is the only expected change).
Image tags hash the image's build inputs, so they are left out (``images.tag`` has its
own tests); datasets are resolved without writing prompt files.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from specsweep.files import canonical_json, write_json_atomic, write_jsonl_atomic, write_text_atomic
from specsweep.plan.config import check_files_strict, check_sweep, deep_merge, load_yaml_strict
from specsweep.plan.resolve import label_findings, plan_problems, resolve_labels, resolve_sweep
from specsweep.plan.rounds import planned_rounds
from specsweep.records import DEFAULT_POINT, run_header
from specsweep.testing.reports import sequential_records
from specsweep.workflow import inputs as sw
from specsweep.workflow import round_inputs as sr
from specsweep.workflow.jobs import analyze_sweep_files, render_report_files, summarize_files


def snapshot(config_paths: list[str]) -> tuple[dict[str, dict], dict]:
    """(plans by name, everything else the workflow derives from them) for merged ``config_paths``."""
    check_files_strict(config_paths)
    config: dict = {}
    for path in config_paths:
        config = deep_merge(config, load_yaml_strict(Path(path)))
    source = ", ".join(config_paths)
    sweep = check_sweep(config, source)
    plans, launches = resolve_sweep(sweep.config, source, write_prompts=False)
    labels = resolve_labels(sweep.config)
    errors, warnings = label_findings(plans, labels, config.get("images"))
    names = sorted(plans)
    order = sw.launch_order(sweep.config, launches)
    schedule = sw.schedule_of(order, names)
    # the planned rounds (no judgement needed for them) and each launch's round
    rounds = sr.walk_rounds(launches, sweep.config, None, planned_rounds(launches))
    keys = sw.plan_keys(plans)  # where each plan and its launches are stored
    per_config = {name: {
        "plan_params_equal": sw.plan_params(plans, name) == canonical_json(plans[name]),
        "parser_env_input": sw.parser_env_input(plans, config, name),
        "preflight_parser_input": sw.preflight_parser_input(plans, config, name),
        "server_inputs": sw.server_inputs(plans, name),
        "summary_inputs": sw.summary_inputs(schedule, name, keys),
        "baseline_inputs": sw.baseline_inputs(sweep.config, name, keys),
        "summary_labels": sw.summary_labels(labels, name),
        "gpus": sw.gpus_of(plans, name),
        "priorities": {launch: sr.launch_priority_in(rounds, sweep.config, name, launch,
                                                     sr.round_of_launch(launches, launch))
                       for launch in schedule[name]},
    } for name in names}
    rest = {"launches": launches, "order": [list(x) for x in order], "labels": labels,
            "label_errors": errors, "label_warnings": warnings, "plan_problems": plan_problems(plans),
            "agreement": sw.agreement_params(config), "best_exports": sw.best_exports(sweep.grids),
            "report_params": sw.report_params(sweep.config, labels, names, sweep.grids, order,
                                              sr.measurement_design(sweep.config, plans)),
            "image_manifests": sw.image_manifests(config), "configurations": per_config}
    rest["_sweep"], rest["_keys"] = sweep, keys  # for synthetic_results; not written
    return plans, rest


def _write_launch(work: Path, plan: dict, key: str, launch: str, index: int, order: int) -> None:
    """One launch directory as benchmark_server leaves it, from fixed records (no server)."""
    name = plan["name"]
    run_id = f"{index:03d}{order:03d}00c0de"[-12:]
    spec = plan["server_args"].get("speculative-algorithm") not in (None, "NONE")
    records = sequential_records(run_id, gap_ms=10.0 + 3 * index, per_chunk=3 if spec else 1, spec=spec,
                                 seed=index * 100 + order, jitter=0.2, timing=spec)
    for rec in records:
        rec["point"] = DEFAULT_POINT
    directory = work / sw.launch_dir(name, key, launch)
    started = 1_800_000_000.0 + 100 * order
    ok = {"status": "ok", "stage": None, "reason": None, "detail": None}
    write_json_atomic(directory / "launch.json", {"run_id": run_id, "plan_name": name, "launch": launch,
                                                  "started_at": started, "ready_s": 1.5, "argv": plan["argv"]})
    backend = plan["server_args"].get("all-reduce-backend", "shm")
    write_text_atomic(directory / "server.log", run_header(run_id, name) + f"all-reduce backend: {backend}\n")
    write_jsonl_atomic(directory / "warmup.jsonl", [])
    write_jsonl_atomic(directory / "requests.jsonl", records)
    write_json_atomic(directory / "outcome.json", {
        "format_version": 2, **ok, "log_tail": None, "run_id": run_id, "launch": launch, "host": None,
        "points": {DEFAULT_POINT: dict(ok)}, "started_at": started, "ended_at": started + 60.0})
    (directory / "nccl").mkdir(exist_ok=True)
    for stage in ("profile.json", "allreduce_bench.json"):
        write_json_atomic(directory / stage, {"format_version": 1, "enabled": False, "run_id": run_id,
                                              "status": "off", "reason": "profile.enabled is false"})


def synthetic_results(work: Path, plans: dict[str, dict], rest: dict) -> None:
    """Summaries and the report of one synthetic run of every planned launch, under ``work/results``."""
    os.chdir(work)  # the rules' relative paths, so that nothing written names OUT_DIR
    names = sorted(plans)
    schedule = sw.schedule_of([tuple(x) for x in rest["order"]], names)
    keys = rest["_keys"]
    for name in names:
        write_text_atomic(sw.summary_inputs(schedule, name, keys)["plan"][0], canonical_json(plans[name]))
    for order, (name, launch) in enumerate(rest["order"]):
        _write_launch(Path("."), plans[name], keys[name], launch, names.index(name), order)
    summaries = []
    for name in names:
        inputs = {**sw.summary_inputs(schedule, name, keys), **sw.baseline_inputs(rest["_sweep"].config, name, keys)}
        out = f"results/{name}/summary.json"
        summarize_files(inputs, out, io.StringIO(), rest["agreement"], sw.summary_labels(rest["labels"], name))
        summaries.append(out)
    analyze_sweep_files(summaries, rest["report_params"], "results/report.json")
    render_report_files("results/report.json", "results/summary.csv", "results/report.md", "results/plots",
                        "results/best")


def main(out: Path, config_paths: list[str], results: bool = False) -> None:
    out = out.resolve()
    config_paths = [str(Path(p).resolve()) for p in config_paths]
    plans, rest = snapshot(config_paths)
    for name, plan in plans.items():
        write_text_atomic(out / "plans" / f"{name}.json", canonical_json(plan) + "\n")
    written = {k: v for k, v in rest.items() if not k.startswith("_")}
    write_text_atomic(out / "sweep.json", canonical_json(written) + "\n")
    print(f"{out}: {len(plans)} plans, {sum(rest['launches'].values())} launches (the A/A control not counted)")
    if results:
        synthetic_results(out, plans, rest)
        print(f"{out}/results: {len(plans)} summaries, the report")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--results"]
    if len(args) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    main(Path(args[0]), args[1:], results="--results" in sys.argv[1:])
