"""Per-configuration summary.json from the raw records of its server job."""

import sys

from specsweep.workflow.jobs import summarize_files

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    summarize_files(snakemake.input, snakemake.output[0], log, snakemake.params.agreement,  # noqa: F821
                    snakemake.params.labels)  # noqa: F821
