"""Rounds: which launches run together, in which order, and how many rounds the sweep runs.

A round holds one launch of every configuration taking part (round ``r`` is
launch id ``r``); the A/A control (launch ``aa``, the baseline launched once
more) joins round 1 (every sweep has it: raising ``launches`` never moves it).
With ``rounds.first_round_baseline: k`` the baseline runs k times in round 1
(launches ``1``, ``1b``, ``1c``, ...: ``contracts.layout.first_round_copy``), so
that round 1 has a launch variance of its own and a race with ``launches: 1``
can drop configurations after its first round (``analysis.race``). Three rules make a slow spell of the host
land on no configuration in particular:

* **a seeded random order within each round** (``round_order``): the
  baseline is not first in every round, and no configuration is always first
  or last. The order is a function of ``rounds.seed``, the round and its
  members only, so that ``-n``, the jobs and the report all see the same
  order, and adding a configuration reorders nothing but the rounds it
  joins. The A/A control takes a random place in its round like any launch,
  so it measures the drift between two places of one round, not the first
  place's position effect.
* **rounds as blocks**: the verdicts take the round as a block
  (``analysis.blocks``): what the host did during one round moves every
  configuration of that round alike and leaves the comparisons.
* **rounds until the question is answered** (``workflow.rounds``): after
  every round, a judgement (a Snakemake checkpoint) recomputes the verdicts
  and either plans the next round or ends the sweep: when every comparison
  is either called or can see ``smallest_effect`` (resolved), or when the
  budget (``rounds.max_launches`` launches per configuration, or
  ``rounds.max_minutes`` of measuring) is spent. The
  planned launches (``launches``) are the minimum; extra rounds hold the
  configurations whose comparisons are still open, and the baseline.

A round's plan is a file (``results/rounds/round-<r>/plan.json``, the typed
record ``contracts.rounds.RoundPlan``, whose module keeps its format history)
that every launch job of the round reads: its design, its order, and so each
job's position and partners.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specsweep.contracts.layout import CONTROL, first_round_copy, launch_round
from specsweep.contracts.rounds import ROUND_FORMAT_VERSION, Design, RoundPlan
from specsweep.plan.launches import PRIORITY_CEILING

ROUND_PLAN_FORMAT_VERSION = ROUND_FORMAT_VERSION

#: The measurement designs: every configuration's server up at once and measured in turn, or one
#: server at a time (the host cannot hold them all, or the user asked for it); ``auto`` picks the first
#: where it fits (``plan.design``).
SIDE_BY_SIDE = Design.SIDE_BY_SIDE.value
SEQUENTIAL = Design.SEQUENTIAL.value
DESIGNS = ("auto", SIDE_BY_SIDE, SEQUENTIAL)

#: What the rounds after the planned ones are for (``rounds.mode``): ``sweep`` measures every
#: configuration until each comparison with the baseline is answered; ``race`` keeps only the
#: configurations not yet shown slower than the best (``analysis.race``) until one is left, the rest tie
#: with it, or the budget is spent.
SWEEP = "sweep"
RACE = "race"
MODES = (SWEEP, RACE)


@dataclass(frozen=True)
class RoundSettings:
    """``rounds:`` of the config (schemas/config.schema.yaml): the order's seed, the design asked for,
    the budget of extra rounds (None: the planned launches only), what they are for (``mode``) and the
    baseline's launches in round 1 (``first_round_baseline``)."""

    seed: int = 0
    design: str = SEQUENTIAL
    max_launches: int | None = None
    max_minutes: float | None = None
    mode: str = SWEEP
    first_round_baseline: int = 1

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "RoundSettings":
        own = dict(config.get("rounds") or {})
        return cls(seed=int(own.get("seed", 0)), design=str(own.get("design", SEQUENTIAL)),
                   max_launches=own.get("max_launches"), max_minutes=own.get("max_minutes"),
                   mode=str(own.get("mode", SWEEP)), first_round_baseline=int(own.get("first_round_baseline", 1)))

    @property
    def race(self) -> bool:
        return self.mode == RACE

    def as_dict(self) -> dict[str, Any]:
        out = {"seed": self.seed, "design": self.design, **self.budget(), "mode": self.mode}
        if self.first_round_baseline != 1:  # absent at its default: the params of sweeps before it are unchanged
            out["first_round_baseline"] = self.first_round_baseline
        return out

    def budget(self) -> dict[str, Any]:
        """The budget of extra rounds (``max_launches``, ``max_minutes``)."""
        return {"max_launches": self.max_launches, "max_minutes": self.max_minutes}

    def tracked(self) -> dict[str, Any]:
        """The settings a round's jobs take as Snakemake params (a change reruns them): all but the budget,
        which their scripts read from the loaded config. A larger budget must rerun no round already judged:
        the walk continues the last one instead (``workflow.rounds.continues``)."""
        return {k: v for k, v in self.as_dict().items() if k not in self.budget()}


def planned_rounds(launches: Mapping[str, int]) -> int:
    """The rounds every sweep runs at least: the most launches any configuration plans."""
    return max(launches.values(), default=0)


def planned_members(launches: Mapping[str, int], baseline: str | None, aa_control: bool,
                    round_no: int, first_round_baseline: int = 1) -> list[tuple[str, str]]:
    """(configuration, launch) of planned round ``round_no``, by name: every configuration planning at
    least that many launches; in round 1 also the baseline's further launches (``first_round_baseline`` in
    all: ``1b``, ``1c``, ...) and the A/A control."""
    members = [(name, str(round_no)) for name in sorted(launches) if launches[name] >= round_no]
    if baseline in launches and round_no == 1:
        members += [(baseline, first_round_copy(k)) for k in range(2, first_round_baseline + 1)]
        if aa_control:
            members.append((baseline, CONTROL))
    return members


def round_order(members: Sequence[tuple[str, str]], seed: int, round_no: int) -> list[tuple[str, str]]:
    """``members`` in the round's run order: a permutation drawn from ``random.Random`` seeded with the
    string ``"<seed>:<round>"`` over the members sorted by name (stable across Python versions:
    ``random.shuffle`` of a seeded generator)."""
    order = sorted((str(c), str(lid)) for c, lid in members)
    random.Random(f"{seed}:{round_no}").shuffle(order)
    return order


def round_plan(round_no: int, order: Sequence[tuple[str, str]], design: str, why: str, settings: RoundSettings
               ) -> dict[str, Any]:
    """The plan of one round, as results/rounds/round-<r>/plan.json holds it (``contracts.rounds.RoundPlan``)."""
    return RoundPlan(round=round_no, design=Design(design), why=why, seed=settings.seed,
                     order=tuple((str(c), str(lid)) for c, lid in order),
                     budget=settings.budget()).to_dict()


def planned_order(launches: Mapping[str, int], baseline: str | None, aa_control: bool, seed: int,
                  first_round_baseline: int = 1) -> list[tuple[str, str]]:
    """Every planned (configuration, launch) in run order: round 1's order, round 2's, ..."""
    return [item for r in range(1, planned_rounds(launches) + 1)
            for item in round_order(planned_members(launches, baseline, aa_control, r, first_round_baseline),
                                    seed, r)]


def round_of(launch: str, rounds_planned: int) -> int:
    """The round a launch id runs in (``contracts.layout.launch_round``): its number, the baseline's ``1b``,
    ``1c``, ... in round 1, and the A/A control in round 1 (which every sweep has, so that raising ``launches``
    never moves, and so never reruns, a measured A/A control)."""
    r = launch_round(launch)
    if r is None:
        raise ValueError(f"launch {launch!r}: not a launch id (1, 2, ..., 1b, 1c, ..., or {CONTROL})")
    return r


def round_priorities(order: Sequence[Sequence[str]], round_no: int = 1) -> dict[tuple[str, str], float]:
    """The job priority of every launch of a round: strictly decreasing along its round's order, within the
    band (``PRIORITY_CEILING`` / (r + 1), ``PRIORITY_CEILING`` / r) of round r, so that every launch of a round
    comes before any of the next round's. The planned rounds' launches all exist at once (a sequential
    launch takes no round plan as input, so nothing else keeps round 2 after round 1); an extra round's
    exist only once the judgement before it is written."""
    n = len(order)
    top, bottom = PRIORITY_CEILING / round_no, PRIORITY_CEILING / (round_no + 1)
    return {(str(item[0]), str(item[1])): bottom + (top - bottom) * (n - k) / (n + 1) for k, item in enumerate(order)}


def priority_in_round(order: Sequence[Sequence[str]], config: str, launch: str, round_no: int = 1) -> float:
    """The job priority of one launch (``round_priorities``)."""
    return round_priorities(order, round_no)[(config, launch)]


def position_in_round(order: Sequence[Sequence[str]], config: str, launch: str) -> int:
    """1-based place of (config, launch) in its round's order."""
    return [tuple(item) for item in order].index((config, launch)) + 1
