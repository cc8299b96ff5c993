#!/usr/bin/env bash
# Prepare a Debian bookworm CI host (root) for the Docker tests of specsweep:
#   1. install docker.io, docker-registry, debootstrap, curl (Debian packages);
#   2. start dockerd in the background with a log file, wait until
#      `docker info` works;
#   3. start a local registry on 127.0.0.1:5000 (push/pull tests);
#   4. make the base image specsweep/debian:bookworm if it is absent
#      (no registry is reachable, so nothing can be pulled).
# Every step fails loudly: a CI job that cannot run Docker must fail, not skip.
#
# Environment: LOG_DIR (default /var/log/specsweep), REGISTRY_ADDR
# (default 127.0.0.1:5000), BASE_TAG, SUITE, MIRROR (passed to
# scripts/make_base_image.sh), DOCKER_WAIT_S (default 60).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_DIR="${LOG_DIR:-/var/log/specsweep}"
REGISTRY_ADDR="${REGISTRY_ADDR:-127.0.0.1:5000}"
REGISTRY_DIR="${REGISTRY_DIR:-/var/lib/specsweep-registry}"
DOCKER_WAIT_S="${DOCKER_WAIT_S:-60}"
SUITE="${SUITE:-bookworm}"
BASE_TAG="${BASE_TAG:-specsweep/debian:${SUITE}}"

log() { echo "[setup-docker] $*" >&2; }
die() { echo "[setup-docker] ERROR: $*" >&2; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

[[ "$(id -u)" -eq 0 ]] || die "must run as root (installs packages, starts dockerd)"
mkdir -p "$LOG_DIR"

# 1. packages ---------------------------------------------------------------
need=()
for pkg in docker.io docker-registry debootstrap curl ca-certificates; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [[ ${#need[@]} -gt 0 ]]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${need[@]}"
fi

# 2. dockerd ----------------------------------------------------------------
if docker info >/dev/null 2>&1; then
    log "docker engine already running"
else
    log "starting dockerd (log: $LOG_DIR/dockerd.log)"
    nohup dockerd >>"$LOG_DIR/dockerd.log" 2>&1 &
    echo $! > "$LOG_DIR/dockerd.pid"
    for _ in $(seq "$DOCKER_WAIT_S"); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$(cat "$LOG_DIR/dockerd.pid")" 2>/dev/null || { tail -n 30 "$LOG_DIR/dockerd.log" >&2; die "dockerd exited"; }
        sleep 1
    done
    docker info >/dev/null 2>&1 || { tail -n 30 "$LOG_DIR/dockerd.log" >&2; die "docker info still fails after ${DOCKER_WAIT_S}s"; }
fi
log "docker engine $(docker info --format '{{.ServerVersion}}')"

# 3. registry ---------------------------------------------------------------
if curl -fsS "http://${REGISTRY_ADDR}/v2/" >/dev/null 2>&1; then
    log "registry already answering on $REGISTRY_ADDR"
else
    mkdir -p "$REGISTRY_DIR"
    cat > "$LOG_DIR/registry.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: ${REGISTRY_DIR}
  delete:
    enabled: true
http:
  addr: ${REGISTRY_ADDR}
EOF
    log "starting docker-registry on $REGISTRY_ADDR (log: $LOG_DIR/registry.log)"
    nohup docker-registry serve "$LOG_DIR/registry.yml" >>"$LOG_DIR/registry.log" 2>&1 &
    echo $! > "$LOG_DIR/registry.pid"
    for _ in $(seq 30); do
        curl -fsS "http://${REGISTRY_ADDR}/v2/" >/dev/null 2>&1 && break
        sleep 1
    done
    curl -fsS "http://${REGISTRY_ADDR}/v2/" >/dev/null || { tail -n 30 "$LOG_DIR/registry.log" >&2; die "registry does not answer on $REGISTRY_ADDR"; }
fi

# 4. base image -------------------------------------------------------------
TAG="$BASE_TAG" SUITE="$SUITE" "$REPO_ROOT/scripts/make_base_image.sh"
docker image inspect "$BASE_TAG" >/dev/null || die "$BASE_TAG missing after make_base_image.sh"
log "ready: docker $(docker info --format '{{.ServerVersion}}'), registry $REGISTRY_ADDR, base $BASE_TAG"
