"""Atomic file writes: a crash never leaves a half-file that looks complete."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over it.

    ``os.replace`` is atomic on POSIX within one file system, so a reader (or a
    crash) sees the old file, no file, or the complete new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def write_json_atomic(path: Path | str, obj: Any) -> None:
    """Indented, key-sorted JSON, written atomically.

    NaN and infinities are refused: a value that cannot be computed is absent
    with a reason, not a float that JSON cannot carry.
    """
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n")


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())
