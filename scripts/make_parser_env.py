"""Make the virtual environment holding the pinned SGLang argument parser."""

import sys
from pathlib import Path

from specsweep.workflow.jobs import make_parser_env

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    ready = Path(snakemake.output[0])  # noqa: F821
    make_parser_env(ready.parent, Path(snakemake.input[0]), ready, log)  # noqa: F821
