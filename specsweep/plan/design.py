"""Which design a round runs in: side by side where every server fits on the host at once, else sequential.

Servers that are up at the same time and measured in turn share the machine's
drift; launches minutes apart do not (``benchmarks/bench_cpu_drift.py``: 7.9-9.4 %
between rounds against 2.1-3.4 % between servers measured side by side, record
docs/measurements/2026-12-06-cpu-quiet). So a round is measured side by side
(``serve.sidebyside``) whenever that is possible, and the report says which design
ran and why (the round plan's ``why``). Possible means every configuration's
server fits on the host at once and an idle one costs the others nothing:

* the reference engine, ``runtime: local``: on the CPU (``gpus: 0``), or on one
  and the same GPU (``gpus: 1``, one ``CUDA_VISIBLE_DEVICES``). Its idle server
  uses no CPU: the followers block on their pipe (``refengine/worker.py``) and
  the measurement checks it (``serve.sidebyside``, the partners' CPU share);
* not SGLang on a shared GPU: it sizes its KV pool from the GPU memory free when
  it starts, keeping only ``1 - mem_fraction_static`` of it back (sglang 0.5.23
  ``srt/mem_cache/kv_cache_configurator.py:2990-3007``), and the default fraction is
  nearly all of the GPU (``(GPU memory - reserve) / GPU memory``,
  ``srt/arg_groups/memory_hook.py:281-330``). Whether several fit would need the
  model's size, which no plan carries, so SGLang is measured one at a time;
* nothing with more than one GPU (the 8-GPU models), no container or external
  server, and no profiling (the micro-benchmark and the profiler trace need the
  host to themselves).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.rounds import Design
from specsweep.plan.rounds import DESIGNS

#: The config's ``rounds.design`` values (``plan.rounds.DESIGNS``): ``auto`` picks side by side where it fits.
AUTO = "auto"
REQUESTED = DESIGNS
#: The one engine whose idle server is known to block (``refengine/worker.py``) and needs no memory estimate.
SIDE_BY_SIDE_ENGINE = "reference"


class DesignError(ValueError):
    """A requested design that cannot be: the message names ``rounds.design`` and the allowed values."""


def _names(plans: Iterable[Plan]) -> str:
    return ", ".join(sorted(p.name for p in plans))


def _device(plan: Plan) -> str:
    """The GPU a one-GPU plan runs on, as far as the plan says (its ``CUDA_VISIBLE_DEVICES``, else GPU 0)."""
    visible = plan.env.get("CUDA_VISIBLE_DEVICES", "")
    return (visible.split(",")[0].strip() or "0") if plan.gpus else "cpu"


def why_not_side_by_side(plans: Iterable[Plan]) -> str | None:
    """Why these servers cannot run side by side (one sentence), or None when they all fit at once."""
    plans = list(plans)
    if not plans:
        return "no configuration to measure"
    if other := [p for p in plans if p.runtime != "local"]:
        return (f"{sorted({p.runtime for p in other})} runtime ({_names(other)}): one at a time; side-by-side "
                "measurement starts only local processes")
    if many := [p for p in plans if p.gpus > 1]:
        return f"{max(p.gpus for p in many)}-GPU servers ({_names(many)}): one at a time"
    if profiled := [p for p in plans if p.profile]:
        return (f"profiling on ({_names(profiled)}): the micro-benchmark and the profiler trace need the host "
                "to themselves; one at a time")
    devices = {_device(p) for p in plans}
    if len(devices) > 1:
        return f"servers on different devices ({', '.join(sorted(devices))}): side-by-side needs one device for all"
    if other := [p for p in plans if p.engine != SIDE_BY_SIDE_ENGINE]:
        where = "the CPU" if devices == {"cpu"} else "one GPU"
        return (f"{sorted({p.engine for p in other})} servers ({_names(other)}) on {where}: whether several fit "
                "needs the model's size, which the plan does not carry (SGLang sizes its KV pool from the memory "
                "free at its start); one at a time")
    return None


def choose_design(plans: Iterable[Plan | Mapping[str, Any]], requested: str = AUTO) -> tuple[Design, str]:
    """The design of a round of these configurations' launches, and why (one sentence for the report).

    ``requested``: the config's ``rounds.design`` (``REQUESTED``): ``auto`` is side by side where
    ``why_not_side_by_side`` finds nothing against it, else sequential; ``side-by-side`` where it cannot be
    is a ``DesignError``.
    """
    if requested not in REQUESTED:
        raise DesignError(f"rounds.design: {requested!r} is not a design; allowed: {list(REQUESTED)}")

    typed = [p if isinstance(p, Plan) else Plan.from_dict(p) for p in plans]
    if requested == Design.SEQUENTIAL:
        return Design.SEQUENTIAL, "rounds.design is sequential in the config: one server at a time"
    against = why_not_side_by_side(typed)
    if against is None:
        where = "the CPU" if {_device(p) for p in typed} == {"cpu"} else f"GPU {_device(typed[0])}"
        return Design.SIDE_BY_SIDE, (f"every server fits on {where} at once ({len(typed)} reference-engine "
                                     "configurations): up together, measured in turn, sharing the machine's drift")
    if requested == Design.SIDE_BY_SIDE:
        allowed = [AUTO, Design.SEQUENTIAL.value]
        raise DesignError(f"rounds.design: side-by-side, but {against}; allowed here: {allowed}")
    return Design.SEQUENTIAL, against
