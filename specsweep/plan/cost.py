"""What a sweep will cost, said before it starts: by ``specsweep check`` and at every Snakemake start
(``snakemake -n`` included).

Counted from the plans: server launches (each configuration's ``launches``
and the A/A control), requests (per launch, every point's measured rounds,
``repeats x num_prompts``, its warmup cap and, when profiled, the profiled
requests) and the output tokens they ask for (``output_len`` each).

Guessed: the time. A server's speed is what the sweep measures, so nothing
knows it before: the time is given at a rate stated beside it
(``GUESS_TOK_S`` output tokens per second per request in flight,
``concurrency`` in flight, or ``request_rate`` requests per second, and
``GUESS_START_S`` per launch to start and stop a server; none for an external
server). It tells ten minutes from ten days, not more.

Past any of ``WARN_LAUNCHES`` launches, ``WARN_REQUESTS`` requests or
``WARN_HOURS`` hours it is a warning, so that ``num_prompts: 1000000000`` or
``launches: 300`` is seen before it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specsweep.plan.points import plan_points
from specsweep.records import is_external

#: The guessed rate and start time of the time estimate (module doc).
GUESS_TOK_S = 100.0
GUESS_START_S = 30.0
#: Beyond these a sweep's cost is a warning.
WARN_LAUNCHES = 100
WARN_REQUESTS = 1_000_000
WARN_HOURS = 24.0


@dataclass(frozen=True)
class Cost:
    configurations: int
    launches: int
    requests: int
    output_tokens: int
    seconds: float  # at the guessed rate (module doc)


def _point_cost(workload: Mapping[str, Any], profile: Mapping[str, Any] | None) -> tuple[int, int, float]:
    requests = int(workload["repeats"]) * int(workload["num_prompts"]) + int(workload["warmup"]["max_requests"])
    if profile:
        requests += int(profile.get("requests", 0))
    tokens = requests * int(workload["output_len"])
    rate = workload.get("request_rate")
    if rate:
        seconds = requests / float(rate)
    else:
        seconds = tokens / (GUESS_TOK_S * max(1, int(workload.get("concurrency") or 1)))
    return requests, tokens, seconds


def sweep_cost(plans: Mapping[str, Mapping[str, Any]], order: Sequence[tuple[str, str]]) -> Cost:
    """The cost of running every (configuration, launch) of ``order`` (``plan.launches.launch_order``)."""
    requests = tokens = 0
    seconds = 0.0
    for name, _launch in order:
        plan = plans[name]
        seconds += 0.0 if is_external(plan) else GUESS_START_S
        for i, point in enumerate(plan_points(plan)):
            r, t, s = _point_cost(point["workload"], plan.get("profile") if i == 0 else None)
            requests, tokens, seconds = requests + r, tokens + t, seconds + s
    return Cost(len(plans), len(order), requests, tokens, seconds)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def cost_lines(cost: Cost) -> tuple[str, list[str]]:
    """The cost line and the warnings (module doc)."""
    line = (f"cost: {cost.configurations} configuration(s), {cost.launches} server launch(es), "
            f"{cost.requests:,} requests ({cost.output_tokens:,} output tokens): about "
            f"{_duration(cost.seconds)} at a guessed {GUESS_TOK_S:.0f} output tok/s per request in flight and "
            f"{GUESS_START_S:.0f} s per launch (the real rate is what the sweep measures)")
    warnings = []
    if cost.launches > WARN_LAUNCHES:
        warnings.append(f"{cost.launches} server launches, more than {WARN_LAUNCHES}: check `launches:` (per "
                        "configuration, the A/A control adds one) and the grid's axes before running")
    if cost.requests > WARN_REQUESTS:
        warnings.append(f"{cost.requests:,} requests, more than {WARN_REQUESTS:,}: check `num_prompts:`, "
                        "`repeats:` and `warmup.max_requests:` before running")
    if cost.seconds > WARN_HOURS * 3600:
        warnings.append(f"about {_duration(cost.seconds)} at the guessed rate, more than {WARN_HOURS:.0f} h: "
                        "check `output_len:`, `num_prompts:` and `launches:` before running")
    return line, warnings
