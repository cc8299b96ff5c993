#!/usr/bin/env bash
# Push the four SGLang images to the local registry, then pull each back BY
# DIGEST into a second Docker engine with its own, empty store (what another
# host does), and check them there: same image id, labels, the launch entry
# point's help, SGLang's parser over the GPU matrix (-dummy overlay), and for
# sglang-mscclpp the imports SGLang makes (against the link stubs: no driver).
#
# Run from the repository root as root, after the builds, with the registry of
# .ci/setup-docker.sh up:
#   bash docs/measurements/2026-12-02-sglang-images/push_pull_clean_store.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"
mkdir -p "$OUT"
REGISTRY=127.0.0.1:5000
NAMESPACE=specsweep
export PYTHONPATH="$PWD"

echo "== push (specsweep.images.registry.push_image, what rule push_images calls)"
du -sh /var/lib/specsweep-registry | sed 's/^/registry before: /' | tee "$OUT/registry-du.txt"
/usr/bin/time -f "push_s %e" python3 - "$REGISTRY" "$NAMESPACE" > "$OUT/pushed.json" <<'PY'
import json, sys, time
from pathlib import Path
from specsweep.images.registry import push_image
registry = {"url": sys.argv[1], "namespace": sys.argv[2]}
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
docker info --format 'clean engine {{.ServerVersion}} root {{.DockerRootDir}} images {{.Images}}'
test "$(docker images -q | wc -l)" -eq 0

echo "== pull by digest, check"
python3 - "$OUT" <<'PY'
import json, subprocess, sys, time
from pathlib import Path
from specsweep.images.cli import image_inspect
from specsweep.images.registry import pull_image
from specsweep.plan.resolve import resolve_plans
from specsweep.engines.sglang.preflight import image_parser_prefix, preflight_plans
from specsweep.plan.config import load_configs
out = Path(sys.argv[1])
pushed = json.loads((out / "pushed.json").read_text())
config = load_configs([Path("config/kimi-k25-8gpu.yaml"), Path("config/kimi-k25-8gpu-dummy.yaml")])
plans = resolve_plans(config)
IMPORTS = ("import mscclpp, mscclpp.ext, mscclpp.default_algos; "
           "from sglang.srt.distributed.device_communicators.pymscclpp import _create_algorithm_configs; "
           "print(mscclpp.__version__, [c.name for c in _create_algorithm_configs(mscclpp.language)])")
report = []
for item in pushed:
    ref = item["repo_digest"]
    t0 = time.monotonic()
    image_id = pull_image(ref)
    pull_s = round(time.monotonic() - t0, 1)
    info = image_inspect(ref)
    labels = info["Config"]["Labels"]
    def run(*argv):
        return subprocess.run(["docker", "run", "--rm", "--network", "none", ref, *argv],
                              capture_output=True, text=True, timeout=600)
    help_ = run("python3", "-m", "sglang.launch_server", "--help")
    results = preflight_plans(list(plans.values()), image_parser_prefix(ref), config["images"])
    row = {
        "name": item["name"], "ref": ref, "pull_s": pull_s,
        "image_id_pushed": item["image_id"], "image_id_pulled": image_id, "same_id": image_id == item["image_id"],
        "size_bytes": info["Size"],
        "labels": {k: v for k, v in labels.items() if k.startswith(("io.specsweep.", "org.opencontainers."))},
        "help_rc": help_.returncode, "help_first_line": help_.stdout.splitlines()[0] if help_.stdout else help_.stderr[-300:],
        "parsed": len(results), "parse_errors": {n: r["errors"] for n, r in results.items() if not r["ok"]},
        "sglang_versions": sorted({str(r["sglang_version"]) for r in results.values()}),
    }
    if item["name"] == "sglang-mscclpp":
        got = run("sh", "-c", f'LD_LIBRARY_PATH=/opt/cuda-link-stubs:$LD_LIBRARY_PATH python3 -c "{IMPORTS}"')
        row["mscclpp_imports_rc"], row["mscclpp_imports"] = got.returncode, (got.stdout + got.stderr).strip()[-600:]
    report.append(row)
    print(json.dumps({k: row[k] for k in ("name", "pull_s", "same_id", "help_rc", "parsed", "parse_errors",
                                          "sglang_versions") + (("mscclpp_imports_rc", "mscclpp_imports")
                                                                if "mscclpp_imports" in row else ())}))
(out / "pulled.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
assert all(r["same_id"] and r["help_rc"] == 0 and not r["parse_errors"] and r.get("mscclpp_imports_rc", 0) == 0
           for r in report), "a pulled image failed a check"
PY
docker images --digests --format '{{.Repository}}@{{.Digest}} {{.ID}} {{.Size}}' | tee "$OUT/clean-store-images.txt"
du -sh /var/lib/specsweep-clean | tee "$OUT/clean-store-du.txt"
