"""Write the resolved plan (Snakemake passes it as canonical JSON in params).

The job runs only when that JSON changes (the params rerun trigger), so the
plan file, and everything downstream of it, changes exactly then.
"""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log, write_plan  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    write_plan(snakemake.params.plan, snakemake.output[0], log)  # noqa: F821
