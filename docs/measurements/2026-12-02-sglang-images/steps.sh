#!/usr/bin/env bash
# The steps of one BuildKit build log (--progress=plain, results/images/logs/build_<image>.log)
# with how each ended: seconds, CACHED or ERROR.
#   bash docs/measurements/2026-12-02-sglang-images/steps.sh LOG
set -euo pipefail
python3 - "${1:?usage: $0 LOG}" <<'PY'
import re, sys
names, ends = {}, {}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if m := re.match(r"#(\d+) (\[[^\]]+\] .*|exporting to image)$", line.rstrip()):
        names.setdefault(m[1], m[2][:90])
    elif m := re.match(r"#(\d+) (DONE ([0-9.]+)s|CACHED|ERROR.*)", line):
        ends[m[1]] = f"{m[3]} s" if m[3] else m[2][:40]
for n, name in names.items():
    if not name.startswith("[internal]"):
        print(f"{ends.get(n, '?'):>10}  {name}")
PY
