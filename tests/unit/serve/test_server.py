"""Server supervision against real processes: readiness, death, leftovers, teardown."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from specsweep.serve.server import LaunchError, Server, free_port


def _http_server(root: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)]


def _server(argv, port, tmp_path, ready_path="/ready") -> Server:
    return Server(argv=argv, env=dict(os.environ), host="127.0.0.1", port=port, ready_path=ready_path,
                  log_file=(tmp_path / "server.log").open("wb"))


def test_ready_when_endpoint_answers(tmp_path):
    (tmp_path / "ready").write_text("ok")
    port = free_port("127.0.0.1")
    with _server(_http_server(tmp_path, port), port, tmp_path) as server:
        assert server.wait_ready(20) < 20
        assert server.alive()
    assert not server.alive()


def test_process_dying_during_startup_is_noticed_quickly(tmp_path):
    port = free_port("127.0.0.1")
    argv = [sys.executable, "-c", "import sys; print('bad flag --nope', file=sys.stderr); sys.exit(3)"]
    t0 = time.monotonic()
    with _server(argv, port, tmp_path) as server, pytest.raises(LaunchError) as info:
        server.wait_ready(60)
    assert info.value.reason == "server_exited" and "code 3" in info.value.detail
    assert time.monotonic() - t0 < 10
    assert "bad flag --nope" in (tmp_path / "server.log").read_text()


def test_readiness_timeout(tmp_path):
    port = free_port("127.0.0.1")
    # Serves, but never has /ready.
    with _server(_http_server(tmp_path, port), port, tmp_path) as server, pytest.raises(LaunchError) as info:
        server.wait_ready(2)
    assert info.value.stage == "ready" and info.value.reason == "ready_timeout"


def test_leftover_server_on_the_port_is_not_mistaken_for_ours(tmp_path):
    with socket.socket() as leftover:
        leftover.bind(("127.0.0.1", 0))
        leftover.listen()
        port = leftover.getsockname()[1]
        server = _server([sys.executable, "-c", "pass"], port, tmp_path)
        with pytest.raises(LaunchError) as info:
            server.start()
        assert info.value.reason == "port_in_use"
        assert server.proc is None


def _gone(pid: int, timeout: float) -> bool:
    """True once ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_stop_ends_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen(['sleep', '300']); open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    port = free_port("127.0.0.1")
    server = _server([sys.executable, "-c", code], port, tmp_path)
    server.start()
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    server.stop()
    assert _gone(child, timeout=5)
    server.stop()  # twice is harmless
