#!/usr/bin/env bash
# Ids, sizes, per-layer history, labels and /opt/cuda-toolchain/record.json of
# the four SGLang images with the kernel toolchain, and how much each grew
# against the same targets without it (the record of 2026-12-02, built from the
# Dockerfile at 3cb6cea, which is main's before this change). Run from the
# repository root after the four builds (results/images/<name>.json):
#   bash docs/measurements/2026-12-06-sglang-images-toolchain/record.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"; mkdir -p "$OUT"
BEFORE=docs/measurements/2026-12-02-sglang-images/out/images.txt
IMAGES="sglang sglang-deepep sglang-fi-fusion sglang-mscclpp"
field() { python3 -c "import json,sys; print(json.load(open('results/images/$1.json'))['$2'])"; }

: > "$OUT/images.txt"
for name in $IMAGES; do
    id=$(field "$name" image_id)
    docker image inspect --format "$name $(field "$name" tag) {{.Id}} {{.Size}}" "$id" >> "$OUT/images.txt"
    docker history --no-trunc --format '{{.Size}}\t{{printf "%.110s" .CreatedBy}}' "$id" > "$OUT/history-$name.txt"
    docker image inspect --format '{{json .Config.Labels}}' "$id" | python3 -m json.tool --sort-keys > "$OUT/labels-$name.json"
    docker image inspect --format '{{json .RootFS.Layers}}' "$id" | python3 -m json.tool > "$OUT/layers-$name.json"
    docker run --rm --network none "$id" cat /opt/cuda-toolchain/record.json > "$OUT/record-$name.json"
done
cat "$OUT/images.txt"

# Growth: bytes now minus bytes in the 2026-12-02 record, per image; and the
# layers the jit stage adds (docker history of the stock image).
python3 - "$OUT" "$BEFORE" $IMAGES > "$OUT/growth.txt" <<'PY'
import sys
from pathlib import Path
out, before_file, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
def sizes(path):
    return {line.split()[0]: int(line.split()[3]) for line in path.read_text().splitlines() if line.strip()}
before, after = sizes(before_file), sizes(out / "images.txt")
print(f"{'image':<18} {'before (2026-12-02)':>20} {'after':>15} {'grew':>13}")
for n in names:
    print(f"{n:<18} {before[n]:>20,} {after[n]:>15,} {after[n] - before[n]:>+13,} ({(after[n] - before[n]) / 1e6:+.1f} MB)")
PY
cat "$OUT/growth.txt"
grep -E "COPY /opt/cuda-toolchain/|KERNEL_CACHE_DIR=/var/cache/specsweep-kernels /bin/sh" "$OUT/history-sglang.txt" | tee "$OUT/jit-layers.txt"
