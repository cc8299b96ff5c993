"""A race's screen: the all-reduce micro-benchmark of one communication setting (specsweep.workflow.screen)."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log  # noqa: E402
from specsweep.workflow.screen import run_bench  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    images = list(snakemake.input.get("image", []))  # noqa: F821 - the manifest, docker runtime only
    run_bench(snakemake.input.plan, snakemake.output[0], log, images[0] if images else None)  # noqa: F821
