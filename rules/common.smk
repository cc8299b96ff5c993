# Validation, the resolved plans, and every named input function the rules use.
# Keep it short: each function is one line that calls specsweep.workflow with
# this workflow's plans or config, given explicitly.
import sys

sys.path.insert(0, workflow.basedir)

from specsweep.workflow import inputs as sw
from specsweep.plan.config import ConfigError, check_files_strict, check_sweep
from specsweep.plan.resolve import plan_problems, resolve_sweep

CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

# Validated once (schema, then grids expanded, then semantics, with file, key
# path and allowed values in every message), before any job is planned.
# SWEEP.config is the config with every grid replaced by its configurations.
try:
    check_files_strict(workflow.configfiles)
    SWEEP = check_sweep(config, CONFIG_SOURCE)
    PLANS, LAUNCHES = sw.resolve_or_config_error(resolve_sweep, SWEEP.config, CONFIG_SOURCE)
    _problems = plan_problems(PLANS)
    if _problems:
        raise ConfigError(CONFIG_SOURCE, _problems)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

CONFIGS = sorted(PLANS)
ROOT = workflow.basedir
# Launches of each configuration in run order (round 1, round 2, ..., the A/A
# control last) and the job priority that makes Snakemake keep that order.
ORDER = sw.launch_order(SWEEP.config, LAUNCHES)
SCHEDULE = sw.schedule_of(ORDER, CONFIGS)
PRIORITIES = sw.priorities_of(ORDER)
BEST_EXPORTS = sw.best_exports(SWEEP.grids)


wildcard_constraints:
    config="[a-z0-9_-]+",
    image="[a-z0-9_-]+",
    launch="[1-9][0-9]*|aa",


def plan_json(wildcards):
    return sw.plan_params(PLANS, wildcards.config)


def parser_env_input(wildcards):
    return sw.parser_env_input(PLANS, config, wildcards.config)


def image_manifest_input(wildcards):
    return sw.image_manifest_input(PLANS, wildcards.config)


def config_image_spec_json(wildcards):
    return sw.config_image_spec_json(PLANS, config, wildcards.config)


def gpus_of(wildcards):
    return sw.gpus_of(PLANS, wildcards.config)


def launch_priority(wildcards):
    return sw.launch_priority(PRIORITIES, wildcards.config, wildcards.launch)


def summary_inputs(wildcards):
    return sw.summary_inputs(SCHEDULE, wildcards.config)


def report_params(wildcards):
    return sw.report_params(SWEEP.config, CONFIGS, SWEEP.grids, ORDER)


def image_spec_json(wildcards):
    return sw.image_spec_json(config, wildcards.image)


def image_tag(wildcards):
    return sw.image_tag_params(config, ROOT, wildcards.image)


def image_manifests(wildcards):
    return sw.image_manifests(config)


def registry_json(wildcards):
    return sw.registry_json(config)
