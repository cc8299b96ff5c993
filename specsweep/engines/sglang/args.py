"""What a plan's SGLang flags say, read as SGLang reads them (no SGLang import): the leaf the rules,
the variant entries and the engine's facts share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_set(value: Any) -> bool:
    """A flag's value that puts it on the argv (``engines.argv``: false and null omit it)."""
    return value is not None and value is not False


def tp_size(server_args: Mapping[str, Any]) -> int:
    """TP world size as SGLang reads it (``--tp-size``, alias ``--tensor-parallel-size``; default 1)."""
    for key in ("tp-size", "tensor-parallel-size"):
        if is_set(server_args.get(key)):
            return int(server_args[key])
    return 1
