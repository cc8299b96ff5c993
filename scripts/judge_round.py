"""The verdicts after one round, and whether another round runs (specsweep.workflow.rounds)."""

import json
import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.plan.rounds import RoundSettings  # noqa: E402
from specsweep.workflow.jobs import job_log  # noqa: E402
from specsweep.workflow.rounds import judge_round  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    members = json.loads(snakemake.params.members)  # noqa: F821
    burn_in = snakemake.input.get("burn_in")  # noqa: F821 - one path (workflow.round_inputs.judge_inputs), or absent
    judge_round(int(snakemake.wildcards.round), [[tuple(m) for m in r] for r in members],  # noqa: F821
                json.loads(snakemake.params.sweep), snakemake.output[0], log, str(burn_in) if burn_in else None,  # noqa: F821
                RoundSettings.from_config(snakemake.config).budget())  # noqa: F821 - not a param: raising it reruns none
