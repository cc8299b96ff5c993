"""How the client issues a phase's requests: at a fixed concurrency or by seeded Poisson arrivals, and, in a
round measured side by side, in windows (``Gate``; ``serve.sidebyside``).

One loop for every phase and endpoint (``serve.client`` sends each request and keeps its record); the
windows are a hook here, around groups of requests, not in any endpoint's code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gate:
    """Measuring in windows (``serve.sidebyside``): ``_drive`` sends its requests in windows of ``requests``,
    each inside ``enter(label)`` (an async context manager entered before the window's first request and
    left once its last request has ended); ``label`` names the phase (``warmup``, ``measured``)."""

    requests: int
    enter: Callable[[str], AbstractAsyncContextManager[Any]]


async def drive(
    send: Callable[[int, int | None], Awaitable[dict[str, Any]]],
    *,
    limit: int,
    concurrency: int,
    request_rate: float | None,
    arrival_seed: str,
    should_stop: Callable[[], bool],
    on_done: Callable[[dict[str, Any]], None],
    gate: Gate | None = None,
    label: str = "",
) -> None:
    """Issue up to ``limit`` requests and wait for all of them.

    Fixed-concurrency mode keeps ``concurrency`` requests in flight. Request-
    rate mode sends request ``i`` at the ``i``-th arrival of a Poisson process
    with rate ``request_rate`` (exponential gaps from ``random.Random(
    arrival_seed)``), without a concurrency cap. ``should_stop`` is checked
    before each new request; requests already sent always complete.

    With a ``gate``, the requests go in windows of ``gate.requests``, each
    drained inside ``gate.enter(label)``; the arrival process goes on from one
    window to the next, its clock starting again when a window opens.
    """
    if request_rate is not None and request_rate <= 0:
        raise ValueError(f"request_rate must be > 0 or null, got {request_rate}")
    rng = random.Random(arrival_seed)
    if gate is None:
        await _drive_span(send, range(limit), concurrency, request_rate, rng, should_stop, on_done)
        return
    for start in range(0, limit, max(1, gate.requests)):
        if should_stop():
            return
        async with gate.enter(label):
            await _drive_span(send, range(start, min(limit, start + max(1, gate.requests))), concurrency,
                              request_rate, rng, should_stop, on_done)


async def _drive_span(send: Callable[[int, int | None], Awaitable[dict[str, Any]]], indices: range,
                      concurrency: int, request_rate: float | None, rng: random.Random,
                      should_stop: Callable[[], bool], on_done: Callable[[dict[str, Any]], None]) -> None:
    """The requests ``indices`` (``_drive``), all ended when it returns."""
    if request_rate is None:
        counter = iter(indices)

        async def worker() -> None:
            for i in counter:  # shared iterator: each index is taken once
                if should_stop():
                    return
                on_done(await send(i, None))

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(indices))))))
        return

    t_next = time.perf_counter_ns()
    tasks: list[asyncio.Task[None]] = []

    async def one(i: int, scheduled_ns: int) -> None:
        on_done(await send(i, scheduled_ns))

    for i in indices:
        if i > indices.start:
            t_next += int(rng.expovariate(request_rate) * 1e9)
        delay = (t_next - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        if should_stop():
            break
        tasks.append(asyncio.create_task(one(i, t_next)))
    await asyncio.gather(*tasks)
