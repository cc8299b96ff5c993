# Validation and the small named input functions the rules use. Keep it short:
# anything with logic belongs in the specsweep package.
import sys

sys.path.insert(0, workflow.basedir)

from snakemake.utils import validate

from specsweep.config import ConfigError, check_config, check_files_strict
from specsweep.docker import content_spec_json
from specsweep.plan import canonical_json, plan_problems, resolve_plans

CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

try:
    check_files_strict(workflow.configfiles)
    check_config(config, CONFIG_SOURCE)
    PLANS = resolve_plans(config)
    _problems = plan_problems(PLANS)
    if _problems:
        raise ConfigError(CONFIG_SOURCE, _problems)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

validate(config, "../schemas/config.schema.yaml", set_default=False)

CONFIGS = sorted(PLANS)


wildcard_constraints:
    config="[a-z0-9_-]+",
    image="[a-z0-9_-]+",


def plan_json(wildcards):
    """The resolved plan as canonical JSON: the job reruns exactly when it changes."""
    return canonical_json(PLANS[wildcards.config])


def parser_env_input(wildcards):
    """SGLang configurations are parsed by the pinned SGLang in its own environment."""
    if PLANS[wildcards.config]["engine"] == "sglang":
        return f"{config.get('parser_env', 'results/envs/sglang-parser')}/ready.json"
    return []


def image_manifest_input(wildcards):
    """A docker configuration depends on its image's manifest (content-addressed tag)."""
    plan = PLANS[wildcards.config]
    if plan["runtime"] == "docker":
        return f"results/images/{plan['image']}.json"
    return []


def image_spec_json(wildcards):
    """Content keys of this configuration's image spec (null when it runs locally)."""
    image = PLANS[wildcards.config].get("image")
    return content_spec_json(config["images"][image]) if image else "null"


def gpus_of(wildcards):
    return int(PLANS[wildcards.config].get("gpus", 0))


def report_params(wildcards):
    descriptions = {name: (config["configurations"][name] or {}).get("description", "") for name in CONFIGS}
    return canonical_json({"baseline": config.get("baseline"), "descriptions": descriptions})
