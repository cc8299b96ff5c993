"""Rule inputs and params: what ``rules/common.smk``'s named input functions return.

Each function takes the resolved plans (or the config) and one wildcard value
explicitly; ``common.smk`` binds them to this workflow's own plans in one-line
named functions. Imported at every Snakemake start, so it stays light (no
numpy, matplotlib or aiohttp).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.engines.registry import get_engine
from specsweep.files import canonical_json
from specsweep.images.tag import content_spec_json, image_tag
from specsweep.plan import launches as launch_plan
from specsweep.plan.config import ConfigError
from specsweep.plan.grid import Grid, grid_params

DEFAULT_PARSER_ENV = "results/envs/sglang-parser"
#: The files of one launch, by the name of benchmark_server's output (the path grammar in the Snakefile).
LAUNCH_FILES = {"launch": "launch.json", "server_log": "server.log", "warmup": "warmup.jsonl",
                "requests": "requests.jsonl", "outcome": "outcome.json"}


def resolve_or_config_error(resolve: Any, config: Mapping[str, Any], source: str) -> Any:
    """``resolve(config)``, with its ``ValueError(problems)`` turned into a ``ConfigError`` naming ``source``."""
    try:
        return resolve(config)
    except ValueError as exc:
        problems = exc.args[0] if exc.args and isinstance(exc.args[0], list) else [str(exc)]
        raise ConfigError(source, problems) from None


def launch_order(config: Mapping[str, Any], launches: Mapping[str, int]) -> list[tuple[str, str]]:
    """Every (configuration, launch) in run order (``plan.launches.launch_order``)."""
    return launch_plan.launch_order(launches, config.get("baseline"), bool(config.get("aa_control", True)))


def schedule_of(order: Sequence[tuple[str, str]], names: Sequence[str]) -> dict[str, list[str]]:
    """Launch ids of each configuration, in run order."""
    out: dict[str, list[str]] = {name: [] for name in names}
    for name, launch in order:
        out[name].append(launch)
    return out


def priorities_of(order: Sequence[tuple[str, str]]) -> dict[tuple[str, str], float]:
    return launch_plan.priorities(list(order))


def launch_priority(priorities: Mapping[tuple[str, str], float], config_name: str, launch: str) -> float:
    """The job priority of one launch; a launch the sweep does not plan is an error, not a guess."""
    try:
        return priorities[(config_name, launch)]
    except KeyError:
        planned = sorted(lid for name, lid in priorities if name == config_name)
        raise ValueError(f"configuration {config_name!r} has no launch {launch!r}; planned launches: {planned}") \
            from None


def launch_dir(config_name: str, launch: str) -> str:
    return f"results/{config_name}/launch-{launch}"


def summary_inputs(schedule: Mapping[str, Sequence[str]], config_name: str) -> dict[str, list[str]]:
    """summarize_config's named inputs: the plan, and each file kind of every launch (in run order)."""
    dirs = [launch_dir(config_name, launch) for launch in schedule[config_name]]
    out: dict[str, list[str]] = {"plan": [f"results/{config_name}/plan.json"]}
    out.update({key: [f"{d}/{leaf}" for d in dirs] for key, leaf in LAUNCH_FILES.items()})
    return out



def plan_params(plans: Mapping[str, dict], config_name: str) -> str:
    """The resolved plan as canonical JSON: the plan job reruns exactly when it changes."""
    return canonical_json(plans[config_name])


def parser_env_input(plans: Mapping[str, dict], config: Mapping[str, Any], config_name: str) -> list[str]:
    """The parser environment's ready file, for engines whose preflight needs it (SGLang)."""
    if get_engine(plans[config_name]["engine"]).needs_parser_env:
        return [f"{config.get('parser_env') or DEFAULT_PARSER_ENV}/ready.json"]
    return []


def image_manifest_input(plans: Mapping[str, dict], config_name: str) -> list[str]:
    """A docker configuration depends on its image's manifest (content-addressed tag)."""
    plan = plans[config_name]
    return [f"results/images/{plan['image']}.json"] if plan["runtime"] == "docker" else []


def config_image_spec_json(plans: Mapping[str, dict], config: Mapping[str, Any], config_name: str) -> str:
    """Content keys of a configuration's image spec (``null`` when it runs locally)."""
    image = plans[config_name].get("image")
    return content_spec_json(config["images"][image]) if image else "null"


def gpus_of(plans: Mapping[str, dict], config_name: str) -> int:
    return int(plans[config_name].get("gpus", 0))


def report_params(
    config: Mapping[str, Any],
    names: Sequence[str],
    grids: Mapping[str, Grid] | None = None,
    order: Sequence[tuple[str, str]] | None = None,
) -> str:
    """What the report shows beyond the summaries (no benchmark reruns): baseline,
    descriptions, the grids (members and their axis values), the planned launch order."""
    configurations = config["configurations"]
    descriptions = {name: (configurations[name] or {}).get("description", "") for name in names}
    params: dict[str, Any] = {"baseline": config.get("baseline"), "descriptions": descriptions,
                              "aa_control": bool(config.get("aa_control", True))}
    if grids:
        params["grids"] = grid_params(grids)
    if order:
        params["launch_order"] = [list(item) for item in order]
    return canonical_json(params)


def image_spec_json(config: Mapping[str, Any], image: str) -> str:
    """One image's spec (content keys only) as canonical JSON."""
    return content_spec_json((config.get("images") or {})[image])


def image_tag_params(config: Mapping[str, Any], root: Path | str, image: str) -> str:
    """The content-addressed tag the build must produce."""
    return image_tag(image, (config.get("images") or {})[image], Path(root))


def image_manifests(config: Mapping[str, Any]) -> list[str]:
    """Every image's manifest (what `push` needs)."""
    return [f"results/images/{name}.json" for name in sorted(config.get("images") or {})]


def registry_json(config: Mapping[str, Any]) -> str:
    """The registry mapping as canonical JSON (``password_env`` is a variable NAME, not a secret)."""
    return canonical_json(dict(config.get("registry") or {}))




def best_exports(grids: Mapping[str, Grid]) -> list[str]:
    """The best-configuration files of every grid (render_report writes them)."""
    return [f"results/best/{grid}{suffix}" for grid in sorted(grids) for suffix in (".env", ".nccl-tuner.csv", ".json")]
