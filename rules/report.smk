rule render_report:
    input:
        # every round's plan and judgement: the design, the order that ran, what ended the rounds
        unpack(report_round_files),
        summaries=expand("results/{config}/summary.json", config=CONFIGS),
    output:
        csv=report("results/summary.csv", caption="../report/summary.rst", category="Summary"),
        md=report("results/report.md", caption="../report/report_md.rst", category="Summary"),
        # A figure only when it has data (report.md lists the rest and why): the directory is the output.
        plots=report(directory("results/plots"), patterns=["{figure}.png"], caption="../report/plots.rst",
                     category="Plots", labels={"figure": "{figure}"}),
        # The winner of each grid as files a user can apply (env, NCCL tuner CSV) and its evidence.
        best=BEST_EXPORTS,
    params:
        report=report_params,
    log:
        "results/logs/render_report.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/render_report.py"
