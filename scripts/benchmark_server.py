"""One configuration's server: launch, readiness, warmup, measurement, teardown."""

import sys
from pathlib import Path

from specsweep.io import read_json
from specsweep.job import JobPaths, run_config

with open(snakemake.log[0], "w", buffering=1) as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    out = snakemake.output  # noqa: F821
    paths = JobPaths(*(Path(p) for p in (out.launch, out.server_log, out.warmup, out.requests, out.outcome)))
    manifest = read_json(snakemake.input.image) if snakemake.input.image else None  # noqa: F821
    # The registry is where a node pulls an image it lacks; read from the
    # config, not a param, so that moving the registry reruns no benchmark.
    registry = snakemake.config.get("registry")  # noqa: F821
    run_config(read_json(snakemake.input.plan), paths, manifest, log, registry)  # noqa: F821
