# Validation, the resolved plans, and every named input function the rules use.
# Keep it short: each function is one line that calls specsweep.workflow with
# this workflow's plans or config, given explicitly.
import sys
import time
from pathlib import Path

sys.path.insert(0, workflow.basedir)

from snakemake.logging import logger as snakemake_logger

from specsweep.workflow import inputs as sw
from specsweep.workflow.console import quiet_console
from specsweep.workflow.closing import print_closing
from specsweep.workflow.profiles import check_profiles
from specsweep.plan.config import ConfigError, check_files_strict, check_sweep
from specsweep.plan.checks import start_findings
from specsweep.plan.cost import cost_lines as sweep_cost_lines, sweep_cost
from specsweep.plan.resolve import resolve_labels, resolve_sweep

# Snakemake's own console lines: the profile's quiet, and what it prints regardless, off unless --verbose
# (specsweep.workflow.console); only for the user's console, not in a job's own Snakemake.
if workflow.is_main_process:
    quiet_console(snakemake_logger, workflow.output_settings.quiet, workflow.output_settings.verbose,
                  workflow.output_settings.dryrun, sys.argv[1:])

# When this Snakemake started: the closing summary speaks only of a report this run wrote.
STARTED_AT = time.time()
CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

# Validated once (schema, then grids expanded, then semantics, with file, key
# path and allowed values in every message), before any job is planned.
# SWEEP.config is the config with every grid replaced by its configurations.
try:
    check_files_strict(workflow.configfiles)
    SWEEP = check_sweep(config, CONFIG_SOURCE)
    # A dataset's selected prompts are kept under results/prompts/ (cached by stat: cheap at every start).
    PLANS, LAUNCHES = resolve_sweep(SWEEP.config, CONFIG_SOURCE, write_prompts=True)
    # description, expect, variant: for the summary and the report only, never in a plan.
    LABELS = resolve_labels(SWEEP.config)
    # Repeated dataset prompts, a speculative baseline, labels, and the reference engine's own parser
    # (in-process): refused here, so that `snakemake -n` refuses them too (specsweep.plan.checks).
    _problems, _warnings = start_findings(SWEEP.config, PLANS, LABELS)
    if _problems:
        raise ConfigError(CONFIG_SOURCE, _problems)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
for _warning in _warnings:
    print(f"specsweep: warning: {_warning}", file=sys.stderr)

CONFIGS = sorted(PLANS)
ROOT = workflow.basedir
# Launches of each configuration in run order (round 1, round 2, ..., the A/A
# control last) and the job priority that makes Snakemake keep that order.
ORDER = sw.launch_order(SWEEP.config, LAUNCHES)
SCHEDULE = sw.schedule_of(ORDER, CONFIGS)
PRIORITIES = sw.priorities_of(ORDER)
BEST_EXPORTS = sw.best_exports(SWEEP.grids)
# What the sweep will cost (launches, requests, a guessed time), said at every start, `snakemake -n` included.
if workflow.is_main_process:
    _cost, _cost_warnings = sweep_cost_lines(sweep_cost(PLANS, ORDER))
    print(f"specsweep: {_cost}", file=sys.stderr)
    for _warning in _cost_warnings:
        print(f"specsweep: warning: {_warning}", file=sys.stderr)
# The same for every summary: a value, not a function Snakemake calls per job.
AGREEMENT = sw.agreement_params(config)


wildcard_constraints:
    config="[a-z0-9_-]+",
    image="[a-z0-9_-]+",
    launch="[1-9][0-9]*|aa",


def configuration(wildcards):
    # The {config} wildcard, known to the loaded config files (else a one-line message, no traceback).
    return sw.configuration_name(PLANS, wildcards.config, workflow.configfiles, ROOT)


def plan_json(wildcards):
    return sw.plan_params(PLANS, configuration(wildcards))


def parser_env_input(wildcards):
    return sw.parser_env_input(PLANS, config, configuration(wildcards))


def preflight_parser_input(wildcards):
    return sw.preflight_parser_input(PLANS, config, configuration(wildcards))


def config_image_spec_json(wildcards):
    return sw.config_image_spec_json(PLANS, config, configuration(wildcards))


def server_inputs(wildcards):
    return sw.server_inputs(PLANS, configuration(wildcards))


def gpus_of(wildcards):
    return sw.gpus_of(PLANS, configuration(wildcards))


def launch_priority(wildcards):
    return sw.launch_priority(PRIORITIES, configuration(wildcards), wildcards.launch)


def summary_inputs(wildcards):
    name = configuration(wildcards)
    return sw.summary_inputs(SCHEDULE, name) | sw.baseline_inputs(config, name)


def summary_labels(wildcards):
    return sw.summary_labels(LABELS, configuration(wildcards))


def report_params(wildcards):
    return sw.report_params(SWEEP.config, LABELS, CONFIGS, SWEEP.grids, ORDER)


def image(wildcards):
    # The {image} wildcard, known to the loaded config files (else a one-line message, no traceback).
    return sw.image_name(config, wildcards.image, workflow.configfiles, ROOT)


def image_spec_json(wildcards):
    return sw.image_spec_json(config, image(wildcards))


def image_tag(wildcards):
    return sw.image_tag_params(config, ROOT, image(wildcards))


def image_manifests(wildcards):
    return sw.image_manifests(config)


def registry_json(wildcards):
    return sw.registry_json(config)


def closing_summary():
    """onsuccess: the A/A line, the fastest configurations and verdicts, the report's paths."""
    print_closing(Path("results"), STARTED_AT, BEST_EXPORTS, sys.stderr)


def check_workflow_profiles():
    """Once the rules exist, the profiles this run uses (keys Snakemake would drop, resource typos)."""
    try:
        check_profiles(Path(workflow.basedir), [rule.name for rule in workflow.rules], sys.argv[1:])
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None
