"""Launches: the unit of replication, and the order they run in.

A configuration is measured in ``launches`` server launches (default 1),
named ``1``, ``2``, ... Each launch is its own server job with its own files
(``results/<config>/launch-<id>/``); the summary pools them. With
``aa_control`` (default on) and a baseline, the baseline is launched once
more after every other launch: launch ``aa``, the A/A control.

Order. Launches run in rounds, A B A B and not A A B B, so that a slow
drift of the machine is spread over every configuration instead of being
confounded with one of them, and each round in a seeded random order
(``plan.rounds``: the baseline is not always first; the A/A control takes a
random place in round 1). Snakemake has no ordering edges
between independent jobs that would not also be rerun edges (an edge from
A's launch 1 to B's launch 2 would rerun B whenever A reruns), so a round
waits for the judgement of the round before (a file it reads, not a
configuration's), and the order within a round is given as job priorities:
the scheduler (greedy and ILP alike) starts the ready job of highest
priority, and since every sequential benchmark job claims ``server=1``, they
run one at a time in exactly this order (plans and preflights have priority
100, so they all finish first). The report checks the order that really
happened from the launch records (``started_at``), it does not assume it.

The launch count is not part of the plan: raising it adds launches and keeps
those already measured.
"""

from __future__ import annotations

#: Benchmark priorities lie in (0, PRIORITY_CEILING), below preflight's 100.
PRIORITY_CEILING = 99.0


def launch_ids(count: int) -> list[str]:
    """``["1", ..., str(count)]``."""
    return [str(i) for i in range(1, count + 1)]
