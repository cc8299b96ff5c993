rule make_parser_env:
    input:
        "envs/sglang-parser.txt",
    output:
        "{parser_env}/ready.json",
    log:
        "{parser_env}/make_parser_env.log",
    # pip needs the package index: the submit host reaches it, a node may not.
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/make_parser_env.py"


rule preflight_config:
    input:
        plan="results/{config}/plans/{plan}/plan.json",
        parser=PREFLIGHT_PARSER,
    output:
        "results/{config}/plans/{plan}/preflight.json",
    params:
        image=PREFLIGHT_IMAGE,
    log:
        "results/{config}/plans/{plan}/logs/preflight_config.log",
    # Before any image build or launch: a typo must not cost a build or a GPU hour
    # (nor a queue wait: it runs on the submit host).
    priority: 100
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/preflight_config.py"


rule preflight:
    input:
        expand("results/{config}/preflight.json", config=CONFIGS),
    localrule: True
