rule analyze_sweep:
    input:
        # every round's plan and judgement: the design, the order that ran, what ended the rounds
        unpack(report_round_files),
        summaries=expand("results/{config}/summary.json", config=CONFIGS),
    output:
        # The answer, computed once: every view below renders it (docs/report-json.md).
        report="results/report.json",
    params:
        report=report_params,
    log:
        "results/logs/analyze_sweep.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/analyze_sweep.py"


rule render_report:
    input:
        report="results/report.json",
    output:
        csv=report("results/summary.csv", caption="../report/summary.rst", category="Summary"),
        md=report("results/report.md", caption="../report/report_md.rst", category="Summary"),
        # A figure only when it has data (report.md lists the rest and why): the directory is the output.
        plots=report(directory("results/plots"), patterns=["{figure}.png"], caption="../report/plots.rst",
                     category="Plots", labels={"figure": "{figure}"}),
        # The winner of each grid as files a user can apply (env, NCCL tuner CSV) and its evidence.
        best=BEST_EXPORTS,
    log:
        "results/logs/render_report.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/render_report.py"
