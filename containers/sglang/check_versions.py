"""Fail an image build when an installed distribution is not the pinned one.

Called from containers/sglang/Dockerfile as
``python check_versions.py torch=2.14.1 sglang=0.5.23 ...``. pip's resolver
already enforces sglang's Requires-Dist; this check catches a build arg that
drifted from what actually got installed (for example a local ``+cu130``
build of a different base version).
"""

import sys
from importlib.metadata import PackageNotFoundError, version


def main(argv: list[str]) -> int:
    bad = []
    for item in argv:
        name, _, want = item.partition("=")
        try:
            got = version(name)
        except PackageNotFoundError:
            bad.append(f"{name}: not installed (want {want})")
            continue
        if got.split("+")[0] != want:
            bad.append(f"{name}: installed {got}, want {want}")
        else:
            print(f"{name}=={got}")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
