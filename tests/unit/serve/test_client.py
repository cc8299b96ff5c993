"""The streaming client against a small aiohttp server on 127.0.0.1 (real sockets)."""

from __future__ import annotations

import asyncio
import io
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest
from aiohttp import web

from specsweep.files import read_jsonl
from specsweep.records import validate_record
from specsweep.serve.client import BenchmarkError, run_workload
from specsweep.serve.payloads import make_prompt
from specsweep.testing.doubles import models, serve_app, sse

OUTPUT_LEN = 7
TOKENS_PER_CHUNK = 3  # speculation-like: several tokens per chunk -> chunks != tokens
VERIFY_CT = 2


class Behaviour:
    """What the in-test server does; tests flip attributes."""

    def __init__(self) -> None:
        self.fail_every: int | None = None  # HTTP 500 for every n-th request
        self.truncate_every: int | None = None  # close the stream before [DONE]
        self.meta_without_verify = False
        self.n = 0
        self.bodies: list[dict[str, Any]] = []


def make_app(beh: Behaviour) -> web.Application:
    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        beh.bodies.append(body)
        beh.n += 1
        if beh.fail_every and beh.n % beh.fail_every == 0:
            return web.json_response({"error": {"message": "injected"}}, status=500)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        n_out = body["sampling_params"]["max_new_tokens"]
        ids: list[int] = []
        while len(ids) < n_out:
            ids += list(range(len(ids), min(n_out, len(ids) + TOKENS_PER_CHUNK)))
            meta = {"prompt_tokens": len(body["input_ids"]), "completion_tokens": len(ids),
                    "finish_reason": {"type": "length"} if len(ids) == n_out else None}
            if not beh.meta_without_verify:
                meta.update(spec_verify_ct=VERIFY_CT, spec_accept_length=len(ids) / VERIFY_CT,
                            timing={"draft_s": 0.001, "verify_s": 0.004, "verify_comm_s": 0.003,
                                    "allreduce_ct": 10, "forward_ct": 2, "unrelated": 1})
            await resp.write(sse({"text": "x" * len(ids), "output_ids": ids, "meta_info": meta}))
            await asyncio.sleep(0.002)
        if beh.truncate_every and beh.n % beh.truncate_every == 0:
            await resp.write_eof()  # no [DONE]
            return resp
        await resp.write(sse(b"[DONE]"))
        await resp.write_eof()
        return resp

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        beh.bodies.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(body["max_tokens"]):
            await resp.write(sse({"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None}]}))
        await resp.write(sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"]}}))
        await resp.write(sse(b"[DONE]"))
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/completions", completions)
    return app


@pytest.fixture()
def server() -> Iterator[tuple[str, Behaviour]]:
    """The app served on 127.0.0.1 from a background thread (``testing.doubles.serve_app``)."""
    beh = Behaviour()
    with serve_app(make_app(beh)) as url:
        yield url, beh


def workload(**kw: Any) -> dict[str, Any]:
    w = {"endpoint": "generate", "num_prompts": 5, "input_len": 6, "output_len": OUTPUT_LEN, "concurrency": 2,
         "request_rate": None, "repeats": 2, "seed": 3, "temperature": 0.0, "request_timeout_s": 5,
         "warmup": {"window": 2, "tolerance": 10.0, "min_windows": 2, "max_requests": 6}}
    w.update(kw)
    return w


def test_generate_records(server, tmp_path: Path):
    url, beh = server
    log = io.StringIO()
    rep = run_workload(url, workload(), tmp_path / "w.jsonl", tmp_path / "m.jsonl", log)
    assert rep["converged"] is True and rep["requests"] >= 4 and len(rep["windows_tok_s"]) >= 2
    assert rep["tolerance"] == 10.0
    warm, meas = read_jsonl(tmp_path / "w.jsonl"), read_jsonl(tmp_path / "m.jsonl")
    assert len(meas) == 10 and {r["repeat"] for r in meas} == {0, 1}
    assert all(r["phase"] == "warmup" for r in warm) and all(r["phase"] == "measured" for r in meas)
    assert len({r["run_id"] for r in warm + meas}) == 1
    for r in warm + meas:
        assert validate_record(r) == []
        assert r["status"] == "ok"
        # tokens come from meta_info, not from counting chunks (3 chunks here, 7 tokens)
        assert r["completion_tokens"] == OUTPUT_LEN and len(r["chunk_ns"]) == 3
        assert r["chunk_tokens"] == [3, 3, 1]
        assert r["spec_verify_ct"] == VERIFY_CT and r["prompt_tokens"] == 6
        assert set(r["timing"]) == {"draft_s", "verify_s", "verify_comm_s", "allreduce_ct", "forward_ct"}
        assert r["send_ns"] < r["chunk_ns"][0] <= r["chunk_ns"][-1] <= r["end_ns"]
    body = beh.bodies[0]
    assert body["stream"] is True and body["sampling_params"]["ignore_eos"] is True
    assert body["sampling_params"]["max_new_tokens"] == OUTPUT_LEN
    assert body["input_ids"] == make_prompt(3, "warmup", None, 0, 6).input_ids
    assert "[measured 2/2] 5/5 requests" in log.getvalue()


def test_completions_endpoint(server, tmp_path: Path):
    url, beh = server
    run_workload(url, workload(endpoint="completions", repeats=1), tmp_path / "w.jsonl", tmp_path / "m.jsonl",
                 io.StringIO())
    meas = read_jsonl(tmp_path / "m.jsonl")
    assert len(meas) == 5
    for r in meas:
        assert r["status"] == "ok" and r["completion_tokens"] == OUTPUT_LEN and r["prompt_tokens"] == 5
        assert r["chunk_tokens"] == [None] * OUTPUT_LEN + [0]  # text deltas; the usage chunk carries none
        assert r["spec_verify_ct"] is None
    body = beh.bodies[-1]
    assert isinstance(body["prompt"], str) and body["max_tokens"] == OUTPUT_LEN and body["ignore_eos"] is True
    assert body["model"] == "served-model" and body["stream_options"] == {"include_usage": True}


def test_failed_and_incomplete_are_recorded_not_dropped(server, tmp_path: Path):
    url, beh = server
    beh.fail_every, beh.truncate_every = 4, 5
    run_workload(url, workload(concurrency=1, repeats=1, num_prompts=10), tmp_path / "w.jsonl",
                 tmp_path / "m.jsonl", io.StringIO())
    recs = read_jsonl(tmp_path / "w.jsonl") + read_jsonl(tmp_path / "m.jsonl")
    statuses = [r["status"] for r in recs]
    assert statuses.count("error") >= 1 and statuses.count("incomplete") >= 1
    err = next(r for r in recs if r["status"] == "error")
    assert err["http_status"] == 500 and "injected" in err["error"]
    inc = next(r for r in recs if r["status"] == "incomplete")
    assert "[DONE]" in inc["error"] and inc["chunk_ns"]
    assert len(read_jsonl(tmp_path / "m.jsonl")) == 10


def test_poisson_arrivals_are_seeded(server, tmp_path: Path):
    url, _ = server
    gaps = []
    for k in range(2):
        run_workload(url, workload(request_rate=200.0, repeats=1, num_prompts=6), tmp_path / f"w{k}.jsonl",
                     tmp_path / f"m{k}.jsonl", io.StringIO())
        s = [r["scheduled_ns"] for r in sorted(read_jsonl(tmp_path / f"m{k}.jsonl"), key=lambda r: r["index"])]
        gaps.append([b - a for a, b in zip(s, s[1:])])
    assert all(g > 0 for g in gaps[0])
    assert gaps[0] == pytest.approx(gaps[1], abs=2_000)  # same seed -> same schedule (ns rounding aside)


def test_unreachable_server_raises(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with pytest.raises(BenchmarkError) as info:
        run_workload(f"http://127.0.0.1:{port}", workload(), tmp_path / "w.jsonl", tmp_path / "m.jsonl",
                     io.StringIO())
    assert info.value.stage == "warmup" and info.value.reason == "unreachable"
    warm = read_jsonl(tmp_path / "w.jsonl")  # the failures are on disk, counted
    assert warm and all(r["status"] == "error" for r in warm)
    assert not (tmp_path / "m.jsonl").exists()


def test_every_measured_request_failing_raises(server, tmp_path: Path):
    url, beh = server
    beh.fail_every = 1
    with pytest.raises(BenchmarkError) as info:
        run_workload(url, workload(warmup={"window": 2, "tolerance": 0.1, "min_windows": 2, "max_requests": 0}),
                     tmp_path / "w.jsonl", tmp_path / "m.jsonl", io.StringIO())
    assert info.value.stage == "benchmark" and info.value.reason == "all_requests_failed"
    assert len(read_jsonl(tmp_path / "m.jsonl")) == 5  # the failed repeat is written, then it stops


def test_prompts_are_deterministic_distinct_and_in_vocab():
    a = make_prompt(0, "measured", 1, 3, 64)
    assert a == make_prompt(0, "measured", 1, 3, 64)
    assert a.input_ids != make_prompt(0, "measured", 1, 4, 64).input_ids
    assert a.input_ids != make_prompt(1, "measured", 1, 3, 64).input_ids
    assert len(a.input_ids) == 64 and len(a.text.split()) == 64
    assert all(10 <= t < 500 for t in a.input_ids)  # fits the reference engine's 512-id vocabulary
