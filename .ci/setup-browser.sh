#!/usr/bin/env bash
# Prepare a Debian bookworm host (root) for the HTML report's browser test
# (tests/e2e/test_first_hour_replay.py opens the page in headless Chromium and
# fails, never skips, without it): install Debian's chromium when it is not
# there (about 115 MB to download, 400 MB installed). Idempotent.
set -euo pipefail
if command -v chromium >/dev/null; then
    echo "setup-browser: $(chromium --version 2>/dev/null || echo chromium) already installed"
    exit 0
fi
echo "setup-browser: installing Debian's chromium (about 115 MB to download, 400 MB installed)"
DEBIAN_FRONTEND=noninteractive apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
chromium --version
