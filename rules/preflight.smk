rule make_parser_env:
    input:
        "envs/sglang-parser.txt",
    output:
        "{parser_env}/ready.json",
    log:
        "{parser_env}/make_parser_env.log",
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/make_parser_env.py"


def preflight_parser_input(wildcards):
    """What preflight parses with: the parser venv (ready.json), or, with
    `preflight_parser: image`, the SGLang plan's own image (its manifest):
    exactly what will run, at the cost of building the image first."""
    plan = PLANS[wildcards.config]
    if config.get("preflight_parser", "venv") == "image" and plan["engine"] == "sglang" and plan.get("image"):
        return f"results/images/{plan['image']}.json"
    return parser_env_input(wildcards)


rule preflight_config:
    input:
        plan="results/{config}/plan.json",
        parser=preflight_parser_input,
    output:
        "results/{config}/preflight.json",
    params:
        image=image_spec_json,
    log:
        "results/{config}/logs/preflight_config.log",
    # Before any image build or launch: a typo must not cost a build or a GPU hour.
    priority: 100
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/preflight_config.py"


rule preflight:
    input:
        expand("results/{config}/preflight.json", config=CONFIGS),
    localrule: True
