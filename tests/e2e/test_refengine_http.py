"""The reference engine as a real server subprocess on 127.0.0.1: HTTP API shapes and process lifecycle."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from specsweep.serve.server import LaunchError, free_port
from specsweep.serve.server import Server as SupervisedServer
from specsweep.testing.workflow import REPO

pytestmark = pytest.mark.slow

TINY = str(REPO / "specsweep" / "refengine" / "configs" / "tiny")
READY_LINE = "The server is fired up and ready to roll!"
SPEC_ARGS = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4"]


class Server(SupervisedServer):
    """The engine under the pipeline's own supervisor, with one difference: ``stop``
    sends SIGTERM to rank 0 only, so the tests see the engine end its own ranks."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> None:
        port = free_port("127.0.0.1")
        self.log_path = log
        super().__init__(
            argv=[sys.executable, "-m", "specsweep.refengine", "--model-path", TINY, "--port", str(port), *args],
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
            host="127.0.0.1", port=port, ready_path="/ready",
            log_file=open(log, "wb") if log else subprocess.DEVNULL,
        )
        self.base = self.base_url
        self.start()

    def wait_ready(self, timeout_s: float = 120) -> float:
        try:
            return super().wait_ready(timeout_s)
        except LaunchError as exc:
            raise RuntimeError(f"{exc}: {self.log_text()[-3000:]}") from exc

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def _get(base: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _post(base: str, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _sse(base: str, path: str, body: dict[str, Any]) -> list[Any]:
    req = urllib.request.Request(base + path, data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    events: list[Any] = []
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        for raw in r:
            line = raw.decode().strip()
            if not line:
                continue
            assert line.startswith("data: ")
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not a running rank
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout_s: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("refengine") / "server.log"
    s = Server(["--tp-size", "2", "--all-reduce-backend", "shm", *SPEC_ARGS],
               env={"SGLANG_SIMULATE_ACC_LEN": "2.5"}, log=log)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def test_log_names_backend_and_readiness(server: Server) -> None:
    text = server.log_text()
    assert "all-reduce backend: shm (world_size=2)" in text
    assert READY_LINE in text


def test_ready_health(server: Server) -> None:
    for path in ("/ready", "/health", "/health_generate"):
        assert _get(server.base, path)[0] == 200, path


def test_generate_non_streaming(server: Server) -> None:
    status, raw = _post(server.base, "/generate", {"text": "Hello world", "sampling_params": {
        "max_new_tokens": 20, "temperature": 0.0, "ignore_eos": True}})
    assert status == 200
    out = json.loads(raw)
    meta = out["meta_info"]
    assert isinstance(out["text"], str) and len(out["output_ids"]) == 20
    assert meta["prompt_tokens"] == len(b"Hello world")
    assert meta["completion_tokens"] == 20
    assert meta["finish_reason"] == {"type": "length", "length": 20}
    assert meta["e2e_latency"] > 0
    assert meta["spec_verify_ct"] >= 1
    assert meta["spec_accept_length"] == pytest.approx(20 / meta["spec_verify_ct"])
    t = meta["timing"]
    assert set(t) >= {"draft_s", "verify_s", "verify_comm_s", "allreduce_ct", "forward_ct"}
    assert t["forward_ct"] == meta["spec_verify_ct"]
    assert t["allreduce_ct"] == 2 * 10 * t["forward_ct"]  # tiny config: 10 layers
    assert 0 < t["verify_comm_s"] < t["verify_s"] and t["draft_s"] > 0


def test_generate_deterministic_and_input_ids(server: Server) -> None:
    body = {"input_ids": [72, 105, 33], "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
    a = json.loads(_post(server.base, "/generate", body)[1])
    b = json.loads(_post(server.base, "/generate", body)[1])
    assert a["output_ids"] == b["output_ids"]
    assert a["meta_info"]["prompt_tokens"] == 3


def test_generate_streaming(server: Server) -> None:
    events = _sse(server.base, "/generate", {"text": "stream me", "sampling_params": {
        "max_new_tokens": 16, "ignore_eos": True}})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len(chunks) >= 2
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 16
    assert all(len(c["output_ids"]) == c["meta_info"]["completion_tokens"] for c in chunks)
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert "e2e_latency" in chunks[-1]["meta_info"]


def test_completions(server: Server) -> None:
    status, raw = _post(server.base, "/v1/completions", {"model": "x", "prompt": "abc", "max_tokens": 8,
                                                         "ignore_eos": True})
    assert status == 200
    out = json.loads(raw)
    assert out["object"] == "text_completion"
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11}
    events = _sse(server.base, "/v1/completions", {"prompt": "abc", "max_tokens": 8, "ignore_eos": True})
    assert events[-1] == "[DONE]"
    last = events[-2]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"]["completion_tokens"] == 8
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == out["choices"][0]["text"]


def test_concurrent_requests(server: Server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    bodies = [{"text": f"req {i}", "sampling_params": {"max_new_tokens": 10 + i, "ignore_eos": True}}
              for i in range(6)]
    with ThreadPoolExecutor(6) as ex:
        results = list(ex.map(lambda b: json.loads(_post(server.base, "/generate", b)[1]), bodies))
    assert [r["meta_info"]["completion_tokens"] for r in results] == [10 + i for i in range(6)]
    # Batched with others or alone, a request gets the same tokens.
    alone = json.loads(_post(server.base, "/generate", bodies[3])[1])
    assert alone["output_ids"] == results[3]["output_ids"]


def _running(server: Server) -> float:
    raw = _get(server.base, "/metrics")[1].decode()
    return next(s.value for fam in text_string_to_metric_families(raw) for s in fam.samples
                if s.name == "sglang:num_running_reqs")


def test_client_disconnect_aborts_request(server: Server) -> None:
    body = {"text": "long", "stream": True, "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}}
    req = urllib.request.Request(server.base + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        r.readline()  # first chunk arrived: the request is running
        assert _running(server) == 1
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _running(server) != 0:
        time.sleep(0.2)
    assert _running(server) == 0


def test_bad_request_is_400(server: Server) -> None:
    assert _post(server.base, "/generate", {"sampling_params": {}})[0] == 400
    assert _post(server.base, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 10**6}})[0] == 400


def test_server_info(server: Server) -> None:
    _post(server.base, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}})
    for path in ("/server_info", "/get_server_info"):
        status, raw = _get(server.base, path)
        assert status == 200
        info = json.loads(raw)
        assert info["tp_size"] == 2 and info["all_reduce_backend"] == "shm"
        assert info["speculative_num_steps"] == 3
        assert info["internal_states"][0]["avg_spec_accept_length"] > 1.0
        assert info["pid"] == server.proc.pid and len(info["rank_pids"]) == 2
        assert info["environment"]["SGLANG_SIMULATE_ACC_LEN"] == "2.5"
        assert info["environment"]["OMP_NUM_THREADS"] == "1"
        assert "torch" in info["versions"]


def test_metrics_parse(server: Server) -> None:
    _post(server.base, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}})
    status, raw = _get(server.base, "/metrics")
    assert status == 200
    samples = {s.name: s.value for fam in text_string_to_metric_families(raw.decode()) for s in fam.samples}
    for name in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
                 "sglang:spec_accept_length", "sglang:time_to_first_token_seconds_count",
                 "refengine:verify_allreduce_seconds_total"):
        assert name in samples, name
    assert samples["sglang:generation_tokens_total"] >= 8


def test_profile_writes_traces(server: Server, tmp_path: Path) -> None:
    out = tmp_path / "prof"
    assert _post(server.base, "/start_profile", {"output_dir": str(out)})[0] == 200
    _post(server.base, "/generate", {"text": "p", "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}})
    status, raw = _post(server.base, "/stop_profile", {})
    assert status == 200
    assert len(json.loads(raw)["files"]) == 2  # every rank's trace, written before the answer
    assert sorted(p.name.split("-TP-")[1] for p in out.iterdir()) == ["0.trace.json.gz", "1.trace.json.gz"]
    # num_steps: stops by itself.
    out2 = tmp_path / "prof2"
    assert _post(server.base, "/start_profile", {"output_dir": str(out2), "num_steps": 2})[0] == 200
    _post(server.base, "/generate", {"text": "p", "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(list(out2.glob("*.trace.json.gz"))) < 2:
        time.sleep(0.2)
    assert len(list(out2.glob("*.trace.json.gz"))) == 2


# ------------------------------------------------------------------ lifecycle
def test_bad_flag_exits_nonzero_naming_it() -> None:
    r = subprocess.run([sys.executable, "-m", "specsweep.refengine", "--no-such-flag", "3"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--no-such-flag" in r.stderr


def test_bad_combination_exits_nonzero() -> None:
    r = subprocess.run([sys.executable, "-m", "specsweep.refengine", "--speculative-algorithm", "EAGLE3",
                        "--speculative-num-steps", "3"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "--speculative-eagle-topk" in r.stderr


def test_unavailable_backend_fails_clearly(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    s = Server(["--device", "cuda", "--all-reduce-backend", "nccl"], log=tmp_path / "log")
    assert s.proc.wait(timeout=60) != 0
    assert "CUDA is not available" in s.log_text()


def test_sigterm_leaves_no_rank(tmp_path: Path) -> None:
    s = Server(["--tp-size", "2", "--all-reduce-backend", "gloo", *SPEC_ARGS], log=tmp_path / "log")
    try:
        s.wait_ready()
        pids = json.loads(_get(s.base, "/server_info")[1])["rank_pids"]
        assert len(pids) == 2
    finally:
        code = s.stop()
    assert code == 0
    assert _wait_gone(pids) == []


def test_rank_death_fails_server(tmp_path: Path) -> None:
    s = Server(["--tp-size", "2", *SPEC_ARGS], log=tmp_path / "log")
    try:
        s.wait_ready()
        pids = json.loads(_get(s.base, "/server_info")[1])["rank_pids"]
        os.kill(pids[1], signal.SIGKILL)
        code = s.proc.wait(timeout=30)
    finally:
        s.stop()
    assert code != 0
    assert "exited unexpectedly" in s.log_text()
    assert _wait_gone(pids) == []


def test_rank0_death_takes_followers(tmp_path: Path) -> None:
    s = Server(["--tp-size", "2"], log=tmp_path / "log")
    try:
        s.wait_ready()
        pids = json.loads(_get(s.base, "/server_info")[1])["rank_pids"]
        os.kill(pids[0], signal.SIGKILL)
        s.proc.wait(timeout=30)
    finally:
        s.stop()
    assert _wait_gone(pids) == []


def test_group_sigterm_mid_request_exits_cleanly(tmp_path: Path) -> None:
    """A supervisor's killpg(SIGTERM) during a request ends every rank and is not reported as a failure."""
    import threading

    s = Server(["--tp-size", "2", *SPEC_ARGS], log=tmp_path / "log")
    try:
        s.wait_ready()
        pids = json.loads(_get(s.base, "/server_info")[1])["rank_pids"]
        body = {"text": "long", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
        outcome: list[BaseException] = []

        def request() -> None:
            try:
                _post(s.base, "/generate", body)
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
                outcome.append(exc)  # expected: the server goes away mid-request

        threading.Thread(target=request, daemon=True).start()
        time.sleep(1.0)
        os.killpg(s.proc.pid, signal.SIGTERM)
        code = s.proc.wait(timeout=30)
    finally:
        s.stop()
    assert code == 0, s.log_text()[-2000:]
    assert _wait_gone(pids) == []
