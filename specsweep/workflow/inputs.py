"""Rule inputs and params: what ``rules/common.smk``'s named input functions return.

Each function takes the resolved plans (or the config) and one wildcard value
explicitly; ``common.smk`` binds them to this workflow's own plans in one-line
named functions. Imported at every Snakemake start, so it stays light (no
numpy, matplotlib or aiohttp). The rounds', the burn-in's and a race's screen's
are ``workflow.round_inputs``'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.contracts import layout
from specsweep.contracts.layout import LAUNCH_FILES, launch_dir
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import (
    DEFAULT_REQUIREMENTS,
    build_notice,
    parser_env_dir,
    parser_env_ready,
)
from specsweep.files import canonical_json
from specsweep.images.tag import content_spec_json, image_tag
from specsweep.plan import rounds as plan_rounds
from specsweep.plan.config import ConfigError, schema_default
from specsweep.plan.controls import control_params
from specsweep.plan.grid import Grid, grid_params
from specsweep.plan.rounds import RoundSettings
from specsweep.records import is_external

# LAUNCH_FILES (the files of one launch, by the name of benchmark_server's output) and launch_dir are the
# path grammar's (contracts.layout); callers of this module use them too.


def configuration_name(plans: Mapping[str, dict], name: str, configfiles: Sequence[str], root: Path | str) -> str:
    """``name`` when the loaded config files define that configuration; otherwise stop Snakemake
    with one line naming it, the configurations they do define, and the files under ``config/``
    that define it. A ``SystemExit``: Snakemake reports an input function's exceptions with a
    traceback, but lets a ``SystemExit`` end the run with its message (and no lock left behind)."""
    if name in plans:
        return name
    raise SystemExit(unknown_configuration_message(name, sorted(plans), configfiles, Path(root)))


def plan_key(plan: Mapping[str, Any]) -> str:
    """The key a resolved plan is stored under (``layout.plan_key`` of its canonical JSON)."""
    return layout.plan_key(canonical_json(plan))


def plan_keys(plans: Mapping[str, dict]) -> dict[str, str]:
    """Each configuration's plan key: where its plan and launches are stored (``contracts.layout``)."""
    return {name: plan_key(plan) for name, plan in plans.items()}


def check_plan_key(keys: Mapping[str, str], name: str, key: str | None) -> str:
    """``name`` when ``key`` (a ``{plan}`` wildcard; None: the rule has none) is its current plan's key;
    otherwise stop Snakemake with one line (as ``configuration_name`` does): the files of another plan
    of that name are kept, and only a config file that resolves that plan can make them."""
    if key is None or keys[name] == key:
        return name
    raise SystemExit(f"specsweep: {layout.plan_dir(name, key)} is not the plan the loaded config files resolve "
                     f"for `{name}` (that is {layout.plan_dir(name, keys[name])}); its files are kept for the "
                     "config file that resolves it")


def image_name(config: Mapping[str, Any], name: str, configfiles: Sequence[str], root: Path | str) -> str:
    """``name`` when the loaded config files define that image (``images``); otherwise stop as
    ``configuration_name`` does."""
    images = config.get("images") or {}
    if name in images:
        return name
    raise SystemExit(unknown_configuration_message(name, sorted(images), configfiles, Path(root), "images"))


def unknown_configuration_message(name: str, defined: Sequence[str], configfiles: Sequence[str], root: Path,
                                  section: str = "configurations") -> str:
    loaded = ", ".join(_relative(Path(f), root) for f in configfiles) or "config.yaml"
    shown = ", ".join(defined[:12]) + (f", ... ({len(defined)} in all)" if len(defined) > 12 else "")
    where = defining_files(name, root, section)
    if where:
        hint = (f"`{name}` is in {', '.join(where)}: add `--configfile {where[0]}`"
                + (" (or another of them)" if len(where) > 1 else ""))
    else:
        hint = f"no file under config/ defines `{name}`"
    what = "configuration" if section == "configurations" else "image"
    return f"specsweep: no {what} `{name}` in {loaded}, which defines {shown or 'none'}; {hint}"


def defining_files(name: str, root: Path, section: str = "configurations") -> list[str]:
    """The config files under ``root/config/`` whose ``section`` (configurations, grids expanded;
    or images) includes ``name``; whole sweeps (files with configurations) before overlays."""
    from specsweep.plan.config import load_schema, load_yaml_strict
    from specsweep.plan.grid import expand_axes

    schema = load_schema()
    out = []
    for path in sorted((Path(root) / "config").glob("*.yaml")):
        try:
            data = load_yaml_strict(path) or {}
        except ConfigError:
            continue  # a broken file defines nothing here; loading it says why
        names = set((data.get(section) or {}) if isinstance(data, dict) else ())
        if section == "configurations" and names and name not in names:
            try:
                names = set(expand_axes(data, schema).config.get("configurations") or {})
            except (ValueError, KeyError, TypeError):
                pass  # an overlay that is not a whole sweep: its own names only
        if name in names:
            out.append((not (isinstance(data, dict) and data.get("configurations")), _relative(path, root)))
    return [rel for _overlay, rel in sorted(out)]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def launch_order(config: Mapping[str, Any], launches: Mapping[str, int]) -> list[tuple[str, str]]:
    """Every planned (configuration, launch) in run order: each planned round in its seeded order
    (``plan.rounds.planned_order``); extra rounds come from the judgements."""
    settings = RoundSettings.from_config(config)
    return plan_rounds.planned_order(launches, config.get("baseline"), bool(config.get("aa_control", True)),
                                     settings.seed, settings.first_round_baseline)


def schedule_of(order: Sequence[tuple[str, str]], names: Sequence[str]) -> dict[str, list[str]]:
    """Launch ids of each configuration: its regular launches in order, the A/A control after them (the
    order a summary lists them in, whatever place the control ran at in its round)."""
    return schedule_of_rounds([list(order)], names)


def summary_inputs(schedule: Mapping[str, Sequence[str]], config_name: str, keys: Mapping[str, str]
                   ) -> dict[str, list[str]]:
    """summarize_config's named inputs: the current plan, and each file kind of every launch of that plan
    (``keys``: each configuration's plan key), in run order."""
    dirs = [launch_dir(config_name, keys[config_name], launch) for launch in schedule[config_name]]
    out: dict[str, list[str]] = {"plan": [layout.plan_path(config_name)]}
    out.update({key: [f"{d}/{leaf}" for d in dirs] for key, leaf in LAUNCH_FILES.items()})
    return out


#: The file of a launch that stands for all of its files as a later job's input: ``benchmark_server`` writes it
#: last, after every other file of the launch (``serve.job``: ``_write_job_files``), and a measured launch is
#: never run again, so it is newer than a summary or judgement exactly when the launch wrote its files after them.
LAUNCH_EDGE = "outcome"


def summary_edges(schedule: Mapping[str, Sequence[str]], config_name: str, keys: Mapping[str, str]
                  ) -> dict[str, list[str]]:
    """summarize_config's declared inputs: the current plan and each launch's ``outcome.json`` (``LAUNCH_EDGE``),
    not its 8 files (``summary_inputs``, which ``launch_read_set`` gives back). Each declared file costs
    Snakemake a producer lookup and, at a no-op start, a metadata read: 8 per launch were about 23,000 files for
    500 configurations. A hand edit of a launch's other files reruns nothing until its outcome.json is touched."""
    files = summary_inputs(schedule, config_name, keys)
    return {"plan": files["plan"], LAUNCH_EDGE: files[LAUNCH_EDGE]}


def baseline_edges(config: Mapping[str, Any], config_name: str, keys: Mapping[str, str]) -> dict[str, str]:
    """``baseline_inputs`` as declared inputs: the baseline's plan and the outcome.json of its first launch."""
    files = baseline_inputs(config, config_name, keys)
    if not files:
        return {}
    return {"baseline_plan": files["baseline_plan"],
            "baseline_outcome": f"{Path(files['baseline_requests']).parent}/{LAUNCH_FILES[LAUNCH_EDGE]}"}


def launch_read_set(declared: Mapping[str, Any]) -> dict[str, Any]:
    """What summarize_config reads, from what it declares (``summary_edges`` | ``baseline_edges``; a str or a
    list of paths each, as Snakemake passes them): ``summary_inputs`` | ``baseline_inputs`` of the same launches,
    every file of each launch from the directory of its outcome.json."""
    def paths(value: Any) -> list[str]:
        return [value] if isinstance(value, str) else [str(v) for v in value]

    dirs = [str(Path(p).parent) for p in paths(declared[LAUNCH_EDGE])]
    out: dict[str, Any] = {"plan": paths(declared["plan"])}
    out.update({key: [f"{d}/{leaf}" for d in dirs] for key, leaf in LAUNCH_FILES.items()})
    if "baseline_outcome" in declared.keys():
        out["baseline_plan"] = paths(declared["baseline_plan"])[0]
        out["baseline_requests"] = f"{Path(paths(declared['baseline_outcome'])[0]).parent}/{LAUNCH_FILES['requests']}"
    return out


def plan_params(plans: Mapping[str, dict], config_name: str) -> str:
    """The resolved plan as canonical JSON: the plan job reruns exactly when it changes."""
    return canonical_json(plans[config_name])


def parser_env_path(config: Mapping[str, Any]) -> Path:
    """The parser venv's directory: the config's ``parser_env``, else one in the user's cache keyed by the
    pins' content (``engines.sglang.preflight.parser_env_dir``), outside ``results/``."""
    return Path(config.get("parser_env") or parser_env_dir())


def parser_env_input(plans: Mapping[str, dict], config: Mapping[str, Any], config_name: str) -> list[str]:
    """The parser environment's ready file, for engines whose preflight needs it (SGLang) to check a
    launch (an external server is not launched: nothing to parse)."""
    plan = plans[config_name]
    if get_engine(plan["engine"]).needs_parser_env and not is_external(plan):
        return [f"{parser_env_path(config)}/ready.json"]
    return []


def preflight_parser_input(plans: Mapping[str, dict], config: Mapping[str, Any], config_name: str) -> list[str]:
    """What preflight parses with: the parser venv (its ready file), or, with
    ``preflight_parser: image``, the plan's own built image (its manifest):
    exactly what will run, at the cost of building the image first."""
    plan = plans[config_name]
    if config.get("preflight_parser", "venv") == "image" and get_engine(plan["engine"]).needs_parser_env \
            and plan.get("image"):
        return [layout.image_manifest(plan["image"])]
    return parser_env_input(plans, config, config_name)


def parser_env_build_line(plans: Mapping[str, dict], config: Mapping[str, Any],
                          requirements: Path = DEFAULT_REQUIREMENTS) -> str | None:
    """Said at the start when this run must first build SGLang's parser environment (a download of gigabytes,
    by the job ``make_parser_env``, which Snakemake's quiet console does not announce); None when no
    configuration's preflight needs it or it is built already."""
    venv = parser_env_path(config)
    ready = f"{venv}/ready.json"
    needing = [name for name in sorted(plans) if ready in preflight_parser_input(plans, config, name)]
    if not needing or parser_env_ready(venv, requirements):
        return None
    return (f"this run first builds SGLang's parser environment: {build_notice(venv, requirements, needing)}, "
            "before any image build or launch")


def image_manifest_input(plans: Mapping[str, dict], config_name: str) -> list[str]:
    """A docker configuration depends on its image's manifest (content-addressed tag)."""
    plan = plans[config_name]
    return [layout.image_manifest(plan["image"])] if plan["runtime"] == "docker" else []


def config_image_spec_json(plans: Mapping[str, dict], config: Mapping[str, Any], config_name: str) -> str:
    """Content keys of a configuration's image spec (``null`` when it runs locally)."""
    image = plans[config_name].get("image")
    return content_spec_json(config["images"][image]) if image else "null"


def server_inputs(plans: Mapping[str, dict], config_name: str) -> dict[str, list[str]]:
    """benchmark_server's inputs beyond plan and preflight, in one call (Snakemake's cost is per input
    function and job): ``image`` (its manifest) and ``prompts`` (the selected prompts), each maybe empty."""
    return {"image": image_manifest_input(plans, config_name), "prompts": prompts_input(plans, config_name)}


def prompts_input(plans: Mapping[str, dict], config_name: str) -> list[str]:
    """A dataset configuration reads its selected prompts (``plan.datasets``; written at plan resolution):
    the workload's, or each point's (a point may select its own)."""
    plan = plans[config_name]
    selections = [p.get("prompts") for p in plan.get("points") or []] or [plan.get("prompts")]
    return sorted({s["file"] for s in selections if s})


def baseline_inputs(config: Mapping[str, Any], config_name: str, keys: Mapping[str, str]) -> dict[str, str]:
    """The baseline's current plan and the requests of its first launch, which the output-agreement check
    compares with (none for itself)."""
    baseline = config.get("baseline")
    if baseline is None or baseline == config_name:
        return {}
    return {"baseline_plan": layout.plan_path(baseline),
            "baseline_requests": layout.launch_file(baseline, keys[baseline], "1", "requests")}


def agreement_params(config: Mapping[str, Any]) -> str:
    """Baseline name and agreement threshold (changing the threshold reruns summaries, never a benchmark)."""
    threshold = config.get("agreement_threshold")
    if threshold is None:
        threshold = schema_default("agreement_threshold")
    return canonical_json({"baseline": config.get("baseline"), "threshold": threshold})


def gpus_of(plans: Mapping[str, dict], config_name: str) -> int:
    return int(plans[config_name].get("gpus", 0))


def same_for_all(values: Mapping[str, Any], per_job: Callable[..., Any]) -> Any:
    """A rule's input, param or resource whose value is per configuration (``values``, by name): the one value
    when every configuration has the same, so that Snakemake takes a constant rather than calling ``per_job``
    for every job (about 0.3 ms a call and job at a start, in Snakemake's own argument handling:
    snakemake 9.27.1 rules.py:659-690 apply_input_function, common/__init__.py:372-399); else ``per_job``.
    The same value either way: what a job reruns for does not change. Not for a string that Snakemake would
    read as a wildcard pattern (it formats a constant param's ``{name}``, never the value of a param function:
    rules.py:937-946 concretize_param)."""
    distinct = list(values.values())
    if distinct and all(value == distinct[0] for value in distinct[1:]) and not _braced(distinct[0]):
        return distinct[0]
    return per_job


# What Snakemake takes for a wildcard in a string: ``{`` then a name (snakemake_interface_storage_plugins 4.4.1
# io.py:10-22 WILDCARD_REGEX; canonical JSON's ``{"`` is none).
_WILDCARD_START = re.compile(r"\{\s*[.\w]")


def _braced(value: Any) -> bool:
    items = value if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(item, str) and _WILDCARD_START.search(item) for item in items)


def summary_labels(labels: Mapping[str, dict], config_name: str) -> str:
    """The labels a summary depends on: ``variant`` (the log must prove it, else ``fallback``), ``expect``
    and ``expect_signature`` (a failure is the expected one only if its own signature is in the log);
    editing them reruns the summary and the report, never the server."""
    own = labels[config_name]
    return canonical_json({k: own[k] for k in ("variant", "expect", "expect_signature")})


def report_params(
    config: Mapping[str, Any],
    labels: Mapping[str, dict],
    names: Sequence[str],
    grids: Mapping[str, Grid] | None = None,
    order: Sequence[tuple[str, str]] | None = None,
    design: tuple[str, str] | None = None,
) -> str:
    """What the report shows beyond the summaries (no benchmark reruns): baseline, descriptions,
    expectations, the grids (members and their axis values), the planned launch order, the
    positive control (``plan.controls.control_params``: its name, twin and slowdown), the smallest
    effect the report says whether the design resolves."""
    params: dict[str, Any] = {"baseline": config.get("baseline"),
                              "descriptions": {name: labels[name]["description"] for name in names},
                              "expects": {name: labels[name]["expect"] for name in names},
                              "own_baselines": {name: labels[name]["own_baseline"] for name in names
                                                if labels[name].get("own_baseline")},
                              "aa_control": bool(config.get("aa_control", True))}
    if grids:
        params["grids"] = grid_params(grids)
    if order:
        params["launch_order"] = [list(item) for item in order]
    if design:
        params["design"] = {"design": design[0], "why": design[1],
                            "rounds": RoundSettings.from_config(config).as_dict()}
    control = control_params(config)
    if control:
        params["positive_control"] = control
    effect = config.get("smallest_effect")
    params["smallest_effect"] = effect if effect is not None else schema_default("smallest_effect")
    return canonical_json(params)


def image_spec_json(config: Mapping[str, Any], image: str) -> str:
    """One image's spec (content keys only) as canonical JSON."""
    return content_spec_json((config.get("images") or {})[image])


def image_tag_params(config: Mapping[str, Any], root: Path | str, image: str) -> str:
    """The content-addressed tag the build must produce. A build context that is not there (a
    source not staged yet) stops Snakemake with its key, as ``configuration_name`` does."""
    try:
        return image_tag(image, (config.get("images") or {})[image], Path(root))
    except ValueError as exc:
        raise SystemExit(f"specsweep: {exc}") from None


def image_manifests(config: Mapping[str, Any]) -> list[str]:
    """Every image's manifest (what `push` needs)."""
    return [layout.image_manifest(name) for name in sorted(config.get("images") or {})]


def registry_json(config: Mapping[str, Any]) -> str:
    """The registry mapping as canonical JSON (``password_env`` is a variable NAME, not a secret)."""
    return canonical_json(dict(config.get("registry") or {}))


def best_exports(grids: Mapping[str, Grid]) -> list[str]:
    """The best-configuration files of every grid (render_report writes them)."""
    return [path for grid in sorted(grids) for path in layout.best_files(grid)]


def schedule_of_rounds(rounds: Sequence[Sequence[tuple[str, str]]], names: Sequence[str]) -> dict[str, list[str]]:
    """Launch ids of each configuration, round by round (the A/A control after the regular launches:
    ``contracts.layout.launch_sort_key``)."""
    out: dict[str, list[str]] = {name: [] for name in names}
    for members in rounds:
        for name, launch in members:
            if name in out:
                out[name].append(launch)
    return {name: sorted(ids, key=layout.launch_sort_key)
            for name, ids in out.items()}
