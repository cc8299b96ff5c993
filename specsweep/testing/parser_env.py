"""Where tests build the pinned SGLang preflight venv (one per requirements file).

``$SPECSWEEP_PARSER_ENV`` if set, else ``$XDG_CACHE_HOME/specsweep/sglang-parser-<sha256[:12]>``
of ``envs/sglang-parser.txt``: a branch that changes the pins gets its own
venv instead of rebuilding, back and forth, the one another branch's tests use.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, ensure_parser_env


def parser_env_dir(requirements: Path = DEFAULT_REQUIREMENTS) -> Path:
    if os.environ.get("SPECSWEEP_PARSER_ENV"):
        return Path(os.environ["SPECSWEEP_PARSER_ENV"])
    digest = hashlib.sha256(Path(requirements).read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specsweep" / f"sglang-parser-{digest}"


def parser_python(requirements: Path = DEFAULT_REQUIREMENTS) -> str:
    """The venv's python, built if needed; raises (never skips) when it cannot be built."""
    return ensure_parser_env(parser_env_dir(requirements), requirements)
