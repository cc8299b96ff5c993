"""Launches: the unit of replication, and the order they run in.

A configuration is measured in ``launches`` server launches (default 1),
named ``1``, ``2``, ... Each launch is its own server job with its own files
(``results/<config>/launch-<id>/``); the summary pools them. With
``aa_control`` (default on) and a baseline, the baseline is launched once
more after every other launch: launch ``aa``, the A/A control.

Order. Launches run interleaved, A B A B and not A A B B, so that a slow
drift of the machine is spread over every configuration instead of being
confounded with one of them: round 1 (the baseline first, then every other
configuration by name), round 2, ..., and the control last. Snakemake has no
ordering edges between independent jobs that would not also be rerun edges
(an edge from A's launch 1 to B's launch 2 would rerun B whenever A reruns),
so the order is given as job priorities instead (``priorities``): the
scheduler (greedy and ILP alike) starts the ready job of highest priority,
and since every benchmark job claims ``server=1``, they run one at a time in
exactly this order once their plans and preflights are done (those have
priority 100, so they all finish first). The report checks the order that
really happened from the launch records (``started_at``), it does not assume
it.

The launch count is not part of the plan: raising it adds launches and keeps
those already measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from specsweep.contracts.layout import CONTROL  # the A/A control's launch id (the baseline, launched again last)

#: Benchmark priorities lie in (0, PRIORITY_CEILING), below preflight's 100.
PRIORITY_CEILING = 99.0


def launch_ids(count: int) -> list[str]:
    """``["1", ..., str(count)]``."""
    return [str(i) for i in range(1, count + 1)]


def launch_order(launches: Mapping[str, int], baseline: str | None, aa_control: bool) -> list[tuple[str, str]]:
    """Every (configuration, launch id) in the order the sweep runs them (module docstring)."""
    names = sorted(launches, key=lambda n: (n != baseline, n))
    order = [(name, str(r)) for r in range(1, max(launches.values(), default=0) + 1)
             for name in names if launches[name] >= r]
    if aa_control and baseline in launches:
        order.append((baseline, CONTROL))
    return order


def schedule(launches: Mapping[str, int], baseline: str | None, aa_control: bool) -> dict[str, list[str]]:
    """Launch ids of each configuration, in run order (the control last)."""
    out: dict[str, list[str]] = {name: [] for name in sorted(launches)}
    for name, launch in launch_order(launches, baseline, aa_control):
        out[name].append(launch)
    return out


def priorities(order: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Job priority of each launch: strictly decreasing along ``order``, all in (0, 99)."""
    n = len(order)
    return {key: PRIORITY_CEILING * (n - k) / (n + 1) for k, key in enumerate(order)}
