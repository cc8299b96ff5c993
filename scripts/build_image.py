"""Build one image (Snakemake rule build_image).

The image spec arrives as canonical JSON in params (so the job reruns exactly
when it, or the content tag, changes); the build log goes to snakemake.log[0].
"""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import build_image_job, job_log  # noqa: E402

with job_log(snakemake.log[0], "a") as log:  # noqa: F821 - injected by Snakemake
    build_image_job(
        snakemake.wildcards.image,  # noqa: F821
        snakemake.params.spec,  # noqa: F821
        snakemake.params.tag,  # noqa: F821
        Path(snakemake.scriptdir).parent,  # noqa: F821 - the workflow root (the rule hashes the same tree)
        Path(snakemake.output[0]),  # noqa: F821
        Path(snakemake.log[0]),  # noqa: F821
        log,
    )
