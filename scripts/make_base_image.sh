#!/usr/bin/env bash
# Make a minimal Debian base image locally: debootstrap into a folder, then
# `docker import` it.
#
# Why: no image registry is reachable from the build hosts, so `FROM debian`
# cannot be pulled; every CPU image of this project starts FROM the image this
# script makes. It is idempotent: when the tag already exists it does nothing
# (pass --force to rebuild).
#
# Usage: scripts/make_base_image.sh [--suite bookworm] [--mirror URL]
#                                   [--tag specsweep/debian:bookworm] [--force]
# Environment equivalents: SUITE, MIRROR, TAG, DOCKER (CLI binary), WORKDIR.
set -euo pipefail

SUITE="${SUITE:-bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
TAG="${TAG:-}"
DOCKER="${DOCKER:-docker}"
FORCE=0
# variant=minbase keeps the image small (no Priority: important packages);
# ca-certificates is added so the image itself trusts the public CAs (never
# the build host's intercepting proxy CA, which is only mounted at build time).
INCLUDE="${INCLUDE:-ca-certificates}"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --suite) SUITE="$2"; shift 2 ;;
        --mirror) MIRROR="$2"; shift 2 ;;
        --tag) TAG="$2"; shift 2 ;;
        --include) INCLUDE="$2"; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "make_base_image.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
TAG="${TAG:-specsweep/debian:${SUITE}}"

log() { echo "[make_base_image] $*" >&2; }

if ! "$DOCKER" info >/dev/null 2>&1; then
    log "ERROR: the Docker engine is not reachable ('$DOCKER info' failed)"
    exit 1
fi

if [[ "$FORCE" -eq 0 ]] && "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    log "$TAG already exists ($("$DOCKER" image inspect --format '{{.Id}}' "$TAG")); nothing to do"
    exit 0
fi

command -v debootstrap >/dev/null || { log "ERROR: debootstrap is not installed"; exit 1; }
[[ "$(id -u)" -eq 0 ]] || { log "ERROR: debootstrap needs root"; exit 1; }

WORKDIR="${WORKDIR:-$(mktemp -d /tmp/specsweep-rootfs.XXXXXX)}"
ROOTFS="$WORKDIR/rootfs"
cleanup() { rm -rf --one-file-system "$WORKDIR"; }
trap cleanup EXIT

log "debootstrap --variant=minbase --include=$INCLUDE $SUITE $ROOTFS $MIRROR"
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" "$MIRROR" >&2

# Slim the tree: package lists, caches and docs are not needed at run time
# (the Dockerfiles run `apt-get update` themselves before installing).
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
       "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/doc/* \
       "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
       "$ROOTFS"/var/log/*.log "$ROOTFS"/tmp/*
# debootstrap copies the host's resolv.conf; docker provides its own at run time.
: > "$ROOTFS/etc/resolv.conf"
# Point apt at the same mirror inside the image.
echo "deb $MIRROR $SUITE main" > "$ROOTFS/etc/apt/sources.list"

CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "docker import -> $TAG"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    --change "LABEL org.opencontainers.image.title=specsweep-debian-${SUITE}" \
    --change "LABEL org.opencontainers.image.created=${CREATED}" \
    --change "LABEL org.opencontainers.image.base.name=debootstrap:${SUITE}" \
    --change "LABEL io.specsweep.debootstrap.mirror=${MIRROR}" \
    --message "debootstrap --variant=minbase $SUITE $MIRROR" \
    - "$TAG" >&2

"$DOCKER" image inspect --format '{{.Id}} {{.Size}}' "$TAG" >&2
log "made $TAG"
