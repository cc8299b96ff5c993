rule render_report:
    input:
        summaries=expand("results/{config}/summary.json", config=CONFIGS),
    output:
        csv=report("results/summary.csv", caption="../report/summary.rst", category="Summary"),
        md=report("results/report.md", caption="../report/report_md.rst", category="Summary"),
        plots=[
            report("results/plots/tok_s.png", caption="../report/tok_s.rst", category="Plots"),
            report("results/plots/cycle_time.png", caption="../report/cycle_time.rst", category="Plots"),
            report("results/plots/accept_length.png", caption="../report/accept_length.rst", category="Plots"),
            report("results/plots/comm_split.png", caption="../report/comm_split.rst", category="Plots"),
            report("results/plots/break_even.png", caption="../report/break_even.rst", category="Plots"),
            report("results/plots/pareto.png", caption="../report/pareto.rst", category="Plots"),
            report("results/plots/acceptance.png", caption="../report/acceptance.rst", category="Plots"),
        ],
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
