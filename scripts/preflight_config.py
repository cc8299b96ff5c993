"""Parse one configuration's argv with its engine's own parser; fail the job on errors."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log, paths_of, preflight_config  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    inp, params = snakemake.input, snakemake.params  # noqa: F821
    sys.exit(preflight_config(inp.plan, paths_of(inp.parser), params.image, snakemake.output[0], log))  # noqa: F821
