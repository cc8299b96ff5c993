"""Nothing outlives its run: teardown when the Snakemake process, the job or both die by any signal.

The server runs in its own session on purpose (the job, not the terminal,
decides what Ctrl-C does to it), so a ``kill -9`` of Snakemake's process
group never reaches it. Three guards close that gap, each for one way to die:

* **The server dies with its job.** The server is started through
  ``exec``-mode of this file, which sets ``PR_SET_PDEATHSIG`` (SIGTERM) and
  then ``exec``s the real argv (same pid). When the job dies, the kernel
  signals the server. Set in the child before ``exec``, not through
  ``preexec_fn`` (unsafe in a process with threads). The reference engine's
  ranks die with their rank 0 the same way (``refengine.worker``).
* **A reaper outlives the job.** A small process in its own session (so a
  group kill spares it) that reads the job's instructions on a pipe: the
  server's process group, the container label of the run. EOF before ``done``
  means the job died: it ends the group (SIGTERM, then SIGKILL after a grace)
  and removes every container labelled with the run's id. It also holds the
  host lock's descriptors until it has finished, so no other server starts
  while it cleans up.
* **The job dies with Snakemake.** ``watch_parents`` watches the chain of
  processes from the job up to the nearest Snakemake process (Snakemake runs a
  job's script through a shell, so the job's own parent may survive a
  ``kill -9`` of Snakemake) and sends the job SIGTERM when one of them is
  gone: the job then tears down as on Ctrl-C and records ``interrupted``.

Stdlib only: this file also runs by path (``python -I watchdog.py exec|reap``)
without the package on ``sys.path``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Sequence, TextIO

WATCHDOG_PATH = Path(__file__).resolve()
PR_SET_PDEATHSIG = 1
#: How often the job checks that its Snakemake parents are alive.
PARENT_POLL_S = 0.5
#: Seconds between SIGTERM and SIGKILL when the reaper ends a server group.
REAP_GRACE_S = 5.0
#: Exit status of exec mode when its parent died before the server could start.
PARENT_GONE_EXIT = 70


# --------------------------------------------------------------- exec mode (runs as the server's first image)

def exec_argv(parent_pid: int, argv: Sequence[str], python: str = sys.executable) -> list[str]:
    """``argv`` prefixed so that it gets SIGTERM when ``parent_pid`` (the job) dies."""
    return [python, "-I", str(WATCHDOG_PATH), "exec", str(parent_pid), "--", *argv]


def _exec_main(args: list[str]) -> int:
    parent = int(args[0])
    argv = args[2:] if args[1:2] == ["--"] else args[1:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            print(f"watchdog: prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}", file=sys.stderr)
            return PARENT_GONE_EXIT
    if os.getppid() != parent:
        print(f"watchdog: the job (pid {parent}) died before the server started", file=sys.stderr)
        return PARENT_GONE_EXIT
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"watchdog: cannot execute {argv[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


# ----------------------------------------------------------------------------------------------- parent watch

@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    start_ticks: int
    argv: tuple[str, ...]


def proc_info(pid: int) -> ProcInfo | None:
    """pid, parent, start time (clock ticks since boot) and argv of a live process; None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None  # a zombie has finished; only its exit status is left
    argv = tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)
    return ProcInfo(pid=pid, ppid=int(fields[1]), start_ticks=int(fields[19]), argv=argv)


def is_snakemake(argv: Sequence[str]) -> bool:
    """``snakemake ...``, ``python .../snakemake ...`` or ``python -m snakemake ...``."""
    head = [os.path.basename(a) for a in argv[:3]]
    return "snakemake" in head


def watched_chain(pid: int | None = None) -> list[ProcInfo]:
    """The processes above ``pid`` up to and including the nearest Snakemake process.

    Without a Snakemake process above (a job run by hand or by a test), only the
    direct parent: a shell or terminal further up may end while the run is
    meant to go on (``nohup``), so it is not watched.
    """
    me = proc_info(os.getpid() if pid is None else pid)
    chain: list[ProcInfo] = []
    ppid = me.ppid if me else os.getppid()
    while ppid > 1:
        info = proc_info(ppid)
        if info is None:
            break
        chain.append(info)
        if is_snakemake(info.argv):
            return chain
        ppid = info.ppid
    return chain[:1]


def _still_there(p: ProcInfo) -> bool:
    now = proc_info(p.pid)
    return now is not None and now.start_ticks == p.start_ticks


class ParentWatch:
    """A thread that sends this process SIGTERM once a watched parent is gone (``fired`` says which)."""

    def __init__(self, chain: list[ProcInfo], log: TextIO | None, poll_s: float = PARENT_POLL_S) -> None:
        self.chain = chain
        self.log = log
        self.poll_s = poll_s
        self.fired: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specsweep-parent-watch", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            for p in self.chain:
                if not _still_there(p):
                    what = "Snakemake" if is_snakemake(p.argv) else (os.path.basename(p.argv[0]) if p.argv else "?")
                    self.fired = f"parent process {p.pid} ({what}) died"
                    if self.log is not None:
                        print(f"{self.fired}: tearing the server down", file=self.log, flush=True)
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

    def start(self) -> "ParentWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * self.poll_s + 1)


@contextmanager
def watch_parents(log: TextIO | None = None) -> Iterator[ParentWatch]:
    """Watch the chain up to Snakemake (``watched_chain``) while the block runs."""
    watch = ParentWatch(watched_chain(), log).start()
    try:
        yield watch
    finally:
        watch.stop()


# ------------------------------------------------------------------------------------------------------ reaper

class Reaper:
    """Job side of the reaper: start it, tell it what to end, say ``done`` after a clean teardown."""

    def __init__(self, log: IO[str] | IO[bytes] | None, container_label: str | None, docker: str = "docker",
                 keep_fds: Sequence[int] = (), grace_s: float = REAP_GRACE_S, python: str = sys.executable) -> None:
        argv = [python, "-I", str(WATCHDOG_PATH), "reap", "--grace", str(grace_s), "--docker", docker]
        if container_label:
            argv += ["--label", container_label]
        try:
            out: Any = log.fileno() if log is not None else subprocess.DEVNULL
        except (AttributeError, OSError, ValueError):
            out = subprocess.DEVNULL  # a log without a file behind it (a test's StringIO)
        self.proc = subprocess.Popen(  # noqa: S603 - our own argv
            argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, pass_fds=tuple(keep_fds), text=True,
        )

    def _say(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the reaper is gone: nothing to tell it

    def watch_group(self, pgid: int) -> None:
        self._say(f"pgid {int(pgid)}")

    def done(self, timeout_s: float = 10.0) -> int | None:
        """The job tore down itself: the reaper exits without acting; returns its exit status."""
        self._say("done")
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None


@contextmanager
def reaper(log: IO | None, container_label: str | None, docker: str = "docker",
           keep_fds: Sequence[int] = ()) -> Iterator[Reaper]:
    """A reaper for the block; on a normal exit of the block (even by exception) it is told ``done``.

    If this process dies inside the block, the pipe closes without ``done`` and
    the reaper tears down what it was told about.
    """
    r = Reaper(log, container_label, docker, keep_fds)
    try:
        yield r
    finally:
        r.done()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _log(msg: str) -> None:
    print(f"[reaper {os.getpid()}] {msg}", flush=True)


def _reap_main(args: list[str]) -> int:
    grace, docker, label = REAP_GRACE_S, "docker", None
    it = iter(args)
    for a in it:
        if a == "--grace":
            grace = float(next(it))
        elif a == "--docker":
            docker = next(it)
        elif a == "--label":
            label = next(it)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pgids: list[int] = []
    done = False
    for line in sys.stdin:
        word, _, value = line.strip().partition(" ")
        if word == "pgid":
            pgids.append(int(value))
        elif word == "done":
            done = True
    if done:
        return 0
    containers = f" and containers labelled {label}" if label else ""
    _log(f"the server job died without tearing down: ending process groups {pgids}{containers}")
    for pgid in pgids:
        if _group_alive(pgid):
            _kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_group_alive(g) for g in pgids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in pgids:
        if _group_alive(pgid):
            _log(f"process group {pgid} still alive after {grace:g} s: SIGKILL")
            _kill_group(pgid, signal.SIGKILL)
    if label:
        _remove_containers(docker, label)
    return 0


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _remove_containers(docker: str, label: str) -> None:
    try:
        out = subprocess.run([docker, "ps", "--all", "--quiet", "--filter", f"label={label}"],  # noqa: S603
                             capture_output=True, text=True, timeout=60)
        ids = out.stdout.split()
        if ids:
            rm = subprocess.run([docker, "rm", "-f", *ids], capture_output=True, text=True, timeout=120)  # noqa: S603
            _log(f"removed containers {ids} (docker rm exit {rm.returncode})")
    except (OSError, subprocess.TimeoutExpired) as exc:
        _log(f"could not remove containers labelled {label}: {exc}")


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    sys.exit(_exec_main(rest) if mode == "exec" else _reap_main(rest))
