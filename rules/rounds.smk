# The rounds of the sweep (specsweep.plan.rounds; docs/design.md, "Rounds"):
# a burn-in before the first measured launch, then round by round: the
# round's plan (design and seeded order), its launch jobs (rules/benchmark.smk),
# and a judgement that recomputes the verdicts and either plans the next round
# or ends the sweep. The judgement is a checkpoint: the next round's jobs exist
# only once it is written, so `-n` shows one round ahead and a launch once
# measured is never rerun by a later round.


# Unmeasured launches of the baseline until its decode rate is steady from one
# unit to the next (specsweep.workflow.burnin); never part of a verdict. It
# runs again, first, in an invocation that measures launches of the planned
# rounds (its params: specsweep.workflow.stored.burn_in_for); the launches
# wait for it through an ancient() edge, so that it reruns none measured already.
rule burn_in_host:
    input:
        unpack(burn_in_inputs),
    output:
        # what the planned rounds' launches wait for; and its copy, which round 1's judgement reads (a
        # judgement that reruns alone, e.g. after a switch of config files, launches no burn-in)
        burn_in="results/rounds/burn-in.json",
        record="results/rounds/burn-in-record.json",
    params:
        settings=BURN_IN,
    log:
        "results/rounds/logs/burn_in_host.log",
    benchmark:
        "results/rounds/logs/burn_in_host.tsv"
    resources:
        gpu=burn_in_gpus,
        server=1,
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/burn_in_host.py"


# The round's design and order (results/rounds/round-<r>/plan.json), after the
# judgement of the round before.
rule plan_round:
    input:
        previous_judgement,
    output:
        "results/rounds/round-{round}/plan.json",
    params:
        plan=round_plan_params,
    log:
        "results/rounds/logs/plan_round-{round}.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/plan_round.py"


# The verdicts after the round, and whether another round runs.
checkpoint judge_round:
    input:
        unpack(judge_inputs),
    output:
        "results/rounds/round-{round}/judgement.json",
    params:
        sweep=judge_params,
        members=round_members_params,
    log:
        "results/rounds/logs/judge_round-{round}.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/judge_round.py"
