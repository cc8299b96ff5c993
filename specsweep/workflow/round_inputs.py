"""Rule inputs and params of the rounds, the burn-in and a race's screen: what ``rules/common.smk``'s named
input functions of ``rules/rounds.smk``, ``rules/screen.smk`` and the launches return.

The other rule inputs (plans, preflight, images, summaries, the report) are ``workflow.inputs``'; as there,
each function takes the config, the plans or the launches and one wildcard value explicitly, and the module
stays light (imported at every Snakemake start).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from specsweep.contracts import layout
from specsweep.contracts.layout import LAUNCH_FILES, launch_dir
from specsweep.files import canonical_json, read_json
from specsweep.plan import rounds as plan_rounds
from specsweep.plan.config import ConfigError, schema_default
from specsweep.plan.controls import control_params
from specsweep.plan.design import DesignError, choose_design
from specsweep.plan.rounds import RoundSettings
from specsweep.plan.screen import ScreenSettings, bench_settings, group_key, groups
from specsweep.workflow import rounds as rounds_mod
from specsweep.workflow.inputs import LAUNCH_EDGE, plan_key, schedule_of_rounds, server_inputs

# ------------------------------------------------------------------ rounds (plan.rounds, workflow.rounds)


def round_params(config: Mapping[str, Any], labels: Mapping[str, dict], launches: Mapping[str, int],
                 keys: Mapping[str, str]) -> str:
    """What every round's judgement reads besides the launches: the baseline, the controls, the
    effect to resolve, the planned launches, the rounds' settings but the budget (``RoundSettings.tracked``:
    the script reads it from the config), each configuration's labels and the key of its current plan (whose
    launches it judges)."""
    effect = config.get("smallest_effect")
    return canonical_json({
        "baseline": config.get("baseline"), "aa_control": bool(config.get("aa_control", True)),
        "positive_control": control_params(config),
        "smallest_effect": effect if effect is not None else schema_default("smallest_effect"),
        "launches": dict(launches), "rounds": RoundSettings.from_config(config).tracked(),
        "labels": {name: {k: own[k] for k in ("variant", "expect", "expect_signature")}
                   for name, own in labels.items()},
        "expects": {name: own["expect"] for name, own in labels.items()},
        "plans": dict(keys),
    })


def round_plan_params(config: Mapping[str, Any], rounds: Sequence[Sequence[tuple[str, str]]], round_no: int,
                      design: tuple[str, str]) -> str:
    """plan_round's params: the round's members (``rounds``: ``workflow.rounds.walk_rounds`` up to it),
    the design and the settings but the budget (its seed; ``RoundSettings.tracked``)."""
    members = rounds_mod.members_of_round(rounds, round_no)
    if not members:
        raise ValueError(f"round {round_no} is not part of this sweep: it has {len(rounds)} rounds so far")
    return canonical_json({"round": round_no, "members": [list(m) for m in members], "design": design[0],
                           "why": design[1], "settings": RoundSettings.from_config(config).tracked()})


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


def judge_inputs(rounds: Sequence[Sequence[tuple[str, str]]], round_no: int, burn_in: bool,
                 keys: Mapping[str, str]) -> dict[str, list[str]]:
    """judge_round's inputs: the current plan and the outcome.json of every launch of rounds 1..round_no (of
    the current plans: ``keys``), and the burn-in's record after round 1. It reads every file of those launches
    (``workflow.rounds.judge_round``: each summary as summarize_config builds it); the outcome.json, written
    last, stands for them as summarize_config's does (``workflow.inputs.LAUNCH_EDGE``). Every summary waits for
    the judgement, and Snakemake looks for the summary's file in the judgement's inputs once per summary
    (snakemake 9.27.1 dag.py:1192, a list scan): 500 summaries x 8 files of 1,000 launches were 4.3 M
    comparisons at every start."""
    members = [m for r in rounds[:round_no] for m in r]
    leaf = LAUNCH_FILES[LAUNCH_EDGE]
    out: dict[str, list[str]] = {"plans": sorted({layout.plan_path(name) for name, _ in members}),
                                 LAUNCH_EDGE: [f"{launch_dir(name, keys[name], lid)}/{leaf}" for name, lid in members]}
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
    settings = RoundSettings.from_config(config)
    return rounds_mod.walk_rounds(kept_launches(launches, config, screened), config.get("baseline"),
                                  bool(config.get("aa_control", True)), judgement_of, upto,
                                  settings.max_launches is not None, settings=settings)


class RoundWalk:
    """``walk_rounds`` for one Snakemake start, where every launch, summary and judgement job asks for the
    rounds: a walk must not cost a pass over every configuration, or N jobs cost N x N. The planned rounds'
    members are computed once (per set of configurations a race's screen set aside), a judgement is read
    once per path, size and mtime (one written again is read again), and a walk's launch ids per
    configuration (``schedule``) once per distinct walk. Same answers as ``walk_rounds``."""

    def __init__(self, launches: Mapping[str, int], config: Mapping[str, Any]):
        self.launches = dict(launches)
        self.config = config
        #: Every configuration, by name (``rules/common.smk``'s CONFIGS: the plans' names, as ``launches``').
        self.names = sorted(self.launches)
        self._screen = ScreenSettings.from_config(config).enabled
        self._settings = RoundSettings.from_config(config)
        self._extra = self._settings.max_launches is not None
        self._planned: dict[frozenset[str] | None, tuple[dict[str, int], dict[int, list[tuple[str, str]]]]] = {}
        self._judgements: dict[tuple[str, int, int], dict] = {}
        self._schedules: dict[tuple, dict[str, list[str]]] = {}

    def walk(self, judgement_of: Any, upto: int | None = None, screened: Any = None) -> list[list[tuple[str, str]]]:
        """``walk_rounds(launches, config, judgement_of, upto, screened)``."""
        aside = frozenset(screened()) if screened is not None and self._screen else None
        if aside not in self._planned:
            kept = kept_launches(self.launches, self.config, None if aside is None else (lambda: aside))
            self._planned[aside] = (kept, {})
        kept, planned = self._planned[aside]
        baseline, aa = self.config.get("baseline"), bool(self.config.get("aa_control", True))

        def planned_of(round_no: int) -> list[tuple[str, str]]:
            if round_no not in planned:
                planned[round_no] = plan_rounds.planned_members(kept, baseline, aa, round_no,
                                                                self._settings.first_round_baseline)
            return list(planned[round_no])  # a copy (of references): a caller's change cannot reach the memo

        return rounds_mod.walk_rounds(kept, baseline, aa, judgement_of, upto, self._extra, planned_of,
                                      self._judgement, self._settings)

    def _judgement(self, path: str) -> dict:
        try:
            st = os.stat(path)
        except OSError:
            return read_json(path)  # its own error, as walk_rounds reads it
        key = (path, st.st_mtime_ns, st.st_size)
        if key not in self._judgements:
            self._judgements[key] = read_json(path)
        return self._judgements[key]

    def schedule(self, rounds: Sequence[Sequence[tuple[str, str]]]) -> dict[str, list[str]]:
        """``workflow.inputs.schedule_of_rounds(rounds, names)``, once per distinct ``rounds`` (do not change it)."""
        key = tuple(tuple(members) for members in rounds)
        if key not in self._schedules:
            self._schedules[key] = schedule_of_rounds(rounds, self.names)
        return self._schedules[key]


def kept_launches(launches: Mapping[str, int], config: Mapping[str, Any], screened: Any = None) -> dict[str, int]:
    """The planned launches of every configuration the screen kept (all of them without ``screen.enabled``);
    with ``screen.check``, each one it set aside is launched once anyway: launch 1, in round 1, so never a
    survivor of a race (a race's survivors are the configurations of the round just judged, from round 2 on;
    a judgement names it ``outside_race``, ``judge_params``, for a race with one planned round)."""
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


def measurement_design(config: Mapping[str, Any], plans: Mapping[str, Any], source: str = "config",
                       job_slots: int | None = None) -> tuple[str, str]:
    """(design, why) of every round: ``rounds.design``, ``auto`` decided by what fits on the host at once
    (``plan.design.choose_design``); a side-by-side request that cannot be is a ``ConfigError``.
    ``job_slots``: the jobs Snakemake runs at once (``plan.design.local_job_slots``; 0 under a cluster
    executor), which a round's launches side by side must not outnumber. ``plans``: plan objects or typed plans."""
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


def launch_gpus(design: tuple[str, str], gpus: int) -> int:
    """The ``gpu`` resource a launch job claims: its plan's GPUs, one at a time; side by side, none: the round's
    servers share one GPU by design (``plan.design`` checked that they fit), and the profile's ``gpu: 8`` would
    otherwise run a round of 17 in waves of 8 (on an H100: the second wave started as the first ended)."""
    return 0 if design[0] == plan_rounds.SIDE_BY_SIDE else gpus


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
