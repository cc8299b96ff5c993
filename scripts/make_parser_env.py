"""Make the virtual environment holding the pinned SGLang argument parser."""

import sys
from pathlib import Path

from specsweep.pipeline import make_parser_env

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    make_parser_env(Path(snakemake.output[0]).parent, Path(snakemake.input[0]), Path(snakemake.output[0]), log)  # noqa: F821
