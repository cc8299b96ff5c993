"""The cross-configuration report: summary.csv, report.md and the plots."""

import sys

from specsweep.workflow.jobs import render_report_files

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    out = snakemake.output  # noqa: F821
    render_report_files(list(snakemake.input.summaries), snakemake.params.report, out.csv, out.md, out.plots[0])  # noqa: F821
