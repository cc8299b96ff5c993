"""SGLang 0.5.23's stream shapes the client must read right: aborts and /v1/completions' sglext.

The in-test server (real sockets on 127.0.0.1) sends what SGLang's code sends:

- an abort: an ordinary ``/generate`` chunk whose ``meta_info.finish_reason``
  is ``{"type": "abort", "message": ...}``, then ``[DONE]``
  (``managers/tokenizer_manager.py``); on ``/v1/completions`` the choice's
  ``finish_reason`` is ``"abort"`` (``entrypoints/openai/serving_completions.py``);
- speculation on ``/v1/completions``: only when the request sets
  ``return_spec_tokens_details``, one chunk ``{"choices": [], "sglext":
  {"spec_tokens_details": {...SpecTokensDetails...}}}`` after the text chunks
  (``serving_completions.py``; fields in ``entrypoints/openai/protocol.py``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterator

import pytest
from aiohttp import web

from specsweep.analysis.compute import compute_metrics
from specsweep.files import read_jsonl
from specsweep.serve.client import run_workload
from specsweep.testing.doubles import models, serve_app, sse

VERIFY_CT = 4


class Behaviour:
    def __init__(self) -> None:
        self.abort_every: int | None = None
        self.n = 0
        self.bodies: list[dict[str, Any]] = []


def make_app(beh: Behaviour) -> web.Application:
    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        beh.n += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        n_out = body["sampling_params"]["max_new_tokens"]
        abort = beh.abort_every and beh.n % beh.abort_every == 0
        for done in range(2, n_out + 1, 2):
            last = done >= n_out - 1 or abort
            meta = {"prompt_tokens": len(body["input_ids"]), "completion_tokens": done,
                    "finish_reason": None}
            if last:
                meta.update(spec_verify_ct=VERIFY_CT, spec_accept_length=done / VERIFY_CT, e2e_latency=0.01,
                            finish_reason=({"type": "abort", "message": "Abort before prefill", "status_code": None}
                                           if abort else {"type": "length", "length": done}))
            await resp.write(sse({"text": "x", "output_ids": list(range(done)), "meta_info": meta}))
            if last:
                break
        await resp.write(sse(b"[DONE]"))
        await resp.write_eof()
        return resp

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        beh.bodies.append(body)
        beh.n += 1
        abort = beh.abort_every and beh.n % beh.abort_every == 0
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        n = body["max_tokens"]
        for i in range(n):
            finish = ("abort" if abort else "length") if i == n - 1 else None
            await resp.write(sse({"choices": [{"index": 0, "text": f" w{i}", "finish_reason": finish}]}))
        if body.get("return_spec_tokens_details"):
            details = {"spec_accept_rate": 0.5, "spec_accept_length": n / VERIFY_CT, "spec_cap_length": 0.0,
                       "spec_block_accept_length": 0.0, "spec_num_correct_drafts": n - VERIFY_CT,
                       "spec_num_proposed_drafts": 3 * VERIFY_CT, "spec_verify_ct": VERIFY_CT,
                       "spec_correct_drafts_histogram": [], "spec_cap_lens_histogram": []}
            await resp.write(sse({"id": "x", "object": "text_completion", "created": 0, "model": "m",
                                   "choices": [], "sglext": {"spec_tokens_details": details}}))
        await resp.write(sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}}))
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
    w = {"endpoint": "generate", "num_prompts": 4, "input_len": 6, "output_len": 8, "concurrency": 1,
         "request_rate": None, "repeats": 1, "seed": 3, "temperature": 0.0, "request_timeout_s": 5,
         "warmup": {"window": 2, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}}
    w.update(kw)
    return w


def _run(url: str, tmp_path: Path, **kw: Any) -> list[dict[str, Any]]:
    run_workload(url, workload(**kw), tmp_path / "w.jsonl", tmp_path / "m.jsonl", io.StringIO())
    return read_jsonl(tmp_path / "m.jsonl")


@pytest.mark.parametrize("endpoint", ["generate", "completions"])
def test_an_aborted_stream_is_a_failed_request_never_in_a_median(server, tmp_path, endpoint):
    url, beh = server
    beh.abort_every = 3  # warmup takes 2 requests; measured requests 1 and 4 of 4 are the 3rd and 6th
    records = _run(url, tmp_path, endpoint=endpoint)
    aborted = [r for r in records if r["status"] != "ok"]
    assert len(aborted) == 2 and len(records) == 4
    assert all(r["status"] == "error" and "aborted" in r["error"] for r in aborted)
    metrics = compute_metrics(records, seed=0)
    assert metrics["counts"]["ok"] == 2 and metrics["counts"]["error"] == 2
    assert len(metrics["samples"]["output_tok_s"]["values"]) == 2


def test_completions_ask_for_and_read_spec_tokens_details(server, tmp_path):
    url, beh = server
    records = _run(url, tmp_path, endpoint="completions")
    assert all(body["return_spec_tokens_details"] is True for body in beh.bodies)
    assert {r["status"] for r in records} == {"ok"}
    assert {r["spec_verify_ct"] for r in records} == {VERIFY_CT}
    metrics = compute_metrics(records, seed=0)
    # accept length = completion tokens / verify steps, from the sglext details and the usage chunk
    assert metrics["accept_length"]["value"] == pytest.approx(8 / VERIFY_CT)
