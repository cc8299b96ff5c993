"""The views of results/report.json: summary.csv, report.md, the plots and each grid's best configuration."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log, render_report_files  # noqa: E402

with job_log(snakemake.log[0]):  # noqa: F821 - injected by Snakemake
    out = snakemake.output  # noqa: F821
    best = list(out.best)
    render_report_files(snakemake.input.report, out.csv, out.md, out.plots,  # noqa: F821
                        str(Path(best[0]).parent) if best else None, (out.landing, out.page, out.table))
