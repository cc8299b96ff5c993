"""A quiet host: no other specsweep server running here before a server is launched (``serve.guard``), and,
for a side-by-side round's job, no job outside its round holding the host lock (``serve.lock``).

The server job's host phases (``serve.phases``: ``quiet_host``, ``quiet_host_locked``) wait here; a sequential
job never waits here while it holds the host lock, since a side-by-side round's servers, up between their
windows, take that lock for each window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TextIO

from specsweep.contracts.vocabulary import Reason, Stage
from specsweep.serve import guard
from specsweep.serve.jobspec import JobHost
from specsweep.serve.lock import NOTICE_AFTER_S, describe_holder, is_held, read_holder
from specsweep.serve.server import LaunchError


def wait_for_quiet_host(run_id: str, host: JobHost, wait_s: float, log: TextIO, config: str = "",
                        known: Callable[[], Collection[str]] | None = None, notice: TextIO | None = None,
                        lock_free: bool = False) -> dict[str, Any]:
    """Wait (up to ``wait_s``) until no other specsweep server runs here; the last sample with ``waited_s``
    (how long this wait took: the report keeps it apart from the server's own time), or ``host_busy``.
    ``known()``: run ids that do not count (a side-by-side round's partners; read after each sample).
    ``lock_free``: also wait while a job but ``known()``'s holds the host lock (``foreign_lock_holder``). The
    waiting line goes to ``log`` at once and to ``notice`` (the terminal) once the wait lasted
    ``lock.NOTICE_AFTER_S``; how long it took to ``log`` only."""
    t0 = time.monotonic()
    told = noticed = False
    while True:
        seen = guard.sample(run_id, host.docker)
        if known is not None and seen["others"]:
            ours = known()
            seen = {**seen, "others": [o for o in seen["others"] if o.get("run_id") not in ours],
                    "partners": [o for o in seen["others"] if o.get("run_id") in ours]}
        holder = foreign_lock_holder(host.lock.lock_dir, known) if lock_free and not seen["others"] else None
        if not seen["others"] and holder is None:
            waited = time.monotonic() - t0
            if told:
                print(f"the host is free after {waited:.0f} s", file=log, flush=True)
            return {**seen, "waited_s": round(waited, 3)}
        who = (f"other specsweep servers run on this host: {guard.describe(seen['others'])}" if seen["others"]
               else f"the host lock is held by {describe_holder(holder)}")
        if time.monotonic() - t0 >= wait_s:
            raise LaunchError(Stage.LAUNCH, Reason.HOST_BUSY, f"{who}; waited {time.monotonic() - t0:.0f} s; "
                              "not measuring beside them")
        message = f"waiting: {who} (before launching {config})"
        if not told:
            print(message, file=log, flush=True)
            told = True
        if notice is not None and not noticed and time.monotonic() - t0 >= NOTICE_AFTER_S:
            print(message, file=notice, flush=True)
            noticed = True
        time.sleep(max(0.5, min(host.guard_interval_s, 5.0)))


def foreign_lock_holder(lock_dir: Path, known: Callable[[], Collection[str]] | None) -> dict[str, Any] | None:
    """What the holder of the host lock wrote, when a job but ``known()``'s (a side-by-side round's partners,
    whose windows and teardowns take it) holds it now; else None. A sequential job holds it from before its
    look at the host until its server has ended: a side-by-side server started meanwhile would run beside it
    (its result ``contaminated``), and its windows would wait for it anyway."""
    path = lock_dir / "host.lock"
    if not is_held(path):
        return None
    holder = read_holder(path) or {}
    return None if known is not None and holder.get("run_id") in known() else holder
