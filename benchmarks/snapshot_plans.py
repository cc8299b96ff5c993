"""Everything the workflow plans from a config, written as files to compare across two checkouts.

    PYTHONPATH=CHECKOUT python3 benchmarks/snapshot_plans.py OUT_DIR CONFIG [CONFIG ...]

Resolves CONFIG (several files are merged as ``snakemake --configfile A B`` does) the
way ``rules/common.smk`` does at every Snakemake start (strict YAML, schema, grids,
semantic checks, plans, labels and their checks) and writes, under OUT_DIR:

* ``plans/<config>.json``: each resolved plan, in the canonical JSON that
  ``resolve_plan`` writes and that Snakemake's params trigger compares;
* ``sweep.json``: the launch counts, the run order and job priorities, the labels
  and their findings, and every configuration's rule inputs and params
  (``specsweep.workflow.inputs``), i.e. what decides which jobs exist and rerun.

Run it with the same working directory against two checkouts and ``diff -r`` the
outputs: a move of code between modules must leave them equal (a field that names a
module, e.g. ``python -m specsweep.refengine`` in an argv, is the only expected change).
Image tags hash the image's build inputs, so they are left out (``images.tag`` has its
own tests); datasets are resolved without writing prompt files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specsweep.files import canonical_json, write_text_atomic
from specsweep.plan.config import check_files_strict, check_sweep, load_yaml_strict, deep_merge
from specsweep.plan.resolve import label_findings, plan_problems, resolve_labels, resolve_sweep
from specsweep.workflow import inputs as sw


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
    priorities = sw.priorities_of(order)
    per_config = {name: {
        "plan_params_equal": sw.plan_params(plans, name) == canonical_json(plans[name]),
        "parser_env_input": sw.parser_env_input(plans, config, name),
        "preflight_parser_input": sw.preflight_parser_input(plans, config, name),
        "server_inputs": sw.server_inputs(plans, name),
        "summary_inputs": sw.summary_inputs(schedule, name),
        "baseline_inputs": sw.baseline_inputs(sweep.config, name),
        "summary_labels": sw.summary_labels(labels, name),
        "gpus": sw.gpus_of(plans, name),
        "priorities": {launch: sw.launch_priority(priorities, name, launch) for launch in schedule[name]},
    } for name in names}
    rest = {"launches": launches, "order": [list(x) for x in order], "labels": labels,
            "label_errors": errors, "label_warnings": warnings, "plan_problems": plan_problems(plans),
            "agreement": sw.agreement_params(config), "best_exports": sw.best_exports(sweep.grids),
            "report_params": sw.report_params(sweep.config, labels, names, sweep.grids, order),
            "image_manifests": sw.image_manifests(config), "configurations": per_config}
    return plans, rest


def main(out: Path, config_paths: list[str]) -> None:
    plans, rest = snapshot(config_paths)
    for name, plan in plans.items():
        write_text_atomic(out / "plans" / f"{name}.json", canonical_json(plan) + "\n")
    write_text_atomic(out / "sweep.json", canonical_json(rest) + "\n")
    print(f"{out}: {len(plans)} plans, {sum(rest['launches'].values())} launches (the A/A control not counted)")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(Path(sys.argv[1]), sys.argv[2:])
