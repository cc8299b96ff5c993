"""Turn a configuration's ``server_args`` mapping into an argv list.

Both engines take their flags from the same mapping, so that a configuration
reads the same whichever engine runs it, and so that reordering keys in
``config.yaml`` changes nothing: flags come out sorted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsweep.contracts.acceptance import SIMULATE_ACC_LEN, simulated_acc_len


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


#: The environment variable both engines read for a fixed accept length (``contracts.acceptance``: SGLang's;
#: the reference engine mimics it), as a setting of a plan (a grid axis names it so).
SIMULATE_ACC_LEN_SETTING = f"env.{SIMULATE_ACC_LEN}"
#: Flags that only speculation reads start with this (both engines take SGLang's ``--speculative-*``).
SPECULATION_FLAG_PREFIX = "speculative"


def simulated_accept_length(server_args: Mapping[str, Any], env: Mapping[str, Any]) -> float | None:
    """The accept length the engine will simulate: ``SGLANG_SIMULATE_ACC_LEN`` as SGLang reads it
    (``contracts.acceptance.simulated_acc_len``: a number > 0; plan-time checks refuse a value SGLang would
    clamp, so it is the one that runs) when speculation is on; None otherwise."""
    if speculative_algorithm(server_args) is None:
        return None
    return simulated_acc_len(env.get(SIMULATE_ACC_LEN))


def speculation_settings(server_args: Mapping[str, Any], env: Mapping[str, Any]) -> list[str]:
    """The plan's settings that only speculation reads (``server_args.<flag>``, ``env.<VAR>``), sorted: what
    a configuration's counterpart without speculation may differ in."""
    flags = [f"server_args.{k}" for k in server_args if str(k).replace("_", "-").startswith(SPECULATION_FLAG_PREFIX)]
    return sorted(flags + ([SIMULATE_ACC_LEN_SETTING] if SIMULATE_ACC_LEN in env else []))


def common_facts(server_args: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    """The facts (``contracts.plan.FACT_KEYS``) that both engines read from SGLang's flag names alike; each
    engine adds ``tp_size`` and ``all_reduce_backend``."""
    return {
        "speculative_algorithm": speculative_algorithm(server_args),
        "simulated_accept_length": simulated_accept_length(server_args, env),
        "simulated_accept_length_setting": SIMULATE_ACC_LEN_SETTING,
        "speculation_settings": speculation_settings(server_args, env),
    }
