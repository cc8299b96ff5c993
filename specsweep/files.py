"""Files: the one atomic writer and the one canonical JSON.

A crash never leaves a half-file that looks complete: every result file goes
through ``write_bytes_atomic`` (temp file beside it, fsync, rename). Every
value that decides a rerun (plan params, image specs, content records) is
serialised by ``canonical_json``, so equal data always gives equal bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, ASCII only: equal data gives equal bytes.

    The one serialisation of Snakemake params, plans and image content
    records; changing it changes every plan and every image tag.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


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


def write_jsonl_atomic(path: Path | str, rows: Iterable[Any]) -> None:
    """One compact JSON object per line, written atomically (NaN refused)."""
    lines = [json.dumps(r, separators=(",", ":"), allow_nan=False) for r in rows]
    write_text_atomic(path, "\n".join(lines) + ("\n" if lines else ""))


def read_jsonl(path: Path | str) -> list[Any]:
    """Read a JSONL file; a missing file is an error (the caller decides what it means)."""
    out: list[Any] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON: {exc}") from exc
    return out
