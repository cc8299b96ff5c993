# One server job per (configuration, launch) of the configuration's current plan
# (results/<config>/plans/<plan>/: a launch belongs to its plan): launch, readiness, every
# workload point of the plan, teardown. Launch r belongs to round r (the A/A
# control to the last planned round; rules/rounds.smk): a round starts once
# the round before is judged, and within it the launches run in the round's
# seeded order, given as job priorities (an ordering edge between two
# configurations would also be a rerun edge). Side by side, the round's jobs
# run at once (threads 0, no `server` slot) and take turns at measuring.
rule benchmark_server:
    input:
        # the image's manifest (docker runtime), the selected prompts (datasets): lists, maybe empty;
        # the burn-in before round 1 (ancient: rules/common.smk): every planned round waits for it, none for extra
        # rounds or when off; the round's plan, side by side only (a sequential launch's order is its job priority)
        unpack(launch_inputs),
        plan="results/{config}/plans/{plan}/plan.json",
        preflight="results/{config}/plans/{plan}/preflight.json",
    output:
        # Written last, after every other file of the launch (contracts.layout.LAUNCH_FILES: launch.json,
        # server.log, warmup.jsonl, requests.jsonl, nccl/, profile.json, allreduce_bench.json), which the job
        # writes beside it: it removes an earlier attempt's before the launch and fails naming any missing after
        # it, as Snakemake does for a declared output (specsweep.workflow.jobs.benchmark_server). Seven more
        # declared files per launch cost every start about 7,000 lookups on a 500-configuration grid.
        outcome="results/{config}/plans/{plan}/launch-{launch}/outcome.json",
    log:
        "results/{config}/plans/{plan}/launch-{launch}/logs/benchmark_server.log",
    benchmark:
        "results/{config}/plans/{plan}/launch-{launch}/logs/benchmark_server.tsv"
    priority: launch_priority
    threads: LAUNCH_THREADS
    resources:
        gpu=LAUNCH_GPUS,
        server=SERVER_SLOTS,
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/benchmark_server.py"


# A launch's file asked for where launches were stored before they belonged to their plan
# (results/<config>/launch-<n>/...): its input function stops the run with one line naming
# the path under the current plan, instead of Snakemake's "No rule to produce". It never runs.
rule moved_launch_file:
    input:
        moved_launch_input,
    output:
        "results/{config}/launch-{launch}/{leaf}",
    log:
        "results/{config}/logs/moved_launch_file/launch-{launch}/{leaf}.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    shell:
        "exit 1"


# A launch's other file asked for as a target (results/<config>/plans/<plan>/launch-<n>/server.log, ...):
# benchmark_server declares its outcome.json alone; the input function stops the run with one line naming
# that target, instead of Snakemake's "No rule to produce". It never runs.
rule launch_file:
    input:
        launch_file_input,
    output:
        "results/{config}/plans/{plan}/launch-{launch}/{leaf}",
    wildcard_constraints:
        leaf=LAUNCH_OTHER_FILES,
    log:
        "results/{config}/plans/{plan}/logs/launch_file/launch-{launch}/{leaf}.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    shell:
        "exit 1"


# One summary per configuration: every launch, every point (a section each).
rule summarize_config:
    input:
        # the current plan (results/{config}/plan.json), then the outcome.json of each launch of that plan, in
        # run order: written last by its launch, it stands for the launch's files, which the script reads
        # (specsweep.workflow.inputs.summary_edges); and the baseline's plan and first launch (its requests),
        # which the output-agreement check compares with (none for the baseline itself)
        unpack(summary_inputs),
    output:
        "results/{config}/summary.json",
    params:
        agreement=AGREEMENT,
        # variant, expect, expect_signature: relabelling reruns this and the report, no server.
        labels=summary_labels,
    log:
        "results/{config}/logs/summarize_config.log",
    # Seconds of arithmetic on files: on a cluster, not worth a queue wait.
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/summarize_config.py"
