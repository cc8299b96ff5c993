#!/usr/bin/env bash
# The mscclpp target on the local base, from a staged source (MSCCLPP_SOURCE=
# context), through specsweep.images.build.build_image: shows the air-gapped source
# path (staging, git-tree check) and where the local base stops (no CUDA
# toolkit). SRC is the output of scripts/stage_mscclpp_source.sh.
#   bash docs/measurements/2026-12-01-sglang-images/mscclpp_local_base.sh SRC OUT_DIR
set -uo pipefail
SRC="${1:?usage: $0 SRC OUT_DIR}"; OUT="${2:?usage: $0 SRC OUT_DIR}"; mkdir -p "$OUT"
PYTHONPATH="$PWD" python3 - "$SRC" "$OUT" <<'PY'
import sys
from pathlib import Path
from specsweep.images.build import build_image
from specsweep.images.cli import DockerError
src, out = sys.argv[1], Path(sys.argv[2])
spec = {
    "dockerfile": "containers/sglang/Dockerfile", "target": "mscclpp", "context": ".",
    "build_args": {"BASE_IMAGE": "specsweep/debian:bookworm", "PYTHON": "python3.11", "MSCCLPP_SOURCE": "context"},
    "build_contexts": {"mscclpp_src": src},
}
log = out / "mscclpp-local-base.log"
log.write_text("")
try:
    m = build_image("sglang-mscclpp", spec, Path("."), out / "sglang-mscclpp.json", log)
    print("built", m["tag"], m["image_id"])
except DockerError as exc:
    print("build failed:", str(exc)[-300:])
    sys.exit(1)
PY
rc=$?
grep -E "mscclpp source: git tree|no CUDA toolkit|\[mscclpp-src-context|\[mscclpp-build|ERROR|DONE [0-9.]+s" "$OUT/mscclpp-local-base.log" | cut -c1-240
exit $rc
