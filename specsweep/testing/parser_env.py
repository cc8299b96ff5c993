"""Where tests build the pinned SGLang preflight venv (one per requirements file).

``$SPECSWEEP_PARSER_ENV`` if set, else where the workflow keeps it
(:func:`specsweep.engines.sglang.preflight.parser_env_dir`: the user's cache,
keyed by the content of ``envs/sglang-parser.txt``): a branch that changes the
pins gets its own venv instead of rebuilding, back and forth, the one another
branch's tests use.
"""

from __future__ import annotations

import os
from pathlib import Path

from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, ensure_parser_env
from specsweep.engines.sglang.preflight import parser_env_dir as _default_dir


def parser_env_dir(requirements: Path = DEFAULT_REQUIREMENTS) -> Path:
    if os.environ.get("SPECSWEEP_PARSER_ENV"):
        return Path(os.environ["SPECSWEEP_PARSER_ENV"])
    return _default_dir(requirements)


def parser_python(requirements: Path = DEFAULT_REQUIREMENTS) -> str:
    """The venv's python, built if needed; raises (never skips) when it cannot be built."""
    return ensure_parser_env(parser_env_dir(requirements), requirements)


def wheel_site(python: str) -> Path:
    """The site-packages directory holding the parser venv's ``sglang`` (to read the pinned wheel's sources)."""
    import subprocess

    out = subprocess.run(
        [python, "-I", "-c", "import importlib.util, pathlib; "
         "print(pathlib.Path(importlib.util.find_spec('sglang').origin).parent.parent)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    return Path(out)
