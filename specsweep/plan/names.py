"""The name rule: configuration, image, grid and point names become paths under results/."""

from __future__ import annotations

import re

NAME_PATTERN = re.compile(r"^[a-z0-9_-]+$")
NAME_RULE = "names may use a-z, 0-9, '_' and '-' only (they become paths under results/)"
