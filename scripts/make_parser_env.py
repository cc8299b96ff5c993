"""Make the virtual environment holding the pinned SGLang argument parser."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import job_log, make_parser_env  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    ready = Path(snakemake.output[0])  # noqa: F821
    make_parser_env(ready.parent, Path(snakemake.input[0]), ready, log, console=sys.__stderr__)  # noqa: F821
