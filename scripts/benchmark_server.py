"""One configuration's server: launch, readiness, warmup, measurement, teardown."""

import sys

from specsweep.workflow.jobs import benchmark_server, paths_of

with open(snakemake.log[0], "w", buffering=1) as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    inp = snakemake.input  # noqa: F821
    benchmark_server(inp.plan, paths_of(inp.image), dict(snakemake.output.items()), log,  # noqa: F821
                     snakemake.wildcards.launch)  # noqa: F821
