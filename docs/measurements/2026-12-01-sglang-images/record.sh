#!/usr/bin/env bash
# Print what each in-image check prints (the same commands as
# tests/docker/test_sglang_images.py), plus ids, sizes and per-layer history,
# into OUT_DIR. Run from the repository root after the three builds.
#   bash docs/measurements/2026-12-01-sglang-images/record.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD"
SITE="import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('sglang').submodule_search_locations[0]))"
PATCH=containers/patches/sglang-0.5.23-flashinfer-fusion-sm120.patch
id_of() { python3 -c "import json,sys; print(json.load(open('results/images/$1.json'))['image_id'])"; }
tag_of() { python3 -c "import json,sys; print(json.load(open('results/images/$1.json'))['tag'])"; }
run() { docker run --rm -i --network none "$@"; }

: > "$OUT/images.txt"
for name in sglang sglang-deepep sglang-fi-fusion; do
    tag=$(tag_of "$name"); id=$(id_of "$name")
    docker image inspect --format "$name $tag {{.Id}} {{.Size}}" "$id" >> "$OUT/images.txt"
    docker history --no-trunc --format '{{.Size}}\t{{printf "%.110s" .CreatedBy}}' "$id" > "$OUT/history-$name.txt"
    docker image inspect --format '{{json .Config.Labels}}' "$id" | python3 -m json.tool --sort-keys > "$OUT/labels-$name.json"
    docker image inspect --format '{{json .RootFS.Layers}}' "$id" | python3 -m json.tool > "$OUT/layers-$name.json"
    { echo "\$ docker run --rm --network none $tag python3 -m sglang.launch_server --help"; \
      run "$id" python3 -m sglang.launch_server --help > "$OUT/.help" 2>&1; echo "[exit $?]"; \
      echo "(first 12 lines of $(wc -l < "$OUT/.help") lines; $(grep -cE '^  --' "$OUT/.help") options)"; \
      head -n 12 "$OUT/.help"; rm -f "$OUT/.help"; } > "$OUT/help-$name.txt"
    python3 - "$id" "$name" > "$OUT/parse-$name.json" <<'PY'
import json, sys
from pathlib import Path
from specsweep.plan import resolve_plans
from specsweep.sglang.preflight import image_parser_prefix, load_configs, preflight_plans
image, name = sys.argv[1], sys.argv[2]
out = {"image": name, "prefix": image_parser_prefix(image)}
for label, paths in {"weights": ["config/kimi-k25-8gpu.yaml"],
                     "dummy": ["config/kimi-k25-8gpu.yaml", "config/kimi-k25-8gpu-dummy.yaml"]}.items():
    config = load_configs([Path(p) for p in paths])
    results = preflight_plans(list(resolve_plans(config).values()), image_parser_prefix(image), config["images"])
    out[label] = {n: {"ok": r["ok"], "errors": r["errors"], "warnings": r["warnings"], "sglang_version": r["sglang_version"]}
                  for n, r in sorted(results.items())}
print(json.dumps(out, indent=2, sort_keys=True))
PY
done
stock=$(id_of sglang); fused=$(id_of sglang-fi-fusion); deepep=$(id_of sglang-deepep)
{ echo "\$ patch --dry-run --fuzz=0 -p1 --reverse --force -d SITE < $PATCH   # in sglang-fi-fusion"; \
  run "$fused" sh -c "patch --dry-run --fuzz=0 -p1 --reverse --force -d \"\$(python3 -c \"$SITE\")\"" < "$PATCH"; echo "[exit $?]"; \
  echo "\$ patch --dry-run --fuzz=0 -p1 --forward -d SITE < $PATCH   # in sglang (stock)"; \
  run "$stock" sh -c "patch --dry-run --fuzz=0 -p1 --forward -d \"\$(python3 -c \"$SITE\")\"" < "$PATCH"; echo "[exit $?]"; } > "$OUT/patch-check.txt" 2>&1
LDD='import importlib.util, os, pathlib, subprocess
so = sorted(pathlib.Path(importlib.util.find_spec("deep_ep").submodule_search_locations[0]).glob("_C*.so"))[0]
torchlib = pathlib.Path(importlib.util.find_spec("torch").origin).parent / "lib"
env = dict(os.environ, LD_LIBRARY_PATH=":".join(filter(None, [os.environ.get("LD_LIBRARY_PATH"), str(torchlib)])))
print("LD_LIBRARY_PATH=" + env["LD_LIBRARY_PATH"]); print(so)
print(subprocess.run(["ldd", str(so)], env=env, capture_output=True, text=True).stdout)'
{ echo "== sglang-deepep"; run "$deepep" python3 -c "$LDD"; echo "== sglang (stock), same command"; run "$stock" python3 -c "$LDD"; } > "$OUT/ldd-deep_ep.txt" 2>&1
{ echo "\$ python3 -c 'import torch, deep_ep'   # in sglang-deepep, no GPU driver on this host"; \
  run "$deepep" python3 -c 'import torch, deep_ep' 2>&1 | tail -2; } > "$OUT/import-deep_ep.txt" || true
echo "record written to $OUT"
