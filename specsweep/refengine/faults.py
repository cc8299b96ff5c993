"""Test-only faults of the reference engine: never set them outside tests.

``SPECSWEEP_TEST_STEP_DELAY_S`` adds a fixed sleep after every engine step
(one decode step, or one speculation cycle), which slows a launch by a known
amount without changing what it computes. It exists so that a test can make
two launches of the same configuration differ by a fixed factor (issue 19:
the verdict must then not call a smaller difference between two other
configurations). Forms:

* ``0.004``: every launch of the configuration sleeps 4 ms per step;
* ``aa=0.004`` or ``1=0,aa=0.004``: per launch id, from the launch's
  ``SPECSWEEP_LAUNCH`` (set by the server job, ``serve.job.LAUNCH_ENV``);
  a launch not named sleeps 0.

The server logs a warning when a fault is active, so a result made with one
cannot pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Mapping

STEP_DELAY_ENV = "SPECSWEEP_TEST_STEP_DELAY_S"
LAUNCH_ENV = "SPECSWEEP_LAUNCH"  # = specsweep.serve.job.LAUNCH_ENV


def step_delay_s(env: Mapping[str, str]) -> float:
    """The per-step delay this process must add (0.0 when the fault is not set). Raises ValueError when malformed."""
    text = (env.get(STEP_DELAY_ENV) or "").strip()
    if not text:
        return 0.0
    if "=" not in text:
        return _seconds(text)
    launch = env.get(LAUNCH_ENV)
    delays = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{STEP_DELAY_ENV}={text!r}: expected '<seconds>' or '<launch>=<seconds>,...'")
        delays[key.strip()] = _seconds(value)
    return delays.get(launch or "", 0.0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{STEP_DELAY_ENV}: {text!r} is not a number of seconds") from None
    if not 0 <= value < 10:
        raise ValueError(f"{STEP_DELAY_ENV}: {value} is outside [0, 10) seconds")
    return value
