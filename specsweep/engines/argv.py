"""Turn a configuration's ``server_args`` mapping into an argv list.

Both engines take their flags from the same mapping, so that a configuration
reads the same whichever engine runs it, and so that reordering keys in
``config.yaml`` changes nothing: flags come out sorted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        # YAML may give 2.0 for what the user wrote as 2.0; keep it as written.
        return repr(value)
    return str(value)


def args_to_argv(server_args: Mapping[str, Any]) -> list[str]:
    """Return ``--flag value`` pairs for ``server_args``, sorted by flag.

    ``True`` gives a bare flag, ``False`` and ``None`` omit the flag, a list
    repeats the value after one flag (argparse ``nargs='+'`` style).
    """
    argv: list[str] = []
    for flag in sorted(server_args):
        value = server_args[flag]
        if value is None or value is False:
            continue
        argv.append(f"--{flag}")
        if value is True:
            continue
        if isinstance(value, (list, tuple)):
            argv.extend(_scalar(v) for v in value)
        else:
            argv.append(_scalar(value))
    return argv


_SPEC_KEYS = ("speculative-algorithm", "speculative_algorithm")


def speculative_algorithm(server_args: Mapping[str, Any]) -> str | None:
    """The plan's speculative algorithm, or ``None`` when speculation is off (both engines take SGLang's flag)."""
    for key in _SPEC_KEYS:
        value = server_args.get(key)
        if value is None or value is False:
            continue
        text = str(value).strip()
        if text and text.upper() != "NONE":
            return text
    return None
