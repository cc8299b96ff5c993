# A race's screen by the cost model, before any server launch (specsweep.workflow.screen;
# docs/design.md, "A race"): the all-reduce micro-benchmark once per distinct communication
# setting (`screen.settings`), then a checkpoint whose set-aside list every round reads, so
# round 1 holds only the configurations kept. Off unless `screen.enabled`: nothing asks for them.


# The micro-benchmark of one setting, run for the configuration that stands for it, with no
# server up (the host lock, one `server` slot).
rule bench_setting:
    input:
        # the image's manifest (docker runtime), the selected prompts: lists, maybe empty
        unpack(server_inputs),
        plan="results/{config}/plans/{plan}/plan.json",
        preflight="results/{config}/plans/{plan}/preflight.json",
    output:
        "results/{config}/plans/{plan}/screen_bench.json",
    log:
        "results/{config}/plans/{plan}/logs/bench_setting.log",
    benchmark:
        "results/{config}/plans/{plan}/logs/bench_setting.tsv"
    resources:
        gpu=gpus_of,
        server=1,
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/bench_setting.py"


# The screen: every configuration's predicted step, the margin (the cost model's error on this
# host, from the configurations measured so far) and what is set aside.
checkpoint screen_grid:
    input:
        screen_benches,
    output:
        "results/screen/screen.json",
    params:
        screen=SCREEN_PARAMS,
    log:
        "results/screen/logs/screen_grid.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/screen_grid.py"
