#!/usr/bin/env bash
# Push the four SGLang images with the kernel toolchain to the local registry
# (specsweep.images.registry.push_image, what rule push_images calls), then
# pull each back BY DIGEST into a second Docker engine with its own, empty
# store (what another host does), and check there: the same image id, the
# labels that name the toolchain and the cache, /opt/cuda-toolchain/record.json
# and nvcc on PATH.
#
# Run from the repository root as root, after the builds, with the registry of
# .ci/setup-docker.sh up:
#   bash docs/measurements/2026-12-06-sglang-images-toolchain/push_pull.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD"

echo "== push"
du -sh /var/lib/specsweep-registry | sed 's/^/registry before: /' | tee "$OUT/registry-du.txt"
/usr/bin/time -f "push_s %e" python3 - > "$OUT/pushed.json" <<'PY'
import json, time
from pathlib import Path
from specsweep.images.registry import push_image
registry = {"url": "127.0.0.1:5000", "namespace": "specsweep"}
out = []
for name in ("sglang", "sglang-deepep", "sglang-fi-fusion", "sglang-mscclpp"):
    manifest = json.loads(Path(f"results/images/{name}.json").read_text())
    t0 = time.monotonic()
    pushed = push_image(manifest, registry, Path("results/images/logs/push_sglang_images.log"))
    out.append({**pushed, "push_s": round(time.monotonic() - t0, 1)})
print(json.dumps(out, indent=2))
PY
cat "$OUT/pushed.json"
du -sh /var/lib/specsweep-registry | sed 's/^/registry after: /' | tee -a "$OUT/registry-du.txt"

echo "== a second dockerd with an empty store (/var/lib/specsweep-clean)"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../2026-12-01-sglang-images/second_engine.sh"
LOG_DIR="$OUT" start_second_engine specsweep-clean spsw2 172.31.253.1/24
trap stop_second_engine EXIT
docker info --format 'clean engine {{.ServerVersion}} root {{.DockerRootDir}} images {{.Images}}' | tee "$OUT/clean-engine.txt"
test "$(docker images -q | wc -l)" -eq 0

echo "== pull by digest, check"
python3 - "$OUT" <<'PY'
import json, subprocess, sys, time
from pathlib import Path
from specsweep.images.cli import image_inspect
from specsweep.images.registry import pull_image
out = Path(sys.argv[1])
report = []
for item in json.loads((out / "pushed.json").read_text()):
    ref = item["repo_digest"]
    t0 = time.monotonic()
    image_id = pull_image(ref)
    pull_s = round(time.monotonic() - t0, 1)
    info = image_inspect(ref)
    labels = info["Config"]["Labels"]
    got = subprocess.run(["docker", "run", "--rm", "--network", "none", ref, "sh", "-c",
                          "cat /opt/cuda-toolchain/record.json; command -v nvcc; nvcc --version | tail -n 1"],
                         capture_output=True, text=True, timeout=600)
    text, _, rest = got.stdout.rpartition("}\n")
    record = json.loads(text + "}") if got.returncode == 0 else None
    row = {"name": item["name"], "ref": ref, "pull_s": pull_s, "image_id_pushed": item["image_id"],
           "image_id_pulled": image_id, "same_id": image_id == item["image_id"], "size_bytes": info["Size"],
           "kernel_labels": {k: v for k, v in labels.items() if k.startswith(("io.specsweep.kernel",))},
           "run_rc": got.returncode, "nvcc_on_path": rest.split("\n")[0] if record else None,
           "nvcc_build": rest.split("\n")[1] if record else got.stderr[-300:],
           "record_nvcc_version": record and record["nvcc_version"]}
    report.append(row)
    print(json.dumps(row))
(out / "pulled.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
assert all(r["same_id"] and r["run_rc"] == 0 and r["nvcc_on_path"] == "/opt/cuda-toolchain/cuda/bin/nvcc"
           for r in report), "a pulled image failed a check"
PY
docker images --digests --format '{{.Repository}}@{{.Digest}} {{.ID}} {{.Size}}' | tee "$OUT/clean-store-images.txt"
du -sh /var/lib/specsweep-clean | tee "$OUT/clean-store-du.txt"
