"""Test-only faults of the reference engine: never set them outside tests.

Both slow a launch by a known amount without changing what it computes:

* ``SPECSWEEP_TEST_STEP_DELAY_S`` adds a fixed sleep to every engine step
  (one decode step, or one speculation cycle). It exists so that a test can
  make two launches of the same configuration differ by a fixed factor (the
  verdict must then not call a smaller difference between two other
  configurations).
* ``SPECSWEEP_TEST_STEP_SLOWDOWN`` adds a sleep of that fraction of the step's
  own measured duration (``0.05``: every step takes 5 % longer), so that a
  positive control is slowed by the same relative amount on any device and
  model: the verdict must call it.

The pause falls between a step's compute and the emission of its tokens, so
it lies inside the client's decode time of every step, the last one
included; the engine's own timers (``draft_s``, ``verify_s``) leave it out.
It lasts what was asked (``pause``): ``time.sleep`` alone overshoots by about
its own length at tens of microseconds (an 80 us sleep took 166 us, median of
200 on the 2-core CPU used for the race records), which made a nominal 2 %
slowdown of a 4 ms step a 4 % one; so the last millisecond is spun.

Forms of either variable:

* ``0.004``: every launch of the configuration gets it;
* ``aa=0.004`` or ``1=0,aa=0.004``: per launch id, from the launch's
  ``SPECSWEEP_LAUNCH`` (set by the server job, ``serve.launch.LAUNCH_ENV``);
  a launch not named gets 0.

The server logs a warning when a fault is active, and the launch's provenance
records every ``SPECSWEEP_`` variable, so a result made with one cannot pass
unnoticed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

STEP_DELAY_ENV = "SPECSWEEP_TEST_STEP_DELAY_S"
STEP_SLOWDOWN_ENV = "SPECSWEEP_TEST_STEP_SLOWDOWN"
LAUNCH_ENV = "SPECSWEEP_LAUNCH"  # = specsweep.serve.launch.LAUNCH_ENV
MAX_DELAY_S = 10.0
MAX_SLOWDOWN = 1.0
SPIN_S = 1e-3  # the last part of a pause is spun: a sleep's overshoot is of this order or less


def pause(seconds: float) -> None:
    """Wait ``seconds`` (a fault's delay) to within a few microseconds: sleep all but the last
    ``SPIN_S``, spin the rest on ``time.perf_counter``."""
    deadline = time.perf_counter() + seconds
    if seconds > SPIN_S:
        time.sleep(seconds - SPIN_S)
    while time.perf_counter() < deadline:
        pass


def step_delay_s(env: Mapping[str, str]) -> float:
    """The fixed per-step delay this process must add, seconds (0.0 when not set). Raises ValueError when malformed."""
    return _per_launch(env, STEP_DELAY_ENV, "a number of seconds", 0.0, MAX_DELAY_S, upper_closed=False)


def step_slowdown(env: Mapping[str, str]) -> float:
    """The fraction of each step's own duration this process must add (0.0 when not set), in [0, 1].
    Raises ValueError when malformed."""
    return _per_launch(env, STEP_SLOWDOWN_ENV, "a fraction of the step time", 0.0, MAX_SLOWDOWN, upper_closed=True)


def _per_launch(env: Mapping[str, str], name: str, what: str, low: float, high: float, upper_closed: bool) -> float:
    text = (env.get(name) or "").strip()
    if not text:
        return 0.0
    if "=" not in text:
        return _value(name, text, what, low, high, upper_closed)
    launch = env.get(LAUNCH_ENV)
    values = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{name}={text!r}: expected '<value>' or '<launch>=<value>,...' "
                             f"(<value>: {what} in {_interval(low, high, upper_closed)})")
        values[key.strip()] = _value(name, value, what, low, high, upper_closed)
    return values.get(launch or "", 0.0)


def _interval(low: float, high: float, upper_closed: bool) -> str:
    return f"[{low:g}, {high:g}{']' if upper_closed else ')'}"


def _value(name: str, text: str, what: str, low: float, high: float, upper_closed: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: {text.strip()!r} is not {what} "
                         f"(allowed: {_interval(low, high, upper_closed)})") from None
    inside = low <= value <= high if upper_closed else low <= value < high
    if not inside:  # NaN lands here too
        raise ValueError(f"{name}: {value:g} is outside {_interval(low, high, upper_closed)}")
    return value
