"""A side-by-side round's shared files and what one job reads of another's processes (``serve.sidebyside``).

* ``Registry``: the round's directory, ``<lock_dir>/rounds/<key>/`` (key: the checkout, the round plan's
  path and the round): one small JSON file per launch (run id, job pid and start time, the server's
  process group, its state) and ``turn.json`` (whose window was last). Every write is a rename
  (``_write_small``), so a reader sees a whole file, and a ``DirWatch`` sees every change.
* ``DirWatch``: sleeps in the kernel until a file of the directory is replaced (inotify(7)).
* processes: whether a job still runs (``job_alive``), the CPU time of a server's process group
  (``group_cpu_s``), from ``/proc/<pid>/stat`` (proc(5): field 3 state, 5 pgrp, 14 utime, 15 stime,
  22 starttime; utime and stime in clock ticks, ``SC_CLK_TCK``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROUNDS_DIR = "rounds"
TURN_FILE = "turn.json"
#: How often ``DirWatch.wait`` polls where inotify is missing.
POLL_S = 0.02
#: inotify(7): a file renamed into the watched directory (every write here is a rename: ``_write_small``).
_IN_MOVED_TO = 0x00000080
_CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------ processes


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` from field 3 on (after the command's closing parenthesis), or None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot; field 22): with the pid, who it is."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def job_alive(entry: Mapping[str, Any]) -> bool:
    """The entry's job process still runs: its pid with the same start time (not a reused pid), and not a
    zombie (dead, its parent has not collected it yet)."""
    fields = _stat(entry.get("job_pid") or 0)
    return fields is not None and fields[0] not in ("Z", "X") and int(fields[19]) == entry.get("job_start")


def groups_cpu_s(pgids: Iterable[int]) -> dict[int, float | None]:
    """CPU seconds (utime + stime) of every live process of each process group, by group, in one pass over
    ``/proc``; None for a group without a live process."""
    ticks: dict[int, int | None] = dict.fromkeys(pgids)
    if not ticks:
        return {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(entry)
        if fields and (group := int(fields[2])) in ticks:  # field 5: pgrp
            ticks[group] = (ticks[group] or 0) + int(fields[11]) + int(fields[12])  # fields 14, 15: utime, stime
    return {g: None if t is None else t * _CLOCK_TICK_S for g, t in ticks.items()}


def group_cpu_s(pgid: int) -> float | None:
    """``groups_cpu_s`` of one group."""
    return groups_cpu_s([pgid])[pgid]


# ------------------------------------------------------------ the round's directory


def _write_small(path: Path, obj: Any) -> None:
    """Atomic (rename) but not fsynced: a coordination file between live processes, not a result."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, sort_keys=True))
    os.replace(tmp, path)


def _read_small(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _entry_name(config: str, launch: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{config}@{launch}")
    return f"{safe}.json"


class Registry:
    """The round's directory: one entry per launch, and whose turn it is."""

    def __init__(self, lock_dir: Path, workdir: Path, plan_path: Path, round_no: int) -> None:
        identity = f"{os.path.realpath(workdir)}\0{os.path.realpath(plan_path)}\0{round_no}"
        self.dir = Path(lock_dir) / ROUNDS_DIR / hashlib.sha256(identity.encode()).hexdigest()[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        for d in (self.dir.parent, self.dir):
            with contextlib.suppress(PermissionError):
                os.chmod(d, 0o1777)  # like the lock directory: every user of the host meets here

    def write(self, config: str, launch: str, entry: Mapping[str, Any]) -> None:
        _write_small(self.dir / _entry_name(config, launch), dict(entry))

    def read(self, config: str, launch: str) -> dict[str, Any] | None:
        return _read_small(self.dir / _entry_name(config, launch))

    def last_turn(self) -> int:
        return int((_read_small(self.dir / TURN_FILE) or {}).get("last") or 0)

    def pass_turn(self, position: int, by: str, window: int) -> None:
        _write_small(self.dir / TURN_FILE, {"last": position, "by": by, "window": window, "at": time.time()})


class DirWatch:
    """Wakes a waiting job when a file of a directory is replaced (inotify(7), ``IN_MOVED_TO``), so that
    waiting for a turn costs no CPU; without inotify (or ``path`` None) ``wait`` sleeps ``POLL_S``."""

    def __init__(self, path: Path | None) -> None:
        self.fd: int | None = None
        if path is None:
            return
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        if libc.inotify_add_watch(fd, os.fsencode(path), _IN_MOVED_TO) < 0:
            os.close(fd)
            return
        self.fd = fd

    def drain(self) -> None:
        """Forget the changes seen so far."""
        if self.fd is None:
            return
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, 4096):
                pass

    async def wait(self, timeout_s: float) -> None:
        """Until a file is replaced after the last ``drain``, or ``timeout_s``."""
        if self.fd is None:
            await asyncio.sleep(POLL_S)
            return
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        loop.add_reader(self.fd, changed.set)
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def next_turn(members: list[int], last: int) -> int | None:
    """Whose window is next: the first position after ``last`` among ``members`` (in rotation), cyclically."""
    ordered = sorted(members)
    return next((m for m in ordered if m > last), ordered[0] if ordered else None)
