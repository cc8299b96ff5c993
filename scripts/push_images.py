"""Push every built image to the configured registry (Snakemake rule push_images).

Credentials, if any, come from the environment variable that
registry.password_env names; the password travels on stdin to `docker login`
only (never argv, log or this rule's output).
"""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log, push_images  # noqa: E402

with job_log(snakemake.log[0], "a"):  # noqa: F821 - injected by Snakemake
    push_images(list(snakemake.input), snakemake.params.registry, snakemake.output[0], Path(snakemake.log[0]))  # noqa: F821
