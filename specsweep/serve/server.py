"""A server under supervision: launch, readiness, teardown that really happens.

:class:`Server` is a context manager. It starts the server in its own process
group (``start_new_session``) or as a labelled ``docker run --rm`` container,
waits for readiness with a deadline while watching for the process to die,
and on exit ends the whole group (SIGTERM, then SIGKILL) and removes the
container. The process gets SIGTERM from the kernel when the process that
started it dies (``serve.watchdog``), whatever killed that one. A port
already answering before launch is a leftover server of some earlier run and
is reported as such, never mistaken for the new one.

:class:`AttachedServer` is a server that runs without this job (``runtime:
external``): the same readiness wait and liveness question, over HTTP only,
and no teardown.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from specsweep.contracts.vocabulary import Failure, Reason, Stage
from specsweep.serve.container import remove_container
from specsweep.serve.watchdog import exec_argv

TERM_GRACE_S = 15.0


#: How often the readiness wait asks the server (seconds): a time to ready is measured in steps of it.
READY_POLL_S = 0.25


class LaunchError(Failure):
    """The server could not be brought up, or died: a ``Failure`` raised by the job's own checks."""


def free_port(host: str) -> int:
    """A port the OS says is free now (the server binds it moments later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET ``url``; (status, body). Connection errors give status 0."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback URL we built
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


@dataclass
class Server:
    """One server process (or container) and its life.

    ``argv`` is the full command (for docker, the ``docker run`` argv); ``env``
    the complete environment of that process; ``container`` the container
    name when the runtime is docker. ``keep_fds`` are inherited by the server
    (the host lock's descriptors, so that the lock lasts as long as the server).
    """

    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    ready_path: str
    log_file: IO[bytes]
    container: str | None = None
    keep_fds: tuple[int, ...] = ()
    proc: subprocess.Popen | None = field(default=None, init=False)
    ready_s: float | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        if port_in_use(self.host, self.port):
            raise LaunchError(
                Stage.LAUNCH,
                Reason.PORT_IN_USE,
                f"{self.host}:{self.port} already answers before launch: a leftover server "
                "from an earlier run (or another program) holds it; stop it or pick another port",
            )
        self.proc = subprocess.Popen(  # noqa: S603 - argv list built from a checked plan
            exec_argv(os.getpid(), self.argv),  # the same pid after exec, with PR_SET_PDEATHSIG set
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=self.keep_fds,
        )

    def wait_ready(self, timeout_s: float, poll_s: float = READY_POLL_S) -> float:
        """Poll the readiness endpoint until 200; notice the process dying meanwhile."""
        assert self.proc is not None
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        url = self.base_url + self.ready_path
        while True:
            code = self.proc.poll()
            if code is not None:
                raise LaunchError(Stage.LAUNCH, Reason.SERVER_EXITED,
                                  f"server exited with code {code} before it was ready")
            status, _ = http_get(url, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if status == 200:
                if self.proc.poll() is not None:
                    raise LaunchError(Stage.LAUNCH, Reason.SERVER_EXITED,
                                      "readiness answered but our process has exited")
                self.ready_s = time.monotonic() - t0
                return self.ready_s
            if time.monotonic() >= deadline:
                raise LaunchError(Stage.READY, Reason.READY_TIMEOUT,
                                  f"{url} did not answer 200 within {timeout_s:g} s (last status {status})")
            time.sleep(poll_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def gone(self) -> str:
        """What ended the server, for a point that could not be measured (``alive()`` was false)."""
        code = self.proc.poll() if self.proc is not None else None
        return f"server exited with code {code}"

    def stop(self, grace_s: float = TERM_GRACE_S) -> int | None:
        """End the process group (and container): SIGTERM, SIGKILL after ``grace_s``; safe to call twice."""
        if self.container:
            remove_container(self.container)
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=TERM_GRACE_S)
        # Ranks or helpers left in the group after the leader exited.
        _signal_group(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class AttachedServer:
    """A server this job did not start (``runtime: external``): found at ``url``, never ended.

    The same face as :class:`Server` to the measuring code (``base_url``,
    ``wait_ready``, ``alive``, ``gone``), but there is no process: readiness and
    liveness are the readiness endpoint's answer, and nothing is torn down.
    """

    url: str
    ready_path: str
    proc: None = field(default=None, init=False)
    container: None = field(default=None, init=False)
    ready_s: float | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        return self.url

    def wait_ready(self, timeout_s: float, poll_s: float = READY_POLL_S) -> float:
        """Poll the readiness endpoint until 200 (a server that is still starting is waited for)."""
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        url = self.base_url + self.ready_path
        while True:
            status, _ = http_get(url, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            if status == 200:
                self.ready_s = time.monotonic() - t0
                return self.ready_s
            if time.monotonic() >= deadline:
                seen = f"last status {status}" if status else "no answer: nothing listens there"
                raise LaunchError(Stage.READY, Reason.READY_TIMEOUT,
                                  f"{url} did not answer 200 within {timeout_s:g} s ({seen}); "
                                  "runtime external measures a server that is already running: start it first")
            time.sleep(poll_s)

    def alive(self) -> bool:
        return http_get(self.base_url + self.ready_path, timeout=10)[0] == 200

    def gone(self) -> str:
        return f"the server at {self.url} no longer answers {self.ready_path}"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone: nothing left to end


def tail(path: Path, lines: int = 40, max_chars: int = 6000) -> str:
    """The last ``lines`` lines of a log (bounded in size)."""
    try:
        data = Path(path).read_bytes()[-max_chars * 2 :]
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])[-max_chars:]
