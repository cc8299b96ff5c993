"""What a sweep will cost, said before it starts: by ``specsweep check`` and at every Snakemake start
(``snakemake -n`` included).

Counted from the plans: server launches (each configuration's ``launches``
and the A/A control: the planned rounds, ``plan.rounds``; and at most what
the burn-in's units and the extra rounds of a budget, ``rounds.max_launches``,
may add), requests (per launch, every point's measured rounds,
``repeats x num_prompts``, its warmup cap and, when profiled, the profiled
requests; a burn-in unit: the warmup cap and ``burn_in.requests``) and the
output tokens they ask for (``output_len`` each). Requests, tokens and time
are the most the sweep may take (every extra launch that may run).

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

from specsweep.plan.config import schema_default
from specsweep.plan.points import plan_points
from specsweep.plan.rounds import RoundSettings, planned_order
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
    launches: int  # planned
    more: int  # at most this many more: burn-in units and extra rounds
    requests: int
    output_tokens: int
    seconds: float  # at the guessed rate (module doc)
    why_more: str = ""  # what the extra launches are


def _point_cost(workload: Mapping[str, Any], measured: int, profiled: int) -> tuple[int, int, float]:
    requests = measured + int(workload["warmup"]["max_requests"]) + profiled
    tokens = requests * int(workload["output_len"])
    rate = workload.get("request_rate")
    if rate:
        seconds = requests / float(rate)
    else:
        seconds = tokens / (GUESS_TOK_S * max(1, int(workload.get("concurrency") or 1)))
    return requests, tokens, seconds


def _launch_cost(plan: Mapping[str, Any], burn_in_requests: int | None = None) -> tuple[int, int, float]:
    """One launch of ``plan``: every point measured (a burn-in unit: its first point, ``burn_in_requests``)."""
    requests = tokens = 0
    seconds = 0.0 if is_external(plan) else GUESS_START_S
    for i, point in enumerate(plan_points(plan)):
        workload = point["workload"]
        if burn_in_requests is not None:
            if i:
                break
            measured, profiled = burn_in_requests, 0
        else:
            measured = int(workload["repeats"]) * int(workload["num_prompts"])
            profiled = int((plan.get("profile") or {}).get("requests", 0)) if i == 0 else 0
        r, t, sec = _point_cost(workload, measured, profiled)
        requests, tokens, seconds = requests + r, tokens + t, seconds + sec
    return requests, tokens, seconds


def sweep_cost(plans: Mapping[str, Mapping[str, Any]], order: Sequence[tuple[str, str]],
               extra: Sequence[str] = (), burn_in: tuple[str, int, int] | None = None) -> Cost:
    """The cost of every planned (configuration, launch) of ``order``, of the extra launches that may run
    (``extra``: a configuration's name per extra launch) and of the burn-in (its configuration, most units,
    requests a unit)."""
    runs = [(plans[name], None) for name, _launch in order] + [(plans[name], None) for name in extra]
    more = len(extra)
    why = [f"up to {len(extra)} in extra rounds (rounds.max_launches)"] if extra else []
    if burn_in is not None and burn_in[0] in plans:
        runs += [(plans[burn_in[0]], burn_in[2])] * burn_in[1]
        more += burn_in[1]
        why.insert(0, f"up to {burn_in[1]} burn-in launches of {burn_in[0]}")
    totals = [_launch_cost(plan, unit) for plan, unit in runs]
    return Cost(len(plans), len(order), more, sum(t[0] for t in totals), sum(t[1] for t in totals),
                sum(t[2] for t in totals), ", ".join(why))


def config_cost(config: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]],
                launches: Mapping[str, int]) -> Cost:
    """``sweep_cost`` of a checked config: its planned rounds, its extra rounds' budget, its burn-in."""
    baseline, aa = config.get("baseline"), bool(config.get("aa_control", True))
    settings = RoundSettings.from_config(config)
    order = planned_order(launches, baseline, aa, settings.seed, settings.first_round_baseline)
    extra = [name for name in sorted(launches) for _ in range(max(0, (settings.max_launches or 0) - launches[name]))]
    own = {**schema_default("burn_in"), **(config.get("burn_in") or {})}
    first = baseline if baseline in plans else min(plans, default=None)
    burn_in = (first, int(own["max_units"]), int(own["requests"])) if own.get("enabled") and first else None
    return sweep_cost(plans, order, extra, burn_in)


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
    more = f" ({cost.why_more})" if cost.more else ""
    line = (f"cost: {cost.configurations} configuration(s), {cost.launches} planned server launch(es){more}, "
            f"{'at most ' if cost.more else ''}{cost.requests:,} requests ({cost.output_tokens:,} output tokens): "
            f"about {_duration(cost.seconds)} at a guessed {GUESS_TOK_S:.0f} output tok/s per request in flight "
            f"and {GUESS_START_S:.0f} s per launch (the real rate is what the sweep measures)")
    warnings = []
    launches = cost.launches + cost.more
    if launches > WARN_LAUNCHES:
        warnings.append(f"{launches} server launches, more than {WARN_LAUNCHES}: check `launches:` (per "
                        "configuration, the A/A control adds one), `rounds.max_launches:` and the grid's axes "
                        "before running")
    if cost.requests > WARN_REQUESTS:
        warnings.append(f"{cost.requests:,} requests, more than {WARN_REQUESTS:,}: check `num_prompts:`, "
                        "`repeats:` and `warmup.max_requests:` before running")
    if cost.seconds > WARN_HOURS * 3600:
        warnings.append(f"about {_duration(cost.seconds)} at the guessed rate, more than {WARN_HOURS:.0f} h: "
                        "check `output_len:`, `num_prompts:` and `launches:` before running")
    return line, warnings
