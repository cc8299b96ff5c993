"""A race's screen by the cost model: what is set aside before the first launch (specsweep.workflow.screen)."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log  # noqa: E402
from specsweep.workflow.screen import screen_grid  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    screen_grid(snakemake.params.screen, snakemake.output[0], log)  # noqa: F821
