"""A server this job did not start (runtime external): readiness over HTTP, provenance from its info."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from specsweep.serve.provenance import FORMAT_VERSION, from_server_info
from specsweep.serve.server import AttachedServer, LaunchError, free_port


class _Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        code = 200 if self.path == "/ready" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def answering():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ready)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_running_server_is_ready_alive_and_never_ended(answering):
    server = AttachedServer(answering, "/ready")
    assert server.wait_ready(5) < 5 and server.alive()
    assert server.proc is None and server.container is None and server.base_url == answering


def test_nothing_listening_is_a_ready_timeout_that_says_to_start_the_server_first():
    url = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    server = AttachedServer(url, "/ready")
    with pytest.raises(LaunchError) as err:
        server.wait_ready(0.5, poll_s=0.1)
    assert (err.value.stage, err.value.reason) == ("ready", "ready_timeout")
    assert "nothing listens there" in err.value.detail and "start it first" in err.value.detail
    assert not server.alive() and server.gone() == f"the server at {url} no longer answers /ready"


def test_provenance_of_an_sglang_server_says_its_environment_is_unknown():
    # The shape SGLang 0.5.23's /server_info answers (sglang/srt/entrypoints/http_server.py:863-892:
    # server_args.resolved_dict(), launch_command, scheduler info, internal_states, version): no environment.
    info = {"tp_size": 2, "speculative_algorithm": "EAGLE3", "launch_command": "python -m sglang.launch_server",
            "internal_states": [{"avg_spec_accept_length": 2.1}], "version": "0.5.23", "frontend": "python"}
    prov = from_server_info(info, "http://127.0.0.1:30000")
    assert prov["source"] == "server_info" and prov["format_version"] == FORMAT_VERSION
    assert prov["env"] is None and prov["env_source"].startswith("unknown")
    assert prov["server_versions"] == {"version": "0.5.23"}
    json.dumps(prov)


def test_provenance_of_the_reference_engine_keeps_its_filtered_environment():
    info = {"version": "refengine-0.1.0", "engine": "specsweep-refengine", "pid": 7,
            "environment": {"NCCL_ALGO": "Ring", "HOME": "/root", "SGLANG_API_KEY": "s3cret"}}
    prov = from_server_info(info, "http://127.0.0.1:30000")
    assert prov["env"] == {"NCCL_ALGO": "Ring", "SGLANG_API_KEY": "<redacted>"} and prov["pid"] == 7
