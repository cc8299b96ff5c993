"""The cross-configuration report: summary.csv, report.md and the plots."""

import json
import sys
from pathlib import Path

from specsweep.io import read_json
from specsweep.report import render_report

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    params = json.loads(snakemake.params.report)  # noqa: F821
    summaries = [read_json(p) for p in snakemake.input.summaries]  # noqa: F821
    for summary in summaries:
        summary["description"] = params["descriptions"].get(summary["config"], "")
    out = snakemake.output  # noqa: F821
    render_report(summaries, params["baseline"], Path(out.csv), Path(out.md), Path(out.plots[0]).parent)
