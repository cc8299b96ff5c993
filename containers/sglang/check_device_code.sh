#!/bin/sh
# Check that binaries hold device code (a cubin) for each GPU architecture.
#   check_device_code.sh "90;120" FILE...
# A FILE without device code is reported and passed over; every FILE with
# device code must hold an sm_<arch> cubin for each architecture, and at least
# one FILE must hold device code. cuobjdump comes from PATH (the CUDA toolchain).
set -eu
archs="$(echo "$1" | tr ';,' '  ')"; shift
[ -n "$archs" ] || { echo "check_device_code.sh: no architectures given" >&2; exit 2; }
[ $# -gt 0 ] || { echo "check_device_code.sh: no files given" >&2; exit 2; }
with_code=0
for f in "$@"; do
    if ! elfs="$(cuobjdump --list-elf "$f" 2>&1)"; then
        case "$elfs" in
            *"does not contain device code"*) echo "$f: no device code"; continue ;;
            *) echo "check_device_code.sh: cuobjdump --list-elf $f failed: $elfs" >&2; exit 1 ;;
        esac
    fi
    [ -n "$elfs" ] || { echo "$f: no device code"; continue; }
    with_code=$((with_code + 1))
    found=""
    for a in $archs; do
        if echo "$elfs" | grep -q "\.sm_${a}\.cubin"; then
            found="$found sm_$a"
        else
            echo "check_device_code.sh: $f holds no sm_$a cubin; its cubins:" >&2
            echo "$elfs" >&2
            exit 1
        fi
    done
    echo "$f: $(echo "$elfs" | grep -c '\.cubin') cubins, for$found"
done
[ "$with_code" -gt 0 ] || { echo "check_device_code.sh: none of the $# files holds device code" >&2; exit 1; }
