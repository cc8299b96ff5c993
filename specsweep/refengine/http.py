"""aiohttp application speaking SGLang's HTTP API (enough for SGLang's own bench client).

One streaming core (``_stream_request``) feeds every endpoint; the endpoint
only decides how a cumulative engine snapshot becomes a JSON chunk.
``/v1/chat/completions`` follows SGLang 0.5.23's stream shape
(``sglang/srt/entrypoints/openai/serving_chat.py``): a role chunk, content
chunks (only where the text grew), a finish chunk, then an ``sglext`` chunk
(``spec_tokens_details`` when ``return_spec_tokens_details``, ``output_ids``
when ``return_output_ids_in_sglext``) and a ``usage`` chunk
(``stream_options.include_usage``; ``continuous_usage_stats`` adds ``usage`` to
every content chunk).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, AsyncIterator, Callable

from aiohttp import web

from .engine import Engine, Request
from .metrics import Metrics
from .tokenizer import ByteTokenizer, apply_chat_template


@dataclass
class ServerState:
    """What the handlers need; ``ready`` flips once warmup finished."""

    engine: Engine
    tokenizer: ByteTokenizer
    metrics: Metrics
    model_name: str
    server_info: Callable[[], dict[str, Any]]
    ready: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class BadRequest(ValueError):
    """Client error turned into HTTP 400 with the message."""


def _int_param(params: dict[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest(f"{key} must be a positive integer, got {value!r}")
    return value


def _make_request(state: ServerState, input_ids: list[int], max_new: int, ignore_eos: bool,
                  rid: str | None, sink: Callable[[dict[str, Any]], None], stream: bool = True) -> Request:
    if not input_ids:
        raise BadRequest("the prompt is empty")
    vocab = state.tokenizer.vocab_size
    if any((not isinstance(t, int)) or t < 0 or t >= vocab for t in input_ids):
        raise BadRequest(f"input_ids must be integers in [0, {vocab})")
    limit = state.engine.max_request_tokens()
    if len(input_ids) + max_new > limit:
        raise BadRequest(f"prompt ({len(input_ids)}) + max_new_tokens ({max_new}) exceeds the limit {limit}")
    req = Request(input_ids=list(input_ids), max_new_tokens=max_new, ignore_eos=ignore_eos, sink=sink,
                  stream=stream)
    if rid:
        req.rid = str(rid)
    return req


async def _stream_request(state: ServerState, build: Callable[[Callable[[dict[str, Any]], None]], Request]
                          ) -> AsyncIterator[dict[str, Any]]:
    """Submit a request and yield its cumulative snapshots until it finishes (abort on cancel)."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def sink(snap: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(q.put_nowait, snap)

    req = build(sink)
    state.engine.submit(req)
    try:
        while True:
            snap = await q.get()
            # Coalesce snapshots that piled up while we were busy: each is cumulative.
            while not snap["finished"] and not q.empty():
                snap = q.get_nowait()
            yield snap
            if snap["finished"]:
                return
    finally:
        if req.finish_reason is None:
            req.aborted = True


def _generate_payload(state: ServerState, snap: dict[str, Any]) -> dict[str, Any]:
    return {"text": state.tokenizer.decode(snap["output_ids"]), "output_ids": snap["output_ids"],
            "meta_info": snap["meta_info"]}


async def _sse(request: web.Request, chunks: AsyncGenerator[dict[str, Any], None]) -> web.StreamResponse:
    """Server-sent events; a client that goes away aborts its request at once (generator closed)."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    try:
        async for chunk in chunks:
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    finally:
        await chunks.aclose()
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _usage(meta: dict[str, Any]) -> dict[str, int]:
    return {"prompt_tokens": meta["prompt_tokens"], "completion_tokens": meta["completion_tokens"],
            "total_tokens": meta["prompt_tokens"] + meta["completion_tokens"]}


def _finish(meta: dict[str, Any]) -> str | None:
    fr = meta["finish_reason"]
    return None if fr is None else ("length" if fr["type"] == "length" else fr["type"])


def _spec_tokens_details(meta: dict[str, Any], k: int | None) -> dict[str, Any] | None:
    """SGLang's ``SpecTokensDetails`` (``entrypoints/openai/protocol.py``) from a final meta_info."""
    hist = meta.get("spec_correct_drafts_histogram")
    if not k or hist is None:
        return None
    verify = int(meta.get("spec_verify_ct") or 0)
    correct = sum(j * n for j, n in enumerate(hist))
    proposed = verify * k
    return {"spec_accept_rate": correct / proposed if proposed else 0.0,
            "spec_accept_length": meta.get("spec_accept_length") or 0.0,
            "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": verify, "spec_correct_drafts_histogram": list(hist)}


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


async def _read_json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except json.JSONDecodeError as exc:
        raise BadRequest(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def build_app(state: ServerState) -> web.Application:
    """The aiohttp application; every handler reads only ``state``."""

    async def generate(request: web.Request) -> web.StreamResponse:
        try:
            body = await _read_json(request)
            params = body.get("sampling_params") or {}
            if "input_ids" in body and body["input_ids"] is not None:
                ids = body["input_ids"]
                if not isinstance(ids, list) or (ids and isinstance(ids[0], list)):
                    raise BadRequest("input_ids must be one flat list (batches are not supported)")
            elif isinstance(body.get("text"), str):
                ids = state.tokenizer.encode(body["text"])
            else:
                raise BadRequest("give 'text' (a string) or 'input_ids'")
            max_new = _int_param(params, "max_new_tokens", 128)
            ignore_eos = bool(params.get("ignore_eos", False))
            stream = bool(body.get("stream"))
            build = lambda sink: _make_request(  # noqa: E731
                state, ids, max_new, ignore_eos, body.get("rid"), sink, stream)
            build(lambda s: None)  # validate before streaming starts, so errors are a clean 400
        except BadRequest as exc:
            return _json_error(400, str(exc))
        chunks = (_generate_payload(state, s) async for s in _stream_request(state, build))
        if stream:
            return await _sse(request, chunks)
        last: dict[str, Any] = {}
        async for chunk in chunks:
            last = chunk
        return web.json_response(last)

    async def completions(request: web.Request) -> web.StreamResponse:
        try:
            body = await _read_json(request)
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
                prompt = prompt[0]
            if isinstance(prompt, str):
                ids = state.tokenizer.encode(prompt)
            elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                ids = prompt
            else:
                raise BadRequest("prompt must be a string or a list of token ids")
            max_new = _int_param(body, "max_tokens", 16)
            ignore_eos = bool(body.get("ignore_eos", False))
            stream = bool(body.get("stream"))
            build = lambda sink: _make_request(state, ids, max_new, ignore_eos, None, sink, stream)  # noqa: E731
            build(lambda s: None)
        except BadRequest as exc:
            return _json_error(400, str(exc))
        cid = f"cmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = body.get("model") or state.model_name
        usage, finish = _usage, _finish
        token_ids = bool(body.get("return_token_ids"))  # SGLang: choices[].token_ids, the new ids of each chunk

        if stream:
            async def chunks() -> AsyncGenerator[dict[str, Any], None]:
                sent, n_ids = "", 0
                async for snap in _stream_request(state, build):
                    text = state.tokenizer.decode(snap["output_ids"])
                    delta, sent = text[len(sent):], text
                    meta = snap["meta_info"]
                    choice: dict[str, Any] = {"index": 0, "text": delta, "logprobs": None,
                                              "finish_reason": finish(meta)}
                    if token_ids:
                        choice["token_ids"], n_ids = snap["output_ids"][n_ids:], len(snap["output_ids"])
                    chunk: dict[str, Any] = {
                        "id": cid, "object": "text_completion", "created": created, "model": model,
                        "choices": [choice],
                    }
                    if snap["finished"]:
                        chunk["usage"] = usage(meta)
                        chunk["meta_info"] = meta
                    yield chunk

            return await _sse(request, chunks())
        last: dict[str, Any] = {}
        async for snap in _stream_request(state, build):
            last = snap
        meta = last["meta_info"]
        return web.json_response({
            "id": cid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": state.tokenizer.decode(last["output_ids"]), "logprobs": None,
                         "finish_reason": finish(meta)}],
            "usage": usage(meta), "meta_info": meta,
        })

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        """OpenAI chat completions with ``tokenizer.CHAT_TEMPLATE`` (SGLang 0.5.23's stream shape, module doc)."""
        try:
            body = await _read_json(request)
            try:
                ids = state.tokenizer.encode(apply_chat_template(body.get("messages")))
            except ValueError as exc:
                raise BadRequest(str(exc)) from exc
            key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
            max_new = _int_param(body, key, 128)
            ignore_eos = bool(body.get("ignore_eos", False))
            stream = bool(body.get("stream"))
            build = lambda sink: _make_request(state, ids, max_new, ignore_eos, None, sink, stream)  # noqa: E731
            build(lambda s: None)
        except BadRequest as exc:
            return _json_error(400, str(exc))
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = body.get("model") or state.model_name
        options = body.get("stream_options") or {}
        want_spec = bool(body.get("return_spec_tokens_details"))
        want_ids = bool(body.get("return_output_ids_in_sglext"))

        def sglext(meta: dict[str, Any], output_ids: list[int]) -> dict[str, Any] | None:
            ext: dict[str, Any] = {}
            details = _spec_tokens_details(meta, state.engine.k) if want_spec else None
            if details is not None:
                ext["spec_tokens_details"] = details
            if want_ids:
                ext["output_ids"] = [list(output_ids)]
            return ext or None

        def frame(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": choices, **extra}

        if stream:
            async def chunks() -> AsyncGenerator[dict[str, Any], None]:
                sent, first = "", True
                last: dict[str, Any] = {}
                async for snap in _stream_request(state, build):
                    last = snap
                    meta = snap["meta_info"]
                    if first:
                        first = False
                        yield frame([{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "logprobs": None, "finish_reason": None}])
                    text = state.tokenizer.decode(snap["output_ids"])
                    delta, sent = text[len(sent):], text
                    if delta:  # as SGLang: no chunk for a step whose text did not grow
                        extra = {"usage": _usage(meta)} if options.get("continuous_usage_stats") else {}
                        yield frame([{"index": 0, "delta": {"content": delta}, "logprobs": None,
                                      "finish_reason": None}], **extra)
                meta = last["meta_info"]
                # meta_info (timing, e2e_latency) is this engine's extension, as on /v1/completions.
                yield frame([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": _finish(meta)}],
                            meta_info=meta)
                ext = sglext(meta, last["output_ids"])
                if ext is not None:
                    yield frame([], sglext=ext)
                if options.get("include_usage"):
                    yield frame([], usage=_usage(meta))

            return await _sse(request, chunks())
        last = {}
        async for snap in _stream_request(state, build):
            last = snap
        meta = last["meta_info"]
        out: dict[str, Any] = {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": state.tokenizer.decode(last["output_ids"])},
                         "logprobs": None, "finish_reason": _finish(meta)}],
            "usage": _usage(meta), "meta_info": meta,
        }
        ext = sglext(meta, last["output_ids"])
        if ext is not None:
            out["sglext"] = ext
        return web.json_response(out)

    async def health(request: web.Request) -> web.Response:
        if not state.engine.alive():
            return web.Response(status=503, text="scheduler is not running")
        return web.Response(text="")

    async def health_generate(request: web.Request) -> web.Response:
        if not state.engine.alive():
            return web.Response(status=503, text="scheduler is not running")
        build = lambda sink: _make_request(state, [state.tokenizer.eos_token_id + 1], 1, True, None, sink)  # noqa: E731
        async for snap in _stream_request(state, build):
            if snap["finished"] and snap["meta_info"]["finish_reason"]["type"] == "abort":
                return web.Response(status=503, text="generation failed")
        return web.Response(text="")

    async def ready(request: web.Request) -> web.Response:
        if state.ready and state.engine.alive():
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "starting"}, status=503)

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response(state.server_info())

    async def metrics(request: web.Request) -> web.Response:
        state.metrics.set_queue(len(state.engine.running), len(state.engine.waiting) + state.engine.inbox.qsize())
        state.metrics.gen_throughput.set(state.engine.gen_throughput() or 0.0)
        return web.Response(body=state.metrics.render(), headers={"Content-Type": state.metrics.content_type})

    async def _control(fn: Callable[[], Any]) -> Any:
        out = state.engine.control(fn)
        result = await asyncio.get_running_loop().run_in_executor(None, out.get)
        if isinstance(result, Exception):
            raise result
        return result

    async def start_profile(request: web.Request) -> web.Response:
        try:
            body = await _read_json(request) if request.can_read_body else {}
        except BadRequest as exc:
            return _json_error(400, str(exc))
        output_dir = body.get("output_dir") or "/tmp/refengine-profile"
        num_steps = body.get("num_steps")
        if num_steps is not None and (not isinstance(num_steps, int) or num_steps < 1):
            return _json_error(400, "num_steps must be a positive integer")
        await _control(lambda: state.engine.start_profile(str(output_dir), num_steps))
        return web.Response(text="Start profiling.\n")

    async def stop_profile(request: web.Request) -> web.Response:
        files = await _control(state.engine.stop_profile)
        return web.json_response({"message": "Stop profiling.", "files": files,
                                  "all_files": list(state.engine.profile_files)})

    async def flush_cache(request: web.Request) -> web.Response:
        # SGLang's benchmark client calls this first; there is no prefix cache to flush here.
        return web.Response(text="Cache flushed.\n")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health_generate)
    app.router.add_get("/ready", ready)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/start_profile", start_profile)
    app.router.add_post("/stop_profile", stop_profile)
    app.router.add_post("/flush_cache", flush_cache)
    app.router.add_get("/get_model_info", lambda r: _model_info(state))
    app.router.add_get("/v1/models", lambda r: _models(state))
    return app


async def _model_info(state: ServerState) -> web.Response:
    return web.json_response({"model_path": state.model_name, "tokenizer_path": None, "is_generation": True})


async def _models(state: ServerState) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": state.model_name, "object": "model",
                                                          "owned_by": "specsweep"}]})
