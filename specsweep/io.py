"""Atomic file writes: a crash never leaves a half-file that looks complete."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path | str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())
