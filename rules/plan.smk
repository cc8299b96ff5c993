rule resolve_plan:
    output:
        "results/{config}/plan.json",
    params:
        plan=plan_json,
    log:
        "results/{config}/logs/resolve_plan.log",
    localrule: True
    priority: 100
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/resolve_plan.py"
