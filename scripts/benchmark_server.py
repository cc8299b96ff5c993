"""One configuration's server: launch, readiness, warmup, measurement, teardown."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import benchmark_server, job_log, paths_of  # noqa: E402

with job_log(snakemake.log[0], buffering=1) as log:  # noqa: F821 - injected by Snakemake
    inp = snakemake.input  # noqa: F821
    # The registry is where a node pulls an image it lacks; read from the
    # config, not a param, so that moving the registry reruns no benchmark.
    registry = snakemake.config.get("registry")  # noqa: F821
    # The round's plan (contracts.rounds), when the rule gives one: which design, position and partners.
    # Its one declared output, outcome.json: the launch's other files go beside it (contracts.layout.LAUNCH_FILES).
    benchmark_server(inp.plan, paths_of(inp.image), snakemake.output.outcome, log, registry,  # noqa: F821
                     launch=snakemake.wildcards.launch, round_plan=inp.get("round_plan"))  # noqa: F821
