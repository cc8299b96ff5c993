# specsweep: which communication setup makes speculative decoding pay.
#
# The Snakefile only wires; the logic lives in the `specsweep` package.
#
# Path grammar of results/ (one directory per configuration name):
#   results/<config>/plan.json        resolved launch plan (argv, env, engine, image, workload)
#   results/<config>/preflight.json   the plan parsed by the engine's own argument parser
#   results/<config>/launch.json      launch record: final argv, readiness time, provenance
#   results/<config>/server.log       the server's own log
#   results/<config>/nccl/nccl.<host>.<pid>.log  NCCL's log, one file per server process (NCCL_DEBUG_FILE)
#   results/<config>/warmup.jsonl     raw records of warmup requests
#   results/<config>/requests.jsonl   raw records of measured requests
#   results/<config>/outcome.json     how the server job ended (ok, or failed: stage, reason, log tail)
#   results/<config>/allreduce_bench.json  all-reduce micro-benchmark before launch ({"enabled": false} unless profile.enabled)
#   results/<config>/profile.json     profiling stage after the measured repeats (same rule)
#   results/<config>/profile/*-TP-<rank>*.trace.json.gz, profile/requests.jsonl   its traces and requests
#   results/<config>/summary.json     metrics, status and provenance of one configuration
#   results/images/<image>.json       manifest of a built image (id, content-addressed tag)
#   results/summary.csv, results/report.md, results/plots/*.png   the cross-configuration report
#   results/<config>/logs/<rule>.log  each job's log
#   results/<config>/logs/host_guard.jsonl  the host samples taken while the server ran (load, other servers)
# Every file of one server job (launch.json, server.log, *.jsonl, outcome.json) carries the same run_id.
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the default; `--configfile other.yaml` replaces it rather than
# being merged into it, so a GPU matrix never inherits the CPU configurations.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/plan.smk"
include: "rules/preflight.smk"
include: "rules/images.smk"
include: "rules/benchmark.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        "results/summary.csv",
        "results/report.md",
