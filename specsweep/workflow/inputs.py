"""Rule inputs and params: what ``rules/common.smk``'s named input functions return.

Each function takes the resolved plans (or the config) and one wildcard value
explicitly; ``common.smk`` binds them to this workflow's own plans in one-line
named functions. Imported at every Snakemake start, so it stays light (no
numpy, matplotlib or aiohttp).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from specsweep.contracts import layout
from specsweep.contracts.layout import LAUNCH_FILES, launch_dir
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import (
    DEFAULT_REQUIREMENTS,
    build_notice,
    parser_env_dir,
    parser_env_ready,
)
from specsweep.files import canonical_json, read_json
from specsweep.images.tag import content_spec_json, image_tag
from specsweep.plan import rounds as plan_rounds
from specsweep.plan.config import ConfigError, schema_default
from specsweep.plan.controls import control_params
from specsweep.plan.design import DesignError, choose_design, local_job_slots  # noqa: F401 - for the Snakefile
from specsweep.plan.grid import Grid, grid_params
from specsweep.plan.rounds import RoundSettings
from specsweep.plan.screen import ScreenSettings, bench_settings, group_key, groups
from specsweep.records import is_external
from specsweep.workflow import rounds as rounds_mod

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
    from specsweep.plan.config import ConfigError, load_schema, load_yaml_strict
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
    return plan_rounds.planned_order(launches, config.get("baseline"), bool(config.get("aa_control", True)),
                                     RoundSettings.from_config(config).seed)


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


# ------------------------------------------------------------------ rounds (plan.rounds, workflow.rounds)


def round_params(config: Mapping[str, Any], labels: Mapping[str, dict], launches: Mapping[str, int],
                 keys: Mapping[str, str]) -> str:
    """What every round's judgement reads besides the launches: the baseline, the controls, the
    effect to resolve, the planned launches, the rounds' settings, each configuration's labels and
    the key of its current plan (whose launches it judges)."""
    effect = config.get("smallest_effect")
    return canonical_json({
        "baseline": config.get("baseline"), "aa_control": bool(config.get("aa_control", True)),
        "positive_control": control_params(config),
        "smallest_effect": effect if effect is not None else schema_default("smallest_effect"),
        "launches": dict(launches), "rounds": RoundSettings.from_config(config).as_dict(),
        "labels": {name: {k: own[k] for k in ("variant", "expect", "expect_signature")}
                   for name, own in labels.items()},
        "expects": {name: own["expect"] for name, own in labels.items()},
        "plans": dict(keys),
    })


def round_plan_params(config: Mapping[str, Any], rounds: Sequence[Sequence[tuple[str, str]]], round_no: int,
                      design: tuple[str, str]) -> str:
    """plan_round's params: the round's members (``rounds``: ``workflow.rounds.walk_rounds`` up to it),
    the design and the settings (its seed)."""
    members = rounds_mod.members_of_round(rounds, round_no)
    if not members:
        raise ValueError(f"round {round_no} is not part of this sweep: it has {len(rounds)} rounds so far")
    return canonical_json({"round": round_no, "members": [list(m) for m in members], "design": design[0],
                           "why": design[1], "settings": RoundSettings.from_config(config).as_dict()})


def round_of_launch(launches: Mapping[str, int], launch: str, config: Mapping[str, Any] | None = None,
                    config_name: str | None = None) -> int:
    """The round a launch id runs in; with ``config`` and ``config_name``, a launch beyond every round the
    sweep may run (its planned launches, or the budget ``rounds.max_launches``) stops Snakemake with one line
    (``no_launch``), not a guess."""
    planned = plan_rounds.planned_rounds(launches)
    r = plan_rounds.round_of(launch, planned)
    if config is not None and config_name is not None and launch != layout.CONTROL:
        most = max(launches.get(config_name, 0), RoundSettings.from_config(config).max_launches or 0)
        if r > most:
            ids = [str(i) for i in range(1, launches.get(config_name, 0) + 1)]
            no_launch(config_name, launch, ids, f" (at most {most} with extra rounds)" if most > len(ids) else "")
    return r


def no_launch(config_name: str, launch: str, planned: Sequence[str], more: str = "") -> NoReturn:
    """Stop with one line naming the launches the loaded config plans: a ``SystemExit``, which Snakemake lets
    end the run from an input function without a traceback (``configuration_name``)."""
    shown = ", ".join(f"launch-{lid}" for lid in planned) or "none"
    raise SystemExit(f"specsweep: configuration `{config_name}` has no launch-{launch}: the loaded config plans "
                     f"{shown}{more} (`launches:` sets how many; launch-aa is the baseline's A/A control)")


def launch_priority_in(rounds: Sequence[Sequence[tuple[str, str]]], config: Mapping[str, Any], config_name: str,
                       launch: str, round_no: int) -> float:
    """The job priority of one launch, by its place in its round's seeded order; a launch the sweep
    does not plan stops Snakemake with one line (``no_launch``)."""
    members = tuple(rounds_mod.members_of_round(rounds, round_no))
    priorities = _round_priorities(members, RoundSettings.from_config(config).seed, round_no)
    if (config_name, launch) not in priorities:
        no_launch(config_name, launch, sorted(lid for r in rounds for name, lid in r if name == config_name))
    return priorities[(config_name, launch)]


@functools.lru_cache(maxsize=16)
def _round_priorities(members: tuple[tuple[str, str], ...], seed: int, round_no: int
                      ) -> dict[tuple[str, str], float]:
    """Every member's job priority in its round (``plan.rounds.round_priorities`` of the round's order), drawn
    once per round: Snakemake asks it of every launch job, and a round of N launches drawn N times is N^2."""
    return plan_rounds.round_priorities(plan_rounds.round_order(members, seed, round_no), round_no)


def schedule_of_rounds(rounds: Sequence[Sequence[tuple[str, str]]], names: Sequence[str]) -> dict[str, list[str]]:
    """Launch ids of each configuration, round by round (the A/A control after the regular launches)."""
    out: dict[str, list[str]] = {name: [] for name in names}
    for members in rounds:
        for name, launch in members:
            if name in out:
                out[name].append(launch)
    return {name: sorted(ids, key=lambda lid: (lid == layout.CONTROL, int(lid) if lid.isdigit() else 0))
            for name, ids in out.items()}


def judge_inputs(rounds: Sequence[Sequence[tuple[str, str]]], round_no: int, burn_in: bool,
                 keys: Mapping[str, str]) -> dict[str, list[str]]:
    """judge_round's inputs: the current plan and every file of every launch of rounds 1..round_no (of the
    current plans: ``keys``), and the burn-in's record after round 1."""
    members = [m for r in rounds[:round_no] for m in r]
    out: dict[str, list[str]] = {"plans": sorted({layout.plan_path(name) for name, _ in members})}
    out.update({kind: [f"{launch_dir(name, keys[name], lid)}/{leaf}" for name, lid in members]
                for kind, leaf in LAUNCH_FILES.items()})
    if burn_in and round_no == 1:
        out["burn_in"] = BURN_IN_RECORD_PATH  # one path: snakemake.input.burn_in is then a str
    return out


def round_files(rounds: Sequence[Sequence[tuple[str, str]]]) -> dict[str, list[str]]:
    """Every round's plan and judgement (the report's view of the design, order and end)."""
    n = len(rounds)
    return {"round_plans": [rounds_mod.round_path(r, "plan.json") for r in range(1, n + 1)],
            "judgements": [rounds_mod.round_path(r, "judgement.json") for r in range(1, n + 1)]}


#: The burn-in's record, which every launch of a planned round waits for (an ancient() edge: rules/common.smk).
BURN_IN_PATH = "results/rounds/burn-in.json"
#: Its lasting copy, which round 1's judgement reads (rules/rounds.smk).
BURN_IN_RECORD_PATH = "results/rounds/burn-in-record.json"


def burn_in_config(config: Mapping[str, Any], names: Sequence[str]) -> str | None:
    """The configuration whose server the burn-in launches (the baseline, else the first by name); None when
    the burn-in is off or there is nothing to launch."""
    if not (config.get("burn_in") or {}).get("enabled", schema_default("burn_in").get("enabled", True)):
        return None
    baseline = config.get("baseline")
    return baseline if baseline in names else (sorted(names)[0] if names else None)


def burn_in_params(config: Mapping[str, Any], due: Any = None) -> str:
    """burn_in_host's params: its settings, and ``for`` (``workflow.stored.burn_in_for``: what this invocation
    measures, which makes the burn-in run again, or what the last burn-in ran for; none before any)."""
    settings = {**schema_default("burn_in"), **(config.get("burn_in") or {})}
    return canonical_json(settings if due is None else {**settings, "for": due})


def walk_rounds(launches: Mapping[str, int], config: Mapping[str, Any], judgement_of: Any,
                upto: int | None = None, screened: Any = None) -> list[list[tuple[str, str]]]:
    """``workflow.rounds.walk_rounds`` with this config's baseline and A/A control, and without the
    configurations a race's screen set aside (``screened()``: their names, once the screen is written; in a
    Snakefile it reads the checkpoint ``screen_grid``, so the DAG stops there until the screen is done)."""
    extra = RoundSettings.from_config(config).max_launches is not None
    return rounds_mod.walk_rounds(kept_launches(launches, config, screened), config.get("baseline"),
                                  bool(config.get("aa_control", True)), judgement_of, upto, extra)


def kept_launches(launches: Mapping[str, int], config: Mapping[str, Any], screened: Any = None) -> dict[str, int]:
    """The planned launches of every configuration the screen kept (all of them without ``screen.enabled``);
    with ``screen.check``, each one it set aside is launched once anyway: launch 1, in round 1, so never a
    survivor of a race (a race's survivors are the configurations of the round just judged, from round 2 on)."""
    own = ScreenSettings.from_config(config)
    if screened is None or not own.enabled:
        return dict(launches)
    aside = set(screened())
    return {name: (min(n, CHECK_LAUNCHES) if name in aside else n) for name, n in launches.items()
            if name not in aside or own.check}


round_path = rounds_mod.round_path


def previous_judgement(round_no: int) -> list[str]:
    """A round starts once the round before is judged (none before round 1)."""
    return [] if round_no <= 1 else [round_path(round_no - 1, "judgement.json")]


def measurement_design(config: Mapping[str, Any], plans: Mapping[str, dict], source: str = "config",
                       job_slots: int | None = None) -> tuple[str, str]:
    """(design, why) of every round: ``rounds.design``, ``auto`` decided by what fits on the host at once
    (``plan.design.choose_design``); a side-by-side request that cannot be is a ``ConfigError``.
    ``job_slots``: the jobs Snakemake runs at once (``plan.design.local_job_slots``; 0 under a cluster
    executor), which a round's launches side by side must not outnumber."""
    asked = RoundSettings.from_config(config).design
    aa = bool(config.get("aa_control", True)) and config.get("baseline") in plans
    try:
        design, why = choose_design(list(plans.values()), asked, round_size=len(plans) + aa, job_slots=job_slots)
    except DesignError as exc:
        raise ConfigError(source, [str(exc)]) from None
    return str(design.value if hasattr(design, "value") else design), why


def launch_threads(design: tuple[str, str]) -> int:
    """Side by side, a round's launch jobs must run at once, whatever --cores says: they claim no core."""
    return 0 if design[0] == plan_rounds.SIDE_BY_SIDE else 1


def server_slots(design: tuple[str, str]) -> int:
    """Sequential: one server at a time (the profile's ``server: 1``); side by side: no slot (the round's
    jobs take turns at the host lock while measuring)."""
    return 0 if design[0] == plan_rounds.SIDE_BY_SIDE else 1


def round_plan_input(design: tuple[str, str], round_no: int) -> dict[str, str]:
    """The round's plan as a launch's input: side by side only, where the launch reads its partners and
    turns from it (the Snakefile marks it ancient(): a plan rewritten when a configuration is added reruns
    no launch already measured). A sequential launch takes none: its place in the round is its job priority
    (``launch_priority_in``), and an edge from a job that reruns (plan_round, when a configuration is added)
    through an ancient() file makes Snakemake 9 drop the jobs below it, the asked-for target included
    (dag.py update_needrun masks them and its BFS skips ancient edges; snakemake/snakemake#4166, and
    rules/images.smk). So adding a configuration and asking for its summary runs its launches."""
    if design[0] != plan_rounds.SIDE_BY_SIDE:
        return {}
    return {"round_plan": round_path(round_no, "plan.json")}


def burn_in_input(burn_in_config_name: str | None, round_no: int, launches: Mapping[str, int]) -> dict[str, str]:
    """Every launch of a planned round waits for the burn-in: their jobs all exist at once, ordered only by
    priority, so a round-2 launch that did not wait would run first, on a cold host, while round 1 waits.
    An extra round's launches exist only once a judgement after the burn-in is written."""
    planned = plan_rounds.planned_rounds(launches)
    return {"burn_in": BURN_IN_PATH} if burn_in_config_name is not None and round_no <= planned else {}


def burn_in_inputs(plans: Mapping[str, dict], name: str | None) -> dict[str, Any]:
    """The burn-in launches this configuration's server: its plan, preflight and server inputs."""
    if name is None:
        return {}
    key = plan_key(plans[name])
    return {"plan": layout.stored_plan_path(name, key), "preflight": layout.stored_preflight_path(name, key),
            **server_inputs(plans, name)}


# ------------------------------------------------------------------ a race's screen (workflow.screen, rules/screen.smk)


#: How often a screen's check run (``screen.check``) launches each configuration the screen set aside.
CHECK_LAUNCHES = 1
#: The screen's record, which the rounds and the report read.
SCREEN_PATH = "results/screen/screen.json"
#: The micro-benchmark of one setting, beside the plan of the configuration that stands for it.
BENCH_LEAF = "screen_bench.json"


def bench_path(config_name: str, key: str) -> str:
    return f"{layout.plan_dir(config_name, key)}/{BENCH_LEAF}"


def screen_params(config: Mapping[str, Any], plans: Mapping[str, dict], keys: Mapping[str, str]) -> str:
    """screen_grid's params: the settings, the largest error, the groups, the micro-benchmark runs (each with the
    configuration it runs for and its plan key), the baseline (never set aside) and the plans' group keys."""
    own = ScreenSettings.from_config(config)
    if not own.enabled:
        return canonical_json({"enabled": False})  # no job reads it: nothing to compute at every start
    runs = bench_settings(plans, own.settings)
    return canonical_json({
        "settings": list(own.settings), "max_error": own.max_error, "groups": groups(plans, own.settings),
        "runs": [{"config": r["config"], "key": keys[r["config"]], "members": r["members"]} for r in runs],
        "baseline": config.get("baseline"),
        "group_keys": {g: group_key(plans[g], own.settings) for g in groups(plans, own.settings)}})


def screen_bench_inputs(config: Mapping[str, Any], plans: Mapping[str, dict], keys: Mapping[str, str]) -> list[str]:
    """Every micro-benchmark file the screen reads (one per distinct setting)."""
    own = ScreenSettings.from_config(config)
    return [bench_path(r["config"], keys[r["config"]]) for r in bench_settings(plans, own.settings)] \
        if own.enabled else []


def screened_out(path: str) -> list[str]:
    """The configurations the screen set aside (its record at ``path``)."""
    return list(read_json(path).get("set_aside") or [])


def screen_input(config: Mapping[str, Any]) -> dict[str, str]:
    """analyze_sweep's screen (report.json's race.screen), with ``screen.enabled``."""
    return {"screen": SCREEN_PATH} if ScreenSettings.from_config(config).enabled else {}


def report_summaries(names: Sequence[str], config: Mapping[str, Any], screened: Any = None) -> list[str]:
    """The summaries the report reads: every configuration's but those the screen set aside (never launched;
    with ``screen.check`` launched once, and read)."""
    kept = kept_launches(dict.fromkeys(names, 0), config, screened)
    return [layout.summary_path(name) for name in names if name in kept]


def judge_params(params: str, config: Mapping[str, Any], screened: Any = None) -> str:
    """judge_round's params (``round_params``) with the planned launches of the configurations the screen kept
    (the next planned round a judgement names holds no configuration set aside); with ``screen.check``, the
    set-aside ones launched to check the screen, ``outside_race``: measured, never racing."""
    if screened is None or not ScreenSettings.from_config(config).enabled:
        return params
    own = json.loads(params)
    own["launches"] = kept_launches(own["launches"], config, screened)
    if ScreenSettings.from_config(config).check:
        own["outside_race"] = sorted(set(screened()) & set(own["launches"]))  # launched to check, never racing
    return canonical_json(own)
