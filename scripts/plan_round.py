"""One round's plan: its design and its seeded order (specsweep.plan.rounds)."""

import json
import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.plan.rounds import RoundSettings  # noqa: E402
from specsweep.workflow.jobs import job_log  # noqa: E402
from specsweep.workflow.rounds import write_round_plan  # noqa: E402

with job_log(snakemake.log[0]) as log:  # noqa: F821 - injected by Snakemake
    p = json.loads(snakemake.params.plan)  # noqa: F821
    # the budget from the loaded config, not a param: raising it reruns no round (RoundSettings.tracked)
    settings = RoundSettings(**p["settings"], **RoundSettings.from_config(snakemake.config).budget())  # noqa: F821
    plan = write_round_plan(p["round"], p["members"], p["design"], p["why"], settings, snakemake.output[0])  # noqa: F821
    print(f"round {plan['round']} ({plan['design']}): " + ", ".join("/".join(i) for i in plan["order"]), file=log)
