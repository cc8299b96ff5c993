"""Which design a round runs in: side by side where every server fits on the host at once, else sequential.

Servers that are up at the same time and measured in turn share the machine's
drift; launches minutes apart do not (``benchmarks/bench_cpu_drift.py``: 7.9-9.4 %
between rounds against 2.1-3.4 % between servers measured side by side, record
docs/measurements/2026-12-06-cpu-quiet). So a round is measured side by side
(``serve.sidebyside``) whenever that is possible, and the report says which design
ran and why (the round plan's ``why``). Possible means every configuration's
server fits on the host at once and an idle one costs the others nothing:

* the reference engine, ``runtime: local``: on the CPU (``gpus: 0``), or on one
  and the same GPU (``gpus: 1``, one ``CUDA_VISIBLE_DEVICES``) where their
  footprints together (``refengine.footprint``: weights, the static KV pool,
  an allowance) stay within ``GPU_SHARE`` of the GPU's memory as nvidia-smi
  reports it (six servers of 18 GiB each ran out of memory on an 80 GB H100).
  Its idle server uses no CPU: the followers block on their pipe
  (``refengine/worker.py``) and the measurement checks it
  (``serve.sidebyside``, the partners' CPU share);
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

import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.rounds import Design
from specsweep.engines.reference import ALLOWANCE_BYTES, plan_server_bytes
from specsweep.plan.rounds import DESIGNS

#: The config's ``rounds.design`` values (``plan.rounds.DESIGNS``): ``auto`` picks side by side where it fits.
AUTO = "auto"
REQUESTED = DESIGNS
#: The one engine whose idle server is known to block (``refengine/worker.py``) and needs no memory estimate.
SIDE_BY_SIDE_ENGINE = "reference"
#: The share of a GPU's memory that servers side by side may need together (the rest: what the footprint misses,
#: fragmentation).
GPU_SHARE = 0.9
GiB = 2**30


class DesignError(ValueError):
    """A requested design that cannot be: the message names ``rounds.design`` and the allowed values."""


def _names(plans: Iterable[Plan]) -> str:
    return ", ".join(sorted(p.name for p in plans))


def _device(plan: Plan) -> str:
    """The GPU a one-GPU plan runs on, as far as the plan says (its ``CUDA_VISIBLE_DEVICES``, else GPU 0)."""
    visible = plan.env.get("CUDA_VISIBLE_DEVICES", "")
    return (visible.split(",")[0].strip() or "0") if plan.gpus else "cpu"


def gpu_memory_bytes(device: str) -> int | None:
    """The total memory of GPU ``device`` as nvidia-smi reports it, or None where it cannot be read."""
    argv = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", device]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
        return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 else None  # MiB
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def why_not_on_one_gpu(plans: list[Plan], device: str, gpu_memory: Callable[[str], int | None],
                       base: Path) -> str | None:
    """Why these reference-engine servers do not fit on GPU ``device`` at once, or None when they do."""
    try:
        need = sum(plan_server_bytes(p.server_args, base) for p in plans)
    except ValueError as exc:
        return f"a model's footprint cannot be read ({exc}): one at a time"
    total = gpu_memory(device)
    if total is None:
        return (f"GPU {device}'s memory cannot be read here (nvidia-smi), so whether {len(plans)} servers fit at "
                "once is not known: one at a time")
    if need > GPU_SHARE * total:
        return (f"the {len(plans)} servers need about {need / GiB:.1f} GiB together (weights, the KV pool of "
                f"max-running-requests x context-length, {ALLOWANCE_BYTES / GiB:.0f} GiB each besides), more than "
                f"{GPU_SHARE:.0%} of GPU {device}'s {total / GiB:.1f} GiB: one at a time (a smaller context-length "
                "or max-running-requests lets them fit)")
    return None


def local_job_slots(cores: int | None) -> int:
    """How many jobs Snakemake's local executor runs at once: ``--cores`` + 5 workers, "zero thread jobs do not
    need a thread, but they occupy additional workers" (snakemake 9.27.1 ``executors/local.py:62-66``)."""
    return (cores or 0) + 5


def why_not_side_by_side(plans: Iterable[Plan], gpu_memory: Callable[[str], int | None] = gpu_memory_bytes,
                         base: Path | None = None, round_size: int | None = None,
                         job_slots: int | None = None) -> str | None:
    """Why these servers cannot run side by side (one sentence), or None when they all fit at once.

    ``gpu_memory``: a GPU's total memory in bytes (nvidia-smi); ``base``: where model paths are relative to
    (the working directory); ``round_size``: the launches of the largest round (the A/A control included);
    ``job_slots``: the jobs Snakemake runs at once here (``local_job_slots``; 0: a cluster executor; None: not
    known). A
    round's launches side by side must all run at once: on an H100 the 7th of 7 waited for a worker, was
    dropped by its partners and started its server while two of them measured (both contaminated)."""
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
    if job_slots == 0:
        return ("a cluster executor places every launch as a job of its own, on any node and at any time: one at "
                "a time")
    if round_size is not None and job_slots is not None and round_size > job_slots:
        return (f"a round's {round_size} launches side by side must run at once, and Snakemake runs {job_slots} "
                f"jobs at once here (--cores + 5): one at a time; --cores {round_size - 5} or more measures them "
                "side by side")
    if devices != {"cpu"}:
        return why_not_on_one_gpu(plans, devices.pop(), gpu_memory, base or Path.cwd())
    return None


def choose_design(plans: Iterable[Plan | Mapping[str, Any]], requested: str = AUTO,
                  gpu_memory: Callable[[str], int | None] = gpu_memory_bytes, base: Path | None = None,
                  round_size: int | None = None, job_slots: int | None = None) -> tuple[Design, str]:
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
    against = why_not_side_by_side(typed, gpu_memory, base, round_size, job_slots)
    if against is None:
        where = "the CPU" if {_device(p) for p in typed} == {"cpu"} else f"GPU {_device(typed[0])}"
        return Design.SIDE_BY_SIDE, (f"every server fits on {where} at once ({len(typed)} reference-engine "
                                     "configurations): up together, measured in turn, sharing the machine's drift")
    if requested == Design.SIDE_BY_SIDE:
        allowed = [AUTO, Design.SEQUENTIAL.value]
        raise DesignError(f"rounds.design: side-by-side, but {against}; allowed here: {allowed}")
    return Design.SEQUENTIAL, against
