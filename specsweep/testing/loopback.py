"""A loopback streaming server with known token timing, for calibrating the client.

It speaks both shapes the client reads: SGLang ``POST /generate`` (cumulative
``text``/``output_ids``/``meta_info``, ``data: [DONE]``) and OpenAI ``POST
/v1/completions`` (text deltas, final ``usage``). Chunk ``k`` (0-based) of a
request received at ``t0`` is written at the absolute deadline
``t0 + ttft + k * itl`` (no drift from sleep overshoot); with ``--precise``
the last 2 ms before each deadline are spun, not slept, because epoll
timeouts have 1 ms granularity. Each request's server-side stamps
(``time.perf_counter_ns``: receive, every chunk write, end) are kept and
served at ``GET /stamps`` (in arrival order) so that the client's own
timestamps can be compared with the truth.

Run: ``python -m specsweep.testing.loopback --port 0 --ttft-ms 50 --itl-ms 10``; the
first stdout line is ``PORT <n>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

_SPIN_NS = 2_000_000


@dataclass(frozen=True)
class LoopbackConfig:
    """Server timing: TTFT and per-chunk delay (ms), tokens per chunk, events per write."""

    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    tokens_per_chunk: int = 1
    events_per_write: int = 1
    precise: bool = False
    spec: bool = True


async def _until(deadline_ns: int, precise: bool) -> None:
    """Sleep until ``deadline_ns`` (perf_counter_ns); spin the last 2 ms when ``precise``."""
    while True:
        left = deadline_ns - time.perf_counter_ns()
        if left <= 0:
            return
        if precise and left <= _SPIN_NS:
            while time.perf_counter_ns() < deadline_ns:
                pass
            return
        await asyncio.sleep((left - (_SPIN_NS if precise else 0)) / 1e9)


def make_app(cfg: LoopbackConfig) -> web.Application:
    """The aiohttp application serving /generate, /v1/completions, /ready, /stamps."""
    stamps: list[dict[str, Any]] = []

    async def ready(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def get_stamps(_: web.Request) -> web.Response:
        out = list(stamps)
        stamps.clear()
        return web.json_response(out)

    async def stream(request: web.Request, openai: bool) -> web.StreamResponse:
        t0 = time.perf_counter_ns()
        body = await request.json()
        if openai:
            n_out = int(body["max_tokens"])
            n_in = len(str(body["prompt"]).split())
        else:
            n_out = int(body["sampling_params"]["max_new_tokens"])
            n_in = len(body["input_ids"])
        rec: dict[str, Any] = {"recv_ns": t0, "chunk_ns": [], "end_ns": None}
        stamps.append(rec)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        tpc = max(1, cfg.tokens_per_chunk)
        n_chunks = -(-n_out // tpc)
        ids: list[int] = []
        pending: list[bytes] = []
        for k in range(n_chunks):
            new = list(range(len(ids), min(n_out, len(ids) + tpc)))
            ids.extend(new)
            last = k == n_chunks - 1
            if openai:
                obj: dict[str, Any] = {
                    "id": "cmpl-loopback",
                    "object": "text_completion",
                    "choices": [{"index": 0, "text": " t" * len(new), "finish_reason": "length" if last else None}],
                    "usage": None,
                }
            else:
                meta: dict[str, Any] = {
                    "prompt_tokens": n_in,
                    "completion_tokens": len(ids),
                    "finish_reason": {"type": "length", "length": n_out} if last else None,
                }
                if cfg.spec:
                    meta["spec_verify_ct"] = k
                    meta["spec_accept_length"] = len(ids) / k if k else 0.0
                obj = {"text": " t" * len(ids), "output_ids": ids, "meta_info": meta}
            pending.append(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")
            if len(pending) < cfg.events_per_write and not last:
                continue
            await _until(t0 + int((cfg.ttft_ms + k * cfg.itl_ms) * 1e6), cfg.precise)
            rec["chunk_ns"].append(time.perf_counter_ns())
            await resp.write(b"".join(pending))
            pending.clear()
            await asyncio.sleep(0)  # let other streams interleave when delays are 0
        tail = b""
        if openai:
            usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
            tail += b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
        await resp.write(tail + b"data: [DONE]\n\n")
        rec["end_ns"] = time.perf_counter_ns()
        await resp.write_eof()
        return resp

    async def generate(request: web.Request) -> web.StreamResponse:
        return await stream(request, openai=False)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await stream(request, openai=True)

    app = web.Application()
    app.router.add_get("/ready", ready)
    app.router.add_get("/stamps", get_stamps)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/completions", completions)
    return app


async def _serve(cfg: LoopbackConfig, host: str, port: int) -> None:
    runner = web.AppRunner(make_app(cfg), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sock = site._server.sockets[0]  # type: ignore[union-attr]
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """CLI entry point (see module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--events-per-write", type=int, default=1)
    p.add_argument("--precise", action="store_true")
    a = p.parse_args(argv)
    cfg = LoopbackConfig(a.ttft_ms, a.itl_ms, a.tokens_per_chunk, a.events_per_write, a.precise)
    try:
        asyncio.run(_serve(cfg, a.host, a.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
