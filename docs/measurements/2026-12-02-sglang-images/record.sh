#!/usr/bin/env bash
# Ids, sizes, per-layer history and shared layers of the four SGLang images,
# and what the mscclpp image holds (imports, libraries, device code as its
# build checked it), into OUT_DIR. Run from the repository root after the four
# builds (results/images/<name>.json):
#   bash docs/measurements/2026-12-02-sglang-images/record.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD"
IMAGES="sglang sglang-deepep sglang-fi-fusion sglang-mscclpp"
field() { python3 -c "import json,sys; print(json.load(open('results/images/$1.json'))['$2'])"; }
run() { docker run --rm -i --network none "$@"; }

: > "$OUT/images.txt"
for name in $IMAGES; do
    id=$(field "$name" image_id)
    docker image inspect --format "$name $(field "$name" tag) {{.Id}} {{.Size}}" "$id" >> "$OUT/images.txt"
    docker history --no-trunc --format '{{.Size}}\t{{printf "%.110s" .CreatedBy}}' "$id" > "$OUT/history-$name.txt"
    docker image inspect --format '{{json .Config.Labels}}' "$id" | python3 -m json.tool --sort-keys > "$OUT/labels-$name.json"
    docker image inspect --format '{{json .RootFS.Layers}}' "$id" | python3 -m json.tool > "$OUT/layers-$name.json"
done
cat "$OUT/images.txt"

# Shared layers: each image's layers, and which of them the others hold too.
python3 - "$OUT" $IMAGES > "$OUT/shared-layers.txt" <<'PY'
import json, sys
from pathlib import Path
out, names = Path(sys.argv[1]), sys.argv[2:]
layers = {n: json.loads((out / f"layers-{n}.json").read_text()) for n in names}
common = [l for l in layers[names[0]] if all(l in layers[n] for n in names)]
print(f"layers in all {len(names)} images: {len(common)}")
for n in names:
    own = [l for l in layers[n] if l not in common]
    print(f"{n}: {len(layers[n])} layers, {len(own)} of its own: {', '.join(l[7:19] for l in own) or '-'}")
PY
cat "$OUT/shared-layers.txt"

# The mscclpp image: its files, its libraries' needs, the imports SGLang makes
# (against the link stubs: no driver on this host), pip check, one kernel name.
m=$(field sglang-mscclpp image_id)
run "$m" sh -s > "$OUT/mscclpp-inside.txt" 2>&1 <<'SH' || true
set -u
pkg="$(python3 -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("mscclpp").origin))')"
echo "\$ ls -l /opt/cuda-link-stubs"; ls -l /opt/cuda-link-stubs
echo "\$ pip show mscclpp | head -n 2"; pip show mscclpp 2>/dev/null | head -n 2
echo "\$ libraries under $pkg (size, NEEDED of the driver)"
for f in $(find "$pkg" -name '*.so*' -type f | sort); do
  echo "$(stat -c %s "$f") $f: $(readelf -d "$f" | grep -oE 'NEEDED.*\[(libcuda|libnvidia-ml|libcudart)[^]]*\]' | grep -oE '\[[^]]+\]' | tr '\n' ' ')"
done
echo "\$ python3 -c 'import mscclpp'   # no driver, no stubs on the path"
python3 -c 'import mscclpp' > /tmp/import.txt 2>&1; rc=$?; tail -n 1 /tmp/import.txt; echo "[exit $rc]"
echo "\$ LD_LIBRARY_PATH=/opt/cuda-link-stubs:\$LD_LIBRARY_PATH python3 -c 'import mscclpp, mscclpp.ext, mscclpp.default_algos; ...'"
LD_LIBRARY_PATH="/opt/cuda-link-stubs:$LD_LIBRARY_PATH" python3 -c '
import mscclpp, mscclpp.ext, mscclpp.default_algos
from sglang.srt.distributed.device_communicators.pymscclpp import _create_algorithm_configs
print("mscclpp", mscclpp.__version__, "language:", mscclpp.language.__name__,
      "AlgorithmCollectionBuilder:", hasattr(mscclpp.ext, "AlgorithmCollectionBuilder"))
print("SGLang algorithm configs:", [c.name for c in _create_algorithm_configs(mscclpp.language)])'
echo "[exit $?]"
echo "\$ pip check"; pip check; echo "[exit $?]"
echo "\$ mangled mscclpp::collective::allreducePacket (the trace fixture's kernel) in the package's libraries"
python3 - "$pkg" <<'PYIN'
import pathlib, sys
key = b"_ZN7mscclpp10collective15allreducePacket"
hits = [str(p) for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.so*")) if p.is_file() and key in p.read_bytes()]
print(hits or "not found")
PYIN
SH
cat "$OUT/mscclpp-inside.txt"

# What the mscclpp build printed: its toolchain, source, compiler, and checks.
grep -E "cuda-toolchain from|SONAME|mscclpp: CUDA toolkit from|mscclpp source: git tree|scikit-build-core|CUDA toolkit version|GPU architectures:|The CUDA compiler identification|cmake version|Successfully (built|installed)|^#[0-9]+ [0-9.]+ mscclpp [0-9]|imports:|cubins, for|no device code|No broken requirements" \
    results/images/logs/build_sglang-mscclpp.log | grep -v '^#[0-9]* \[' | cut -c1-400 > "$OUT/mscclpp-build-checks.txt" || true
cat "$OUT/mscclpp-build-checks.txt"
echo "record written to $OUT"
