rule benchmark_server:
    input:
        plan="results/{config}/plan.json",
        preflight="results/{config}/preflight.json",
        image=image_manifest_input,
        prompts=prompts_input,
    output:
        launch="results/{config}/launch.json",
        server_log="results/{config}/server.log",
        warmup="results/{config}/warmup.jsonl",
        requests="results/{config}/requests.jsonl",
        outcome="results/{config}/outcome.json",
        # NCCL_DEBUG_FILE per process (line-buffered; survives a killed container)
        nccl_logs=directory("results/{config}/nccl"),
        profile="results/{config}/profile.json",
        allreduce_bench="results/{config}/allreduce_bench.json",
    log:
        "results/{config}/logs/benchmark_server.log",
    benchmark:
        "results/{config}/logs/benchmark_server.tsv"
    resources:
        gpu=gpus_of,
        server=1,
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/benchmark_server.py"


rule summarize_config:
    input:
        # The output-agreement check compares with the baseline's outputs (none for the baseline itself).
        unpack(baseline_inputs),
        plan="results/{config}/plan.json",
        launch="results/{config}/launch.json",
        server_log="results/{config}/server.log",
        warmup="results/{config}/warmup.jsonl",
        requests="results/{config}/requests.jsonl",
        outcome="results/{config}/outcome.json",
        nccl_logs="results/{config}/nccl",
        profile="results/{config}/profile.json",
        allreduce_bench="results/{config}/allreduce_bench.json",
    output:
        "results/{config}/summary.json",
    params:
        agreement=agreement_params,
        # variant only (the log must prove it): relabelling reruns this and the report, no server.
        labels=summary_labels,
    log:
        "results/{config}/logs/summarize_config.log",
    # Seconds of arithmetic on files: on a cluster, not worth a queue wait.
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/summarize_config.py"
