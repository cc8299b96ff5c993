# specsweep: which communication setup makes speculative decoding pay.
#
# The Snakefile only wires; the logic lives in the `specsweep` package.
#
# Path grammar of results/ (docs/design.md: "Units of measurement"; the package
# builds these paths in specsweep/contracts/layout.py). A configuration (one per
# entry, or per combination of a grid's axes) has one plan, stored under the
# plan's key (<plan>: 12 hex digits of the sha256 of its canonical JSON); it runs
# in one or more launches (<launch> = 1, 2, ..., or aa: the A/A control, the
# baseline launched again in round 1; with rounds.first_round_baseline, also the
# baseline's 1b, 1c, ... in round 1); launch r runs in round r;
# a launch measures every workload point (<point>) of the plan against one server.
# A launch belongs to its plan: a config file that gives a configuration of the
# same name another plan stores that plan beside it, and switching back finds
# the first plan's launches again (nothing relaunches). The summary reads the
# launches of the current plan:
#   results/<config>/plan.json, preflight.json        the current plan and its preflight (copies of the stored ones)
#   results/<config>/summary.json                     metrics, status, provenance: one section per point,
#                                                     each pooling the current plan's launches
#   results/<config>/plans/<plan>/plan.json           resolved launch plan (argv, env, engine, image, workload, points)
#   results/<config>/plans/<plan>/preflight.json      the plan parsed by the engine's own argument parser
#   results/<config>/plans/<plan>/launch-<launch>/    one launch, below as <L>:
#   <L>/launch.json                                   launch record: final argv, readiness time, provenance
#   <L>/server.log                                    the server's own log
#   <L>/nccl/nccl.<host>.<pid>.log                    NCCL's log, one file per server process (NCCL_DEBUG_FILE)
#   <L>/warmup.jsonl                                  raw records of warmup requests, every point (record.point)
#   <L>/requests.jsonl                                raw records of measured requests, every point
#   <L>/outcome.json                                  how the launch ended, per point (ok, or failed: stage, reason, log tail)
#                                                     written last: benchmark_server declares it alone, writes the rest
#   <L>/logs/benchmark_server.{log,tsv}
#   <L>/allreduce_bench.json                          all-reduce micro-benchmark before the launch ({"enabled": false} unless profile.enabled)
#   <L>/profile.json                                  profiling stage after the launch's points (same rule)
#   <L>/profile/*-TP-<rank>*.trace.json.gz, profile/requests.jsonl   its traces and requests
#   <L>/logs/host_guard.jsonl                         the host samples taken while the server ran (load, other servers)
#   results/images/<image>.json                       manifest of a built image (id, content-addressed tag)
#   results/report.json                               the answer of the sweep, computed once (docs/report-json.md)
#   results/summary.csv, results/report.md, results/plots/*.png   its views (a figure only when it has data)
#   results/report_landing.html, report_page.html, summary.html   the same views for snakemake --report
#   results/best/<grid>.{env,nccl-tuner.csv,json}     each grid's winner, as files to apply, and its evidence
#   results/<config>/plans/<plan>/screen_bench.json   a race's screen: the micro-benchmark of this plan's communication setting
#   results/screen/screen.json                        the screen: each configuration's predicted step, the margin, what is set aside
#   results/rounds/round-<r>/plan.json                round r's design and seeded order (launch r of each configuration)
#   results/rounds/round-<r>/judgement.json           the verdicts after round r, and whether another round runs
#   results/rounds/burn-in.json, burn-in/unit-<k>/    the burn-in before round 1 and its units' files
#   results/rounds/burn-in-record.json                its lasting copy, which round 1's judgement reads
#   results/<config>/logs/<rule>.log, plans/<plan>/logs/<rule>.log   the other jobs' logs
# Every file of one launch (launch.json, server.log, *.jsonl, outcome.json) carries the same run_id,
# one per launch: a summary pools several runs, one per launch, never two runs in one launch directory.
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the default; `--configfile other.yaml` replaces it rather than
# being merged into it, so a GPU matrix never inherits the CPU configurations.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


# The HTML report's first screen (snakemake --report): the answer, as report.md words it.
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/plan.smk"
include: "rules/preflight.smk"
include: "rules/screen.smk"
include: "rules/rounds.smk"
include: "rules/images.smk"
include: "rules/benchmark.smk"
include: "rules/report.smk"


# Before the first job: what a Ctrl-C says from now on.
onstart:
    jobs_start()


# After a run that wrote the report: a few lines on the console, a view of
# results/report.json (what to deploy, the controls and the verdicts, where the report is).
onsuccess:
    closing_summary()


rule all:
    default_target: True
    input:
        "results/summary.csv",
        "results/report.md",
        BEST_EXPORTS,


# The profiles this run uses, now that every rule exists: a mapping key
# Snakemake would drop (`set-resource:`), resource names nobody reads
# (`slurm_partiton`), rules that do not exist (specsweep.workflow.profiles).
check_workflow_profiles()
