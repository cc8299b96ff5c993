"""The answer of the whole sweep, computed once: results/report.json from every configuration's summary
(and every round's plan and judgement: the design, the order that ran, what ended the rounds)."""

import sys
from pathlib import Path

# This checkout's package first: Snakemake appends the workflow's directory to a script's
# sys.path, after PYTHONPATH and site-packages, where another version of specsweep may be installed.
sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821 - injected by Snakemake

from specsweep.workflow.jobs import analyze_sweep_files, job_log  # noqa: E402

with job_log(snakemake.log[0]):  # noqa: F821 - injected by Snakemake
    inputs = snakemake.input  # noqa: F821
    screen = inputs.get("screen")  # one path (workflow.round_inputs.screen_input), or absent
    analyze_sweep_files(list(inputs.summaries), snakemake.params.report, snakemake.output.report,  # noqa: F821
                        list(inputs.get("round_plans", [])), list(inputs.get("judgements", [])),
                        str(screen) if screen else None)
