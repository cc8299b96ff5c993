#!/usr/bin/env bash
# What CI's fresh machine does for the SGLang images, timed: a Docker engine
# with an EMPTY store and build cache (a second dockerd with its own
# --data-root and socket, so nothing of this host's engine is reused), the
# base image made there by scripts/make_base_image.sh (debootstrap), then
# tests/docker/test_sglang_images.py, whose fixture builds the three images
# through the build_image rule and runs every in-image check.
#   bash docs/measurements/2026-12-01-sglang-images/cold_ci.sh OUT_DIR
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"; mkdir -p "$OUT"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/second_engine.sh"
LOG_DIR="$OUT" start_second_engine specsweep-cold spsw1 172.31.254.1/24
trap stop_second_engine EXIT
docker info --format 'cold engine {{.ServerVersion}} root {{.DockerRootDir}} images {{.Images}}' | tee "$OUT/cold-engine.txt"
test "$(docker images -q | wc -l)" -eq 0
t0=$(date +%s)
scripts/make_base_image.sh > "$OUT/cold-make-base.log" 2>&1
t1=$(date +%s)
echo "make_base_image_s $((t1 - t0))" | tee "$OUT/cold-times.txt"
set +e
PYTHONPATH="$PWD" python3 -m pytest tests/docker/test_sglang_images.py -v --durations=0 -p no:cacheprovider \
    --basetemp "$OUT/pytest-tmp" > "$OUT/cold-pytest.txt" 2>&1
rc=$?
set -e
t2=$(date +%s)
echo "pytest_s $((t2 - t1)) rc $rc" | tee -a "$OUT/cold-times.txt"
docker system df | tee "$OUT/cold-system-df.txt"
du -sh "/var/lib/specsweep-cold" | tee -a "$OUT/cold-system-df.txt"
exit "$rc"
