"""Write the resolved plan (Snakemake passes it as canonical JSON in params)."""

import json
import sys

from specsweep.plan import write_if_changed

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    plan = json.loads(snakemake.params.plan)  # noqa: F821
    changed = write_if_changed(snakemake.output[0], json.dumps(plan, indent=2, sort_keys=True) + "\n")  # noqa: F821
    print(f"plan {plan['name']}: {'written' if changed else 'unchanged'}", file=log)
