"""One server per host: a lock that every specsweep process on the host respects.

Why a file lock and not Snakemake's ``server=1`` resource: a resource holds
only inside one Snakemake process, and ``--resources`` on the command line
replaces the profile's block (dropping ``server: 1``). Two invocations in one
directory, two checkouts, or a command-line override then ran two servers at
once, and both numbers came out ``ok``. The lock here lives in the kernel:

* ``flock(2)`` on ``<lock_dir>/host.lock`` (and ``gpu-<id>.lock`` for each GPU
  the server uses). The kernel drops it when the last file descriptor of its
  open file description is closed, so it dies with its holder, also on
  ``kill -9``; nothing stale is ever left to clean up. The lock files are
  never deleted (deleting a flock file races with the next opener).
* ``lock_dir`` defaults to ``/tmp/specsweep-locks``: ``/tmp`` exists on every
  Linux host and is writable by every user (sticky bit), so two users, two
  checkouts and two Snakemake invocations all meet there. ``/run/lock`` is
  root-only on some distributions (Fedora, RHEL) and ``/run/user/<uid>`` is
  per user, so neither is host-wide for everyone. Where ``/tmp`` is private
  (systemd ``PrivateTmp=``, Slurm's ``job_container/tmpfs``), set
  ``SPECSWEEP_LOCK_DIR`` to a directory every job of the host sees.
* The holder writes who it is (pid, config, checkout, run id) into the lock
  file, so that a waiting job can say whom it waits for.

The server job takes the lock before it touches its output files and keeps
it until its outcome is written (``serve.job.run_config``); the server itself
inherits the descriptor, so the lock is held until the server's last process
is gone, even when the job dies first. In a round measured side by side
(``serve.sidebyside``) the lock guards the measurement, not the server: a job
holds it for each of its short measuring windows, and for its life only a lock
of its own launch (so that an orphan and its rerun never write one file).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

DEFAULT_LOCK_DIR = Path("/tmp/specsweep-locks")
#: How long a server job waits for the host by default before it fails with ``host_busy``.
DEFAULT_WAIT_S = 3600.0
#: A waiting job repeats its message this often.
MESSAGE_EVERY_S = 60.0
#: The terminal hears of a wait only once it lasted this long (the log at once): a short wait is said with the
#: job's launching line instead, one line for it rather than two.
NOTICE_AFTER_S = 10.0
#: ... and then this often (the log every MESSAGE_EVERY_S): a long wait stays a few lines of the run's screen.
NOTICE_EVERY_S = 300.0
POLL_S = 0.5


class HostBusy(RuntimeError):
    """The host lock was not free within the wait; ``holder`` says who held it."""

    def __init__(self, message: str, holder: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass(frozen=True)
class LockSettings:
    """Where the host's locks live and how long a job waits for them.

    ``wait_s`` = 0 fails at once when the host is busy.
    """

    lock_dir: Path = DEFAULT_LOCK_DIR
    wait_s: float = DEFAULT_WAIT_S

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "LockSettings":
        """``SPECSWEEP_LOCK_DIR`` and ``SPECSWEEP_LOCK_WAIT_S`` (how to run, not what to measure: no rerun)."""
        wait = environ.get("SPECSWEEP_LOCK_WAIT_S")
        try:
            wait_s = float(wait) if wait not in (None, "") else DEFAULT_WAIT_S
        except ValueError:
            raise ValueError(f"SPECSWEEP_LOCK_WAIT_S={wait!r}: expected seconds (a number >= 0)") from None
        if wait_s < 0:
            raise ValueError(f"SPECSWEEP_LOCK_WAIT_S={wait!r}: expected seconds (a number >= 0)")
        return cls(lock_dir=Path(environ.get("SPECSWEEP_LOCK_DIR") or DEFAULT_LOCK_DIR), wait_s=wait_s)


def lock_names(gpu_ids: Sequence[str]) -> list[str]:
    """The lock files a server takes: the host's, then one per GPU it uses (sorted, so no two jobs deadlock)."""
    return ["host.lock", *sorted({f"gpu-{_safe(g)}.lock" for g in gpu_ids})]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def _open_lock_file(path: Path) -> int:
    """Open (creating it) a lock file every user of the host can lock and write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path.parent, 0o1777)  # like /tmp: everyone may create, nobody may delete another's file
    except PermissionError:
        pass  # made by another user, who set the mode already
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)  # flock works on a read-only descriptor too
    try:
        os.fchmod(fd, 0o666)
    except PermissionError:
        pass
    return fd


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


def read_holder(path: Path) -> dict[str, Any] | None:
    """What the last holder of a lock file wrote about itself (None when empty or unreadable)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def is_held(path: Path) -> bool:
    """Whether some process holds the lock on ``path`` now (probes without keeping it)."""
    if not Path(path).exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "an unknown process (it wrote nothing into the lock file)"
    of = f" of {holder['checkout']}" if holder.get("checkout") else ""  # a holder that wrote none: no "of None"
    return (f"pid {holder.get('pid')} (configuration {holder.get('config')!r}{of}, "
            f"run {holder.get('run_id')}, since {time.strftime('%H:%M:%S', time.localtime(holder.get('since', 0)))})")


@dataclass
class HostLock:
    """The held locks of one server job: file descriptors (inherited by the server) and what was waited."""

    fds: list[int]
    paths: list[Path]
    waited_s: float
    acquired_at: float
    waited_for: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """For launch.json: which locks, how long the job waited, and for whom."""
        return {"paths": [str(p) for p in self.paths], "waited_s": round(self.waited_s, 3),
                "acquired_at": self.acquired_at, "waited_for": self.waited_for}

    def release(self) -> None:
        """Close our descriptors (no ``LOCK_UN``, which would also end the lock of every process that
        inherited them): the lock lasts until the server and the reaper, if they still run, are gone."""
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []


def acquire(
    settings: LockSettings,
    holder: dict[str, Any],
    gpu_ids: Sequence[str] = (),
    log: TextIO | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    names: Sequence[str] | None = None,
    notice: TextIO | None = None,
) -> HostLock:
    """Take the host lock (and the GPUs' locks), waiting up to ``settings.wait_s``.

    While waiting, says so on ``log`` at once and every ``MESSAGE_EVERY_S``,
    naming the holder, and on ``notice`` (the terminal) once the wait lasted
    ``NOTICE_AFTER_S``, then every ``NOTICE_EVERY_S``; how long it waited goes
    to ``log`` only (the job says it on the terminal with its next line). Raises
    ``HostBusy`` when the wait is over. ``names``: other lock files of
    ``lock_dir`` instead (a side-by-side launch's own lock: ``serve.sidebyside``).
    """
    names = list(names) if names is not None else lock_names(gpu_ids)
    paths = [settings.lock_dir / n for n in names]
    fds: list[int] = []
    t0 = clock()
    next_message, next_notice = t0, t0 + NOTICE_AFTER_S
    waited_for: list[dict[str, Any]] = []
    try:
        for path in paths:
            fd = _open_lock_file(path)
            fds.append(fd)
            while not _try_lock(fd):
                now = clock()
                other = read_holder(path)
                if other and other not in waited_for:
                    waited_for.append(other)
                if now - t0 >= settings.wait_s:
                    raise HostBusy(
                        f"{path} is held by {describe_holder(other)}; waited {now - t0:.0f} s "
                        f"(SPECSWEEP_LOCK_WAIT_S={settings.wait_s:g}); only one specsweep server may run on a host",
                        other,
                    )
                message = (f"waiting for the host (configuration {holder.get('config')!r}): {path} is held by "
                           f"{describe_holder(other)} (waited {now - t0:.0f} s of at most {settings.wait_s:g} s)")
                if log is not None and now >= next_message:
                    print(message, file=log, flush=True)
                    next_message = now + MESSAGE_EVERY_S
                if notice is not None and now >= next_notice:
                    print(message, file=notice, flush=True)
                    next_notice = now + NOTICE_EVERY_S
                time.sleep(POLL_S)
        info = dict(holder, pid=os.getpid(), since=time.time())
        data = (json.dumps(info, sort_keys=True) + "\n").encode()
        for fd in fds:
            _write_holder(fd, data)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    lock = HostLock(fds=fds, paths=paths, waited_s=clock() - t0, acquired_at=time.time(), waited_for=waited_for)
    if log is not None and lock.waited_s >= POLL_S:
        print(f"host lock acquired after {lock.waited_s:.1f} s", file=log, flush=True)
    return lock


def _write_holder(fd: int, data: bytes) -> None:
    """Replace the lock file's content with ``data`` (we hold its lock; readers may see it half-written)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # a read-only descriptor (another user's file): the lock holds, only the note is missing


@contextmanager
def host_lock(
    settings: LockSettings, holder: dict[str, Any], gpu_ids: Sequence[str] = (), log: TextIO | None = None
) -> Iterator[HostLock]:
    """``acquire`` as a context manager: the locks are released on exit (and by the kernel on any death)."""
    lock = acquire(settings, holder, gpu_ids, log)
    try:
        yield lock
    finally:
        lock.release()


def current_holders(lock_dir: Path) -> list[dict[str, Any]]:
    """Locks of ``lock_dir`` held right now, each with what its holder wrote (for the host guard)."""
    out = []
    for path in sorted(Path(lock_dir).glob("*.lock")):
        try:
            if is_held(path):
                out.append({"lock": path.name, **(read_holder(path) or {})})
        except OSError:
            continue
    return out
