# One plan of a configuration, stored under its key (results/<config>/plans/<plan>/, contracts.layout):
# a config file that resolves another plan for the name writes another directory, so the launches of
# this one are kept, and found again by a config file that resolves it.
rule resolve_plan:
    output:
        "results/{config}/plans/{plan}/plan.json",
    params:
        plan=plan_json,
    log:
        "results/{config}/plans/{plan}/logs/resolve_plan.log",
    localrule: True
    priority: 100
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/resolve_plan.py"


# results/<config>/plan.json and preflight.json: copies of the current plan's, which the summary reads
# (its launches are that plan's). Switching config files copies again; nothing relaunches.
rule select_plan:
    input:
        current_plan_file,
    output:
        "results/{config}/{what}.json",
    wildcard_constraints:
        what="plan|preflight",
    log:
        "results/{config}/logs/select_plan-{what}.log",
    localrule: True
    priority: 100
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/select_plan.py"
