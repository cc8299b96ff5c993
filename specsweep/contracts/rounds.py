"""A round plan: which launches of the sweep form one round, in what order, and how they are measured.

The workflow writes one file per round; every server job of the round is given
it (the ``round_plan`` input of ``benchmark_server``) and reads it as a
``RoundPlan``: its own entry (configuration, launch id) gives its position,
and every other entry is a *partner*. Two designs (``Design``):

* ``sequential``: the launches run one after another, each holding the host for
  its whole life (the server job as it always was);
* ``side-by-side``: the round's servers are up at the same time and measured in
  short alternating windows, one at a time (``serve.sidebyside``); chosen at plan
  time only where every server fits on the host at once (``plan.design``).

The workflow writes it as ``results/rounds/round-<r>/plan.json`` (``plan.rounds``:
the order, the budget; ``plan.design``: the design and why).

Format history of a round plan (JSON):
  1  format_version, round (int >= 1), design, why (one sentence), seed (int),
     order = [[config, launch], ...]: every launch of the round in run order,
     budget = {max_launches, max_minutes} (the config's ``rounds:``; optional).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

ROUND_FORMAT_VERSION = 1


class Design(StrEnum):
    """How the launches of a round are measured (a round plan's ``design``)."""

    SIDE_BY_SIDE = "side-by-side"
    SEQUENTIAL = "sequential"

    def __repr__(self) -> str:
        return repr(self.value)


#: Why a race ended with an answer (a judgement's ``ended_by``; ``workflow.rounds``, ``analysis.race``): one
#: configuration left, or every one left within ``smallest_effect`` of the best. A race the budget ended has
#: a best so far, not an answer.
ONE_LEFT = "one left"
TIE = "tie"
RACE_ANSWERED = (ONE_LEFT, TIE)


_KEYS = ("format_version", "round", "design", "why", "seed", "order")
_OPTIONAL = ("budget",)


class RoundPlanError(ValueError):
    """A round plan that cannot be read: the message names the file, the key and what is allowed."""


@dataclass(frozen=True)
class RoundPlan:
    """One round (module docstring); ``ROUND_FORMAT_VERSION``."""

    round: int
    design: Design
    why: str
    seed: int
    order: tuple[tuple[str, str], ...]
    format_version: int = ROUND_FORMAT_VERSION
    budget: Mapping[str, Any] | None = None  # the extra rounds' budget (``plan.rounds.RoundSettings``)

    @classmethod
    def from_dict(cls, data: Any, where: str = "round plan") -> RoundPlan:
        """The round a mapping holds; ``RoundPlanError`` names ``where``, the key and the allowed values."""
        if not isinstance(data, Mapping):
            raise RoundPlanError(f"{where}: expected a JSON object with keys {list(_KEYS)}")
        missing = [k for k in _KEYS if k not in data]
        unknown = sorted(set(data) - set(_KEYS) - set(_OPTIONAL))
        if missing or unknown:
            raise RoundPlanError(f"{where}: " + "; ".join(p for p in (
                f"missing keys {missing}" if missing else "", f"unknown keys {unknown}" if unknown else "") if p)
                + f" (allowed: {list(_KEYS + _OPTIONAL)})")
        if data["format_version"] != ROUND_FORMAT_VERSION:
            raise RoundPlanError(f"{where}: format_version {data['format_version']!r}; this checkout reads "
                                 f"{ROUND_FORMAT_VERSION}")
        for key in ("round", "seed"):
            if not isinstance(data[key], int) or isinstance(data[key], bool) or (key == "round" and data[key] < 1):
                raise RoundPlanError(f"{where}: {key} {data[key]!r}: expected an integer"
                                     + (" >= 1" if key == "round" else ""))
        if data["design"] not in tuple(Design):
            raise RoundPlanError(f"{where}: design {data['design']!r}: allowed {[d.value for d in Design]}")
        if not isinstance(data["why"], str) or not data["why"].strip():
            raise RoundPlanError(f"{where}: why: expected one sentence saying why this design")
        order = data["order"]
        if (not isinstance(order, list) or not order
                or not all(isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) and x for x in e)
                           for e in order)):
            raise RoundPlanError(f"{where}: order: expected a non-empty list of [configuration, launch] "
                                 f"string pairs, got {order!r}")
        pairs = tuple((c, lid) for c, lid in order)
        if len(set(pairs)) != len(pairs):
            raise RoundPlanError(f"{where}: order: a launch is listed twice: {[list(p) for p in pairs]}")
        budget = data.get("budget")
        if budget is not None and not isinstance(budget, Mapping):
            raise RoundPlanError(f"{where}: budget {budget!r}: expected an object (max_launches, max_minutes)")
        return cls(round=data["round"], design=Design(data["design"]), why=data["why"], seed=data["seed"],
                   order=pairs, budget=dict(budget) if budget is not None else None)

    def to_dict(self) -> dict[str, Any]:
        out = {"format_version": self.format_version, "round": self.round, "design": self.design.value,
               "why": self.why, "seed": self.seed, "order": [list(p) for p in self.order]}
        if self.budget is not None:
            out["budget"] = dict(self.budget)
        return out

    @classmethod
    def load(cls, path: Path | str) -> RoundPlan:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise RoundPlanError(f"{path}: not a readable JSON round plan ({exc})") from None
        return cls.from_dict(data, where=str(path))

    def position(self, config: str, launch: str) -> int:
        """1-based place of (config, launch) in the round's order; ``RoundPlanError`` when it is not in it."""
        try:
            return self.order.index((config, launch)) + 1
        except ValueError:
            raise RoundPlanError(f"round {self.round}: order has no entry [{config!r}, {launch!r}] "
                                 f"(entries: {[list(p) for p in self.order]})") from None

    def partners(self, config: str, launch: str) -> tuple[tuple[str, str], ...]:
        """Every other launch of the round, in the round's order."""
        return tuple(p for p in self.order if p != (config, launch))
