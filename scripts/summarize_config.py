"""Per-configuration summary.json from the raw records of its server job."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.inputs import launch_read_set  # noqa: E402
from specsweep.workflow.jobs import job_log, summarize_files  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    # declared: the plan and each launch's outcome.json (workflow.inputs.summary_edges); read: every file
    summarize_files(launch_read_set(snakemake.input), snakemake.output[0], log, snakemake.params.agreement,  # noqa: F821
                    snakemake.params.labels)  # noqa: F821
