"""Push every built image to the configured registry (Snakemake rule push_images).

Credentials, if any, come from the environment variable that
registry.password_env names; specsweep.docker.push_image sends the password on
stdin to `docker login` (never argv, log or this rule's output).
"""

import json
import os
import sys
from pathlib import Path

from specsweep.docker import push_image
from specsweep.io import write_text_atomic

with open(snakemake.log[0], "a") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    registry = json.loads(snakemake.params.registry)  # noqa: F821
    if not registry.get("url"):
        raise SystemExit("config has no registry.url: nothing to push to")
    pushed = []
    for path in snakemake.input:  # noqa: F821
        manifest = json.loads(Path(path).read_text())
        pushed.append(push_image(manifest, registry, Path(snakemake.log[0]), environ=os.environ))  # noqa: F821
    out = {"registry": registry.get("url"), "namespace": registry.get("namespace"), "images": pushed}
    write_text_atomic(snakemake.output[0], json.dumps(out, indent=2, sort_keys=True) + "\n")  # noqa: F821
