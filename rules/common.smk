# Validation, the resolved plans, and every named input function the rules use.
# Keep it short: each function is one line that calls specsweep.workflow with
# this workflow's plans or config, given explicitly.
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, workflow.basedir)

# Ctrl-C on the user's console, from here on: one line (what was interrupted, how to resume), no traceback
# (specsweep.workflow.console; before the imports below, which are a good part of Snakemake's first seconds).
from specsweep.workflow.console import Interrupts

INTERRUPTS = Interrupts(sys.stderr).install() if workflow.is_main_process else None

from snakemake.exceptions import IncompleteCheckpointException
from snakemake.logging import logger as snakemake_logger

from specsweep.contracts import layout
from specsweep.workflow import inputs as sw
from specsweep.workflow import round_inputs as sr
from specsweep.workflow.console import quiet_console
from specsweep.workflow.profiles import check_profiles
from specsweep.workflow.stored import (
    burn_in_for,
    launch_file_asked,
    launch_measured,
    launch_moved,
    stale_launch_lines,
)
from specsweep.plan.config import ConfigError, check_files_strict, check_sweep, target_as_configfile
from specsweep.plan.checks import start_findings
from specsweep.plan.cost import config_cost, cost_lines as sweep_cost_lines
from specsweep.plan.design import local_job_slots
from specsweep.plan.resolve import resolve_labels, resolve_sweep_typed

# Snakemake's own console lines: the profile's quiet, and what it prints regardless, off unless --verbose
# (specsweep.workflow.console); only for the user's console, not in a job's own Snakemake.
if workflow.is_main_process:
    quiet_console(snakemake_logger, workflow.output_settings.quiet, workflow.output_settings.verbose,
                  workflow.output_settings.dryrun, sys.argv[1:])

# When this Snakemake started: the closing summary speaks only of a report this run wrote.
STARTED_AT = time.time()
CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

# A target after --configfile is read as one more config file: one line, not a schema error about its keys.
if _target := target_as_configfile(workflow.configfiles):
    raise SystemExit(_target)

# Validated once (schema, then grids expanded, then semantics, with file, key
# path and allowed values in every message), before any job is planned.
# SWEEP.config is the config with every grid replaced by its configurations.
try:
    check_files_strict(workflow.configfiles)
    SWEEP = check_sweep(config, CONFIG_SOURCE)
    # A dataset's selected prompts are kept under results/prompts/ (cached by stat: cheap at every start).
    # TYPED_PLANS: the same plans typed once, for every check below (not a copy per check).
    PLANS, LAUNCHES, TYPED_PLANS = resolve_sweep_typed(SWEEP.config, CONFIG_SOURCE, write_prompts=True)
    # description, expect, variant: for the summary and the report only, never in a plan.
    LABELS = resolve_labels(SWEEP.config)
    # Repeated dataset prompts, a speculative baseline, labels, and the reference engine's own parser
    # (in-process): refused here, so that `snakemake -n` refuses them too (specsweep.plan.checks).
    _problems, _warnings = start_findings(SWEEP.config, PLANS, LABELS, TYPED_PLANS)
    if _problems:
        raise ConfigError(CONFIG_SOURCE, _problems)
    # Every round's design: side by side where every server fits on the host at once (plan.design).
    # A round side by side runs all its launches at once: no more than Snakemake's local workers (--cores + 5);
    # under a cluster executor (Slurm) none: its jobs land on any node at any time.
    DESIGN = sr.measurement_design(SWEEP.config, TYPED_PLANS, CONFIG_SOURCE,
                                   local_job_slots(workflow.resource_settings.cores) if workflow.local_exec else 0)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
for _warning in _warnings:
    print(f"specsweep: warning: {_warning}", file=sys.stderr)

CONFIGS = sorted(PLANS)
# Where each configuration's plan and launches are stored: results/<config>/plans/<key>/ (contracts.layout).
PLAN_KEYS = sw.plan_keys(PLANS)
ROOT = workflow.basedir
# The rounds (specsweep.plan.rounds): what every round's judgement reads, and
# the burn-in's configuration and settings.
ROUND_PARAMS = sr.round_params(SWEEP.config, LABELS, LAUNCHES, PLAN_KEYS)
BURN_IN_CONFIG = sr.burn_in_config(SWEEP.config, CONFIGS)
# Every job's walk of the rounds, memoised for this start (specsweep.workflow.round_inputs.RoundWalk).
ROUND_WALK = sr.RoundWalk(LAUNCHES, SWEEP.config)
# Its params say what it runs for: new in an invocation that measures launches (workflow.stored.burn_in_for).
BURN_IN = sr.burn_in_params(SWEEP.config, burn_in_for(Path("results"), PLAN_KEYS,
                                                     sw.launch_order(SWEEP.config, LAUNCHES), STARTED_AT))
BEST_EXPORTS = sw.best_exports(SWEEP.grids)
# A race's screen (screen.enabled; specsweep.workflow.screen): what its checkpoint is given.
SCREEN_PARAMS = sr.screen_params(SWEEP.config, PLANS, PLAN_KEYS)
# What the sweep will cost (launches, requests, a guessed time), said at every start, `snakemake -n` included.
if workflow.is_main_process:
    _cost, _cost_warnings = sweep_cost_lines(config_cost(SWEEP.config, PLANS, LAUNCHES))
    print(f"specsweep: {_cost}", file=sys.stderr)
    for _warning in _cost_warnings:
        print(f"specsweep: warning: {_warning}", file=sys.stderr)
    # A download of gigabytes said before it starts (its job's own banner is off on the quiet console).
    if _build := sw.parser_env_build_line(PLANS, config):
        print(f"specsweep: {_build}", file=sys.stderr)
# A summarized launch of a current plan with a file deleted: Snakemake would not notice (specsweep.workflow.stored).
if workflow.is_main_process:
    for _line in stale_launch_lines(Path("results"), PLAN_KEYS, sw.launch_order(SWEEP.config, LAUNCHES)):
        print(f"specsweep: warning: {_line}", file=sys.stderr)
# The same for every summary: a value, not a function Snakemake calls per job.
AGREEMENT = sw.agreement_params(config)
# A launch's files that benchmark_server writes beside its declared outcome.json (rule launch_file).
LAUNCH_OTHER_FILES = "|".join(re.escape(leaf) for kind, leaf in layout.LAUNCH_FILES.items() if kind != sw.LAUNCH_EDGE)


wildcard_constraints:
    config="[a-z0-9_-]+",
    image="[a-z0-9_-]+",
    launch=layout.LAUNCH_ID_RE,
    plan=layout.PLAN_KEY_RE,


def configuration(wildcards):
    # The {config} wildcard, known to the loaded config files, and the {plan} wildcard (where a rule has
    # one), its current plan's key (else a one-line message, no traceback).
    name = sw.configuration_name(PLANS, wildcards.config, workflow.configfiles, ROOT)
    return sw.check_plan_key(PLAN_KEYS, name, getattr(wildcards, "plan", None))


def current_plan_file(wildcards):
    # results/<config>/{plan,preflight}.json: a copy of the current plan's stored file.
    name = configuration(wildcards)
    return f"{layout.plan_dir(name, PLAN_KEYS[name])}/{wildcards.what}.json"


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


def launch_gpus(wildcards):
    return sr.launch_gpus(DESIGN, sw.gpus_of(PLANS, configuration(wildcards)))


def judgement_of(round_no):
    # Round r's judgement: a checkpoint, so the DAG stops here until it is written.
    return checkpoints.judge_round.get(round=round_no).output[0]


def screened_out():
    # The configurations the screen set aside: a checkpoint, so the DAG stops here until it is written.
    return sr.screened_out(checkpoints.screen_grid.get().output[0])


def rounds_upto(round_no=None):
    return ROUND_WALK.walk(judgement_of, round_no, screened_out)


def screen_benches(wildcards):
    return sr.screen_bench_inputs(SWEEP.config, PLANS, PLAN_KEYS)


def screen_input(wildcards):
    return sr.screen_input(SWEEP.config)


def report_summaries(wildcards):
    return unless_pending(lambda: sr.report_summaries(CONFIGS, SWEEP.config, screened_out))


def judge_params(wildcards):
    return sr.judge_params(ROUND_PARAMS, SWEEP.config, screened_out)


def launch_round(wildcards):
    return sr.round_of_launch(LAUNCHES, wildcards.launch, SWEEP.config, configuration(wildcards))


def moved_launch_input(wildcards):
    return launch_moved(PLAN_KEYS, configuration(wildcards), wildcards.launch, wildcards.leaf)


def launch_file_input(wildcards):
    return launch_file_asked(configuration(wildcards), wildcards.plan, wildcards.launch, wildcards.leaf)


def launch_priority(wildcards):
    r = launch_round(wildcards)
    return sr.launch_priority_in(rounds_upto(r), SWEEP.config, configuration(wildcards), wildcards.launch, r)


def launch_inputs(wildcards):
    # One input function per launch job, not three (Snakemake's cost is per function and job): the image's
    # manifest and the selected prompts (lists, maybe empty); the burn-in before a planned round, ancient() once
    # the launch is measured: a burn-in run again for other launches reruns no launch measured already
    # (burn_in_for); side by side only, the round's plan, ancient() (round_inputs.round_plan_input says why).
    r = launch_round(wildcards)
    name = configuration(wildcards)
    burn_in = sr.burn_in_input(BURN_IN_CONFIG, r, LAUNCHES)
    if burn_in and launch_measured(name, wildcards.plan, wildcards.launch):
        burn_in = {k: ancient(v) for k, v in burn_in.items()}
    waits = {k: ancient(v) for k, v in sr.round_plan_input(DESIGN, r).items()}
    return sw.server_inputs(PLANS, name) | burn_in | waits


# A launch's threads and `server` slots: one value per start (its design), not a function per job.
LAUNCH_THREADS = sr.launch_threads(DESIGN)
SERVER_SLOTS = sr.server_slots(DESIGN)
# A launch's `gpu` slots and a preflight's parser and image: per configuration, a value where every
# configuration has the same (a grid's members mostly do), not a function per job (sw.same_for_all).
LAUNCH_GPUS = sw.same_for_all({n: sr.launch_gpus(DESIGN, sw.gpus_of(PLANS, n)) for n in CONFIGS}, launch_gpus)
PREFLIGHT_PARSER = sw.same_for_all({n: sw.preflight_parser_input(PLANS, config, n) for n in CONFIGS},
                                   preflight_parser_input)
PREFLIGHT_IMAGE = sw.same_for_all({n: sw.config_image_spec_json(PLANS, config, n) for n in CONFIGS},
                                  config_image_spec_json)


def previous_judgement(wildcards):
    return sr.previous_judgement(int(wildcards.round))


def round_plan_params(wildcards):
    r = int(wildcards.round)
    return sr.round_plan_params(SWEEP.config, rounds_upto(r), r, DESIGN)


def judge_inputs(wildcards):
    r = int(wildcards.round)
    return unless_pending(lambda: sr.judge_inputs(rounds_upto(r), r, BURN_IN_CONFIG is not None, PLAN_KEYS),
                          named=True)


def round_members_params(wildcards):
    return sw.canonical_json(rounds_upto(int(wildcards.round)))


def burn_in_inputs(wildcards):
    return sr.burn_in_inputs(PLANS, BURN_IN_CONFIG)


def burn_in_gpus(wildcards):
    return sw.gpus_of(PLANS, BURN_IN_CONFIG)


def summary_inputs(wildcards):
    name = configuration(wildcards)
    # A judgement not written yet: the summary waits for it, as Snakemake makes it wait (checkpoint_pending).
    return unless_pending(lambda: sw.summary_edges(ROUND_WALK.schedule(rounds_upto()), name, PLAN_KEYS)
                          | sw.baseline_edges(config, name, PLAN_KEYS))


def unless_pending(inputs, named=False):
    # An input function's ``inputs()``, or, when a checkpoint not yet written stops it (the screen, a
    # judgement), checkpoint_pending's input (as {"pending": ...} for a function given to unpack()).
    try:
        return inputs()
    except IncompleteCheckpointException as exc:
        return {"pending": checkpoint_pending(exc)} if named else checkpoint_pending(exc)


def checkpoint_pending(exc):
    # What every input function that walks the rounds or reads the screen returns when a checkpoint stops it.
    # What Snakemake makes of an input function stopped by a checkpoint not yet written: the checkpoint's
    # output as the only input, flagged as its target, so that the job is evaluated again once it is written
    # (snakemake 9.27.1 rules.py:702-704 apply_input_function, rules.py:881-884, dag.py:2235-2263
    # update_checkpoint_dependencies). Returned rather than raised: Snakemake also re-evaluates, in a second
    # pass over the whole DAG, every job whose input function raised it (dag.py:1899-1911 and 1984-1993, meant
    # for group ids): for 500 summaries, about 30 % of a nothing-built `snakemake -n`, for the same inputs.
    # A judgement not on disk (a round a larger budget continues, after the last one judged) is returned
    # unflagged: Snakemake skips every rerun check of a job with a checkpoint target among its inputs
    # (dag.py:1518-1560, "reevaluated in a second pass"), and reruns a job only from a job that must run
    # (dag.py:1632-1668), so an existing summary would never wait for the new round, nor its launches run.
    # Unflagged, the changed set of inputs reruns the summary, and the round's jobs with it.
    target = exc.targetfile
    return [target if os.path.exists(target) else str(target)]


def report_round_files(wildcards):
    return unless_pending(lambda: sr.round_files(rounds_upto()), named=True)


def summary_labels(wildcards):
    return sw.summary_labels(LABELS, configuration(wildcards))


def report_params(wildcards):
    return sw.report_params(SWEEP.config, LABELS, CONFIGS, SWEEP.grids, design=DESIGN)


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


def jobs_start():
    """onstart: a Ctrl-C from now on stops running jobs."""
    if INTERRUPTS is not None:
        INTERRUPTS.started()


def closing_summary():
    """onsuccess: what to deploy, the controls and verdicts, the report's paths (from report.json)."""
    # Imported here: the report's modules cost about 0.2 s, at every start, for a summary said once a run succeeded.
    from specsweep.workflow.closing import print_closing

    print_closing(Path("results"), STARTED_AT, BEST_EXPORTS, sys.stderr)


def check_workflow_profiles():
    """Once the rules exist, the profiles this run uses (keys Snakemake would drop, resource typos)."""
    try:
        check_profiles(Path(workflow.basedir), [each.name for each in workflow.rules], sys.argv[1:])
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None
