"""Write the resolved plan (Snakemake passes it as canonical JSON in params).

The job runs only when that JSON changes (the params rerun trigger), so the
plan file, and everything downstream of it, changes exactly then.
"""

import json
import sys

from specsweep.io import write_text_atomic

with open(snakemake.log[0], "w") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    plan = json.loads(snakemake.params.plan)  # noqa: F821
    write_text_atomic(snakemake.output[0], json.dumps(plan, indent=2, sort_keys=True) + "\n")  # noqa: F821
    print(f"plan {plan['name']} written", file=log)
