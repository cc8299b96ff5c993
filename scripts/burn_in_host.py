"""The burn-in before round 1: unmeasured launches of the baseline until its decode rate is steady."""

import json
import os
import shutil
import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.files import read_json  # noqa: E402
from specsweep.serve.jobspec import JobHost  # noqa: E402
from specsweep.workflow.burnin import burn_in  # noqa: E402
from specsweep.workflow.jobs import job_log, paths_of  # noqa: E402

with job_log(snakemake.log[0], buffering=1) as log:  # noqa: F821 - injected by Snakemake
    inp = snakemake.input  # noqa: F821
    manifest = paths_of(inp.get("image", []))
    host = JobHost.from_environ(os.environ, Path.cwd(), notice=sys.__stderr__)
    out = snakemake.output  # noqa: F821
    burn_in(inp.plan, json.loads(snakemake.params.settings), out.burn_in, log,  # noqa: F821
            read_json(manifest[0]) if manifest else None, snakemake.config.get("registry"), host=host)  # noqa: F821
    shutil.copyfile(out.burn_in, out.record)
