rule analyze_sweep:
    input:
        # every round's plan and judgement: the design, the order that ran, what ended the rounds
        unpack(report_round_files),
        # a race's screen (screen.enabled): its record, and no summary of a configuration it set aside
        unpack(screen_input),
        summaries=report_summaries,
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
        csv="results/summary.csv",
        md="results/report.md",
        # A figure only when it has data (report.md lists the rest and why): the directory is the output.
        plots=report(directory("results/plots"), patterns=["{figure}.png"], caption="../report/plots.rst",
                     category="Plots", labels={"figure": "{figure}"}),
        # The winner of each grid as files a user can apply (env, NCCL tuner CSV) and its evidence.
        best=BEST_EXPORTS,
        # The HTML report (snakemake --report): report.md's first sections on its first screen
        # (report/workflow.rst includes this file: specsweep.report.captions.LANDING_FILE), report.md
        # and summary.csv as pages shown in it rather than downloads.
        landing="results/report_landing.html",
        page=report("results/report_page.html", caption="../report/report_md.rst", category="Report",
                    labels={"view": "report.md"}),
        table=report("results/summary.html", caption="../report/summary.rst", category="Summary",
                     labels={"view": "summary.csv"}),
    log:
        "results/logs/render_report.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/render_report.py"
