"""Checks of the resolved plans at workflow start (``rules/common.smk``) and in ``specsweep check``.

What the schema cannot see, because it exists only after merging, grids and
dataset selection: each is an error or a warning naming the key path and the
fix, before any job runs (``snakemake -n`` included).

* A dataset selection with fewer distinct prompts than one measured round
  sends (``num_prompts``): the round repeats prompts, the server's prefix cache
  answers the repeats, and every number is inflated. An error. Fewer than the
  whole run sends (``repeats x num_prompts`` + the warmup cap) is a warning:
  rounds reuse each other's prompts.
* A workload longer than one request may be (``input_len + output_len``
  beyond the limit the engine derives from the model's config or
  ``--context-length``): every request would be refused at warmup. An error.
* A baseline that runs speculative decoding: every verdict and the break-even
  (cycle time x the baseline's tok/s) assume a baseline without it. An error.
* Flags an engine's own parser refuses, for engines whose preflight runs
  in-process with no environment to build (``Engine.needs_parser_env`` false,
  the reference engine): checked here, so that ``snakemake -n`` refuses them,
  not the preflight job. (SGLang's parser needs its venv: its preflight job.)
* Labels (``variant``, ``expect``) through each engine's ``check_labels``.
* A simulated accept length (``SGLANG_SIMULATE_ACC_LEN``) that would not run as written: SGLang
  clamps it to ``[1, speculative-num-steps + 1]`` at every verify (``contracts.acceptance``), so
  the run would measure, and the report would label, an accept length that never ran. An error
  naming the value that would run. (A value SGLang cannot parse is refused with the config file:
  ``plan.envcheck``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.acceptance import SIMULATE_ACC_LEN, acc_len_problem
from specsweep.contracts.plan import Plan, typed_plan
from specsweep.engines.argv import speculative_algorithm
from specsweep.engines.registry import get_engine
from specsweep.plan.datasets import prompts_needed
from specsweep.plan.points import plan_points
from specsweep.plan.resolve import label_findings, plan_problems
from specsweep.plan.screen import unvaried_settings
from specsweep.records import is_external


def prompt_findings(plans: Mapping[str, Mapping]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of each plan's (and point's) dataset selection: prompts repeated within a round
    (error) or across rounds and warmup (warning)."""
    errors: list[str] = []
    warnings: list[str] = []
    for name, plan in plans.items():
        points = plan_points(plan)
        for i, point in enumerate(points):
            prompts = point.get("prompts") if "points" in plan else plan.get("prompts")
            if not prompts:
                continue  # the random dataset: fresh prompts by construction
            workload = point["workload"]
            where = f"configurations.{name}.{f'points[{i}]' if 'points' in plan else 'workload'}"
            at = f" (point {point['name']})" if "points" in plan else ""
            distinct, n = int(prompts["distinct"]), int(workload["num_prompts"])
            needed = prompts_needed(workload)
            source = f"{prompts['dataset']['path']} gives {distinct} distinct prompt(s) that pass the length filter"
            if distinct < n:
                errors.append(
                    f"{where}.num_prompts{at}: {source}, fewer than num_prompts={n}: each measured round would "
                    "send some prompts twice and the server's prefix cache would inflate every number; lower "
                    f"num_prompts to at most {distinct}, use a larger dataset, or widen the length filter "
                    "(workload.input_len, dataset.min_input_len, dataset.long_prompts)")
            elif distinct < needed:
                warnings.append(
                    f"{where}.num_prompts{at}: {source}, fewer than the {needed} the run sends (repeats x "
                    "num_prompts + warmup.max_requests): rounds reuse each other's prompts, which a prefix cache "
                    "may answer faster; a larger dataset avoids it")
    return errors, warnings


def context_findings(plans: Mapping[str, Mapping], base: Path, typed: Mapping[str, Plan] | None = None
                     ) -> list[str]:
    """Each plan's (and point's) ``input_len + output_len`` within what its engine lets one request ask for
    (``Engine.context_limit``: the model's config or ``--context-length``); beyond it every request would be
    refused at warmup. Plans whose limit cannot be known here (no model config on this host) pass."""
    errors: list[str] = []
    for name, plan in plans.items():
        if is_external(plan):
            continue
        limit = get_engine(plan["engine"]).context_limit(typed_plan(typed, name, plan), base)
        if limit is None:
            continue
        for i, point in enumerate(plan_points(plan)):
            workload = point["workload"]
            total = int(workload["input_len"]) + int(workload["output_len"])
            if total <= limit.tokens:
                continue
            where = f"configurations.{name}.{f'points[{i}]' if 'points' in plan else 'workload'}.output_len"
            errors.append(
                f"{where}: input_len {workload['input_len']} + output_len {workload['output_len']} = {total} tokens, "
                f"beyond the {limit.tokens} one request may ask for ({limit.source}): the server would refuse "
                "every request; lower output_len or input_len to fit")
    return errors


def baseline_problems(plans: Mapping[str, Mapping], baseline: str | None) -> list[str]:
    """The baseline must run without speculation: it is what speculation is judged against."""
    plan = plans.get(baseline) if baseline else None
    if plan is None:
        return []
    algorithm = speculative_algorithm(plan["server_args"])
    if algorithm is None:
        return []
    return [f"baseline: {baseline!r} runs speculative decoding (server_args.speculative-algorithm {algorithm}); the "
            "baseline is what speculation is judged against (break-even = cycle time x the baseline's tok/s "
            "without speculation): name a configuration without speculative-algorithm as baseline:, or set "
            f"configurations.{baseline}.server_args.speculative-algorithm: NONE"]


def acceptance_problems(plans: Mapping[str, Mapping]) -> list[str]:
    """Each plan's simulated accept length against the clamp of its ``speculative-num-steps``."""
    problems = []
    for name, plan in plans.items():
        value = (plan.get("env") or {}).get(SIMULATE_ACC_LEN)
        if value is None:
            continue
        steps = (plan.get("server_args") or {}).get("speculative-num-steps")
        steps = int(steps) if isinstance(steps, (int, str)) and str(steps).isdigit() else None
        why = acc_len_problem(value, steps)
        if why is not None:
            problems.append(f"configurations.{name}.env.{SIMULATE_ACC_LEN}: {why}; allowed: a number in "
                            f"[1, {'speculative-num-steps + 1' if steps is None else steps + 1}], or <= 0 (off)")
    return problems


def in_process_preflight(plans: Mapping[str, Mapping], typed: Mapping[str, Plan] | None = None
                         ) -> tuple[list[str], list[str]]:
    """Each plan of an engine that needs no parser environment, through its engine's own parser."""
    errors: list[str] = []
    warnings: list[str] = []
    for name, plan in plans.items():
        engine = get_engine(plan["engine"])
        if not engine.needs_parser_env and not is_external(plan):  # external: no argv (its preflight job's rule)
            result = engine.preflight(typed_plan(typed, name, plan))
            errors += result.errors
            warnings += result.warnings
    return errors, warnings


def start_findings(config: Mapping[str, Any], plans: Mapping[str, Mapping], labels: Mapping[str, Mapping],
                   typed: Mapping[str, Plan] | None = None) -> tuple[list[str], list[str]]:
    """(errors, warnings) of every check above and ``resolve.plan_problems``; errors stop the workflow.
    ``typed``: the plans typed already (``resolve.resolve_sweep_typed``), else each check types its own."""
    errors = (plan_problems(plans) + baseline_problems(plans, config.get("baseline")) + acceptance_problems(plans)
              + context_findings(plans, Path.cwd(), typed) + unvaried_settings(config, plans))
    warnings: list[str] = []
    for found in (label_findings(plans, labels, config.get("images"), typed), prompt_findings(plans),
                  in_process_preflight(plans, typed)):
        errors += found[0]
        warnings += found[1]
    return errors, warnings
