"""Build one image (Snakemake rule build_image): call specsweep.docker.build_image.

The image spec arrives as canonical JSON in params (so the job reruns exactly
when it, or the content tag, changes); the build log goes to snakemake.log[0].
"""

import json
import sys
from pathlib import Path

from specsweep.docker import build_image, state_path_for

with open(snakemake.log[0], "a") as log:  # noqa: F821 - injected by Snakemake
    sys.stderr = log
    name = snakemake.wildcards.image  # noqa: F821
    spec = json.loads(snakemake.params.spec)  # noqa: F821
    manifest_path = Path(snakemake.output[0])  # noqa: F821
    manifest = build_image(
        name,
        spec,
        Path(snakemake.scriptdir).parent,  # noqa: F821 - the workflow root (the rule hashes the same tree)
        manifest_path,
        Path(snakemake.log[0]),  # noqa: F821
        state_path=state_path_for(manifest_path),
    )
    if manifest["tag"] != snakemake.params.tag:  # noqa: F821
        raise SystemExit(f"built {manifest['tag']}, but the DAG expected {snakemake.params.tag}")  # noqa: F821
    print(f"{name}: {manifest['tag']} {manifest['image_id']} (reused={manifest['reused']})", file=log)
