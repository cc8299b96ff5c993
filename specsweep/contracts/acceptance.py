"""The simulated accept length: one variable, read the way SGLang 0.5.23 reads it.

``SGLANG_SIMULATE_ACC_LEN`` fixes the accept length of speculative decoding
(both engines read it: SGLang, and the reference engine that mimics it). Every
stage that needs its value (the plan-time check, the summary's agreement check,
the report's accept-length sweep and its answer) reads it here, so that a value
means the same to each of them.

How SGLang 0.5.23 reads it (paths under ``sglang/srt/``):

* ``SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)`` (``environ.py:527``), read once at import
  (``speculative/spec_utils.py:276``); ``EnvFloat.parse`` is ``float(value)``
  (``environ.py:200-205``) and ``EnvField.get`` warns and uses the default -1 on a value
  it cannot parse (``environ.py:67-83``): "2,0" turns simulation off, silently but for a
  Python warning;
* simulation is on when the value is > 0 (``spec_utils.py:276``, ``eagle_utils.py:807``);
* each verify clamps it to ``[1, steps + 1]`` before sampling ("match-expected", the
  default method: ``spec_utils.py:489-517``, with ``max_len = spec_steps + 1`` from
  ``generate_simulated_accept_index``, ``spec_utils.py:541-544``): a value above steps + 1
  runs as steps + 1, one below 1 as 1.
"""

from __future__ import annotations

import math
from typing import Any

SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"
#: ``EnvFloat(-1)``'s default: simulation off.
SIMULATE_ACC_LEN_DEFAULT = -1.0


def parse_acc_len(value: Any) -> tuple[float, str | None]:
    """(the float SGLang reads, why it fell back to the default or None) for a set variable's value."""
    text = str(value)
    try:
        return float(text), None
    except ValueError:
        return SIMULATE_ACC_LEN_DEFAULT, (f'"{text}" is not a valid float value: SGLang warns and uses the default '
                                          f"{SIMULATE_ACC_LEN_DEFAULT:g} (simulation off)")


def simulated_acc_len(value: Any) -> float | None:
    """The accept length a configured value makes SGLang simulate, before clamping; None: simulation off
    (unset, unparsable, <= 0, or not a number at all)."""
    if value is None:
        return None
    number, _ = parse_acc_len(value)
    return number if number > 0 else None


def clamped_acc_len(length: float, num_steps: int) -> float:
    """What one verify runs with (``spec_utils.py:511``): ``max(1, min(steps + 1, length))``."""
    return max(1.0, min(float(num_steps + 1), length))


def acc_len_problem(value: Any, num_steps: int | None) -> str | None:
    """Why ``value`` would not run as written (a fallback or a clamp), with what would run; None when it would.

    ``num_steps``: ``--speculative-num-steps`` when known (the clamp needs it; None skips that part).
    A value <= 0 is SGLang's own way to say off and passes.
    """
    number, fell_back = parse_acc_len(value)
    if fell_back:
        return fell_back
    if math.isnan(number):
        return f'"{value}" is NaN: SGLang compares it with 0 and never simulates (simulation off)'
    if number <= 0:
        return None
    if num_steps is not None and clamped_acc_len(number, num_steps) != number:
        return (f"{value} is outside [1, speculative-num-steps + 1 = {num_steps + 1}]: SGLang clamps it to "
                f"{clamped_acc_len(number, num_steps):g} at every verify (sglang/srt/speculative/spec_utils.py:"
                f"489-517), so the run would measure {clamped_acc_len(number, num_steps):g}, not {value}")
    if num_steps is None and number < 1:
        return (f"{value} is below 1: SGLang clamps it to 1 at every verify (sglang/srt/speculative/"
                f"spec_utils.py:489-517), so the run would measure 1, not {value}")
    return None
