#!/usr/bin/env bash
# Make the build context `mscclpp_src` of the SGLang image's mscclpp target
# (MSCCLPP_SOURCE=context) from local git checkouts, for a site that cannot
# reach GitHub: the MSCCL++ tree at the pinned commit plus the three sources
# its CMake would clone while configuring (FetchContent).
#
#   OUT/mscclpp                  microsoft/mscclpp at MSCCLPP_COMMIT (git archive)
#   OUT/deps/json                nlohmann/json at JSON_REF        (CMakeLists.txt: v3.12.0)
#   OUT/deps/nanobind            wjakob/nanobind at NANOBIND_REF  (python/csrc/CMakeLists.txt: v1.9.2)
#   OUT/deps/nanobind/ext/robin_map  Tessil/robin-map at the commit nanobind's
#                                submodule pins (read from its tree)
#   OUT/deps/dlpack              dmlc/dlpack at DLPACK_REF        (python/csrc/CMakeLists.txt)
#
# Usage: scripts/stage_mscclpp_source.sh OUT --mscclpp DIR --json DIR --nanobind DIR --robin-map DIR --dlpack DIR
# Each DIR is a git repository (a clone or a mirror) holding the ref. Refs can
# be overridden through the environment (MSCCLPP_COMMIT, JSON_REF,
# NANOBIND_REF, DLPACK_REF); a ref other than the pinned one is reported.
# Then name OUT in the image spec: build_contexts: {mscclpp_src: OUT} and
# build_args: {MSCCLPP_SOURCE: context}. The Dockerfile checks that
# OUT/mscclpp has the git tree id of MSCCLPP_COMMIT.
set -euo pipefail

PIN_MSCCLPP_COMMIT=6231b4f38ddcff0ef5da7bcc117ae99f2cb06e69   # tag v0.10.0
PIN_JSON_REF=v3.12.0
PIN_NANOBIND_REF=v1.9.2
PIN_DLPACK_REF=5c210da409e7f1e51ddf445134a4376fdbd70d7d
MSCCLPP_COMMIT="${MSCCLPP_COMMIT:-$PIN_MSCCLPP_COMMIT}"
JSON_REF="${JSON_REF:-$PIN_JSON_REF}"
NANOBIND_REF="${NANOBIND_REF:-$PIN_NANOBIND_REF}"
DLPACK_REF="${DLPACK_REF:-$PIN_DLPACK_REF}"

die() { echo "stage_mscclpp_source.sh: $*" >&2; exit 1; }
[[ $# -ge 1 && "$1" != -* ]] || die "usage: $0 OUT --mscclpp DIR --json DIR --nanobind DIR --robin-map DIR --dlpack DIR"
OUT="$1"; shift
declare -A REPO=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --mscclpp|--json|--nanobind|--robin-map|--dlpack) [[ $# -ge 2 ]] || die "$1 needs a directory"; REPO["${1#--}"]="$2"; shift 2 ;;
        *) die "unknown argument: $1" ;;
    esac
done
for k in mscclpp json nanobind robin-map dlpack; do
    [[ -n "${REPO[$k]:-}" ]] || die "--$k DIR is required"
    git -C "${REPO[$k]}" rev-parse --git-dir >/dev/null 2>&1 || die "--$k ${REPO[$k]}: not a git repository"
done
[[ ! -e "$OUT" ]] || die "$OUT exists; give a new directory"

commit_of() {  # repo ref -> full commit id, or die naming the ref
    git -C "$1" rev-parse --verify --quiet "$2^{commit}" || die "$1 has no ref $2"
}
export_tree() {  # repo commit dest
    mkdir -p "$3"
    git -C "$1" archive --format=tar "$2" | tar -x -C "$3"
}
note_pin() {  # name used pinned
    [[ "$2" == "$3" ]] || echo "stage_mscclpp_source.sh: WARNING: $1 is $2, not the pinned $3" >&2
}

m=$(commit_of "${REPO[mscclpp]}" "$MSCCLPP_COMMIT")
[[ "$m" == "$MSCCLPP_COMMIT" ]] || die "MSCCLPP_COMMIT must be a full commit id (got $MSCCLPP_COMMIT -> $m)"
j=$(commit_of "${REPO[json]}" "$JSON_REF")
n=$(commit_of "${REPO[nanobind]}" "$NANOBIND_REF")
r=$(git -C "${REPO[nanobind]}" ls-tree "$n" ext/robin_map | awk '$2 == "commit" {print $3}')
[[ -n "$r" ]] || die "nanobind $NANOBIND_REF has no ext/robin_map submodule entry"
r=$(commit_of "${REPO[robin-map]}" "$r")
d=$(commit_of "${REPO[dlpack]}" "$DLPACK_REF")
note_pin mscclpp "$MSCCLPP_COMMIT" "$PIN_MSCCLPP_COMMIT"
note_pin json "$JSON_REF" "$PIN_JSON_REF"
note_pin nanobind "$NANOBIND_REF" "$PIN_NANOBIND_REF"
note_pin dlpack "$DLPACK_REF" "$PIN_DLPACK_REF"

tmp="$OUT.partial.$$"
trap 'rm -rf "$tmp"' EXIT
export_tree "${REPO[mscclpp]}" "$m" "$tmp/mscclpp"
export_tree "${REPO[json]}" "$j" "$tmp/deps/json"
export_tree "${REPO[nanobind]}" "$n" "$tmp/deps/nanobind"
rm -rf "$tmp/deps/nanobind/ext/robin_map"
export_tree "${REPO[robin-map]}" "$r" "$tmp/deps/nanobind/ext/robin_map"
export_tree "${REPO[dlpack]}" "$d" "$tmp/deps/dlpack"
cat > "$tmp/SOURCES" <<EOF
mscclpp $m tree $(git -C "${REPO[mscclpp]}" rev-parse "$m^{tree}")
json $JSON_REF $j
nanobind $NANOBIND_REF $n
robin_map $r
dlpack $DLPACK_REF $d
EOF
mv "$tmp" "$OUT"
trap - EXIT
cat "$OUT/SOURCES"
