"""The answer of the whole sweep, computed once: results/report.json from every configuration's summary."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import analyze_sweep_files, job_log  # noqa: E402

with job_log(snakemake.log[0]):  # noqa: F821 - injected by Snakemake
    analyze_sweep_files(list(snakemake.input.summaries), snakemake.params.report,  # noqa: F821
                        snakemake.output.report)  # noqa: F821
