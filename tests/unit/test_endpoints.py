"""The endpoint registry: one entry per endpoint, one adapter per entry, the schema's values taken from it,
and a new endpoint added the way ``contracts.endpoints`` says (its entry, its adapter, this test) working
from dataset selection to records without a line elsewhere."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml
from aiohttp import web

from specsweep.contracts.endpoints import ENDPOINTS, Endpoint, PromptForm, get_endpoint
from specsweep.files import read_jsonl
from specsweep.plan import config
from specsweep.plan.datasets import endpoint_prompt, select_prompts
from specsweep.plan.tokenizer import ByteChatTokenizer
from specsweep.records import validate_record
from specsweep.serve import payloads
from specsweep.serve.client import run_workload
from specsweep.serve.payloads import EndpointAdapter, Prompt, StreamState, adapter_for, get_adapter, make_prompt
from specsweep.testing.doubles import models, serve_app, sse

WORKLOAD = {"endpoint": "generate", "num_prompts": 3, "input_len": 6, "output_len": 4, "concurrency": 2,
            "request_rate": None, "repeats": 1, "seed": 3, "temperature": 0.0, "request_timeout_s": 5,
            "warmup": {"window": 2, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}}


def _endpoint_properties(node: Any) -> Iterator[dict]:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and isinstance(props.get("endpoint"), dict):
            yield props["endpoint"]
        for value in node.values():
            yield from _endpoint_properties(value)
    elif isinstance(node, list):
        for value in node:
            yield from _endpoint_properties(value)


def test_every_entry_has_one_adapter_that_reads_it():
    assert set(payloads.ADAPTERS) == set(ENDPOINTS)
    for name, entry in ENDPOINTS.items():
        adapter = get_adapter(name)
        assert adapter.endpoint is entry and adapter.name == name and adapter.path == entry.path


def test_the_schema_allows_the_registry_names_and_keeps_no_list_of_its_own():
    found = list(_endpoint_properties(config.load_schema()))
    assert found and all(p["enum"] == list(ENDPOINTS) for p in found)
    raw = yaml.safe_load(config.SCHEMA_PATH.read_text())
    assert all("enum" not in p for p in _endpoint_properties(raw))  # one list: the registry's
    assert raw["$defs"]["workload"]["properties"]["endpoint"]["default"] in ENDPOINTS


def test_an_unknown_endpoint_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown endpoint 'grpc'; allowed: \['generate', 'completions', 'chat'\]"):
        get_endpoint("grpc")
    with pytest.raises(ValueError, match="unknown endpoint"):
        get_adapter("grpc")


def test_prompt_forms_by_entry():
    """What each entry's form means for the body and the intended length (synthetic prompts have all forms)."""
    p = make_prompt(0, "measured", 0, 0, 5)
    assert get_adapter("generate").prompt_fields(p) == {"input_ids": p.input_ids}
    assert get_adapter("completions").prompt_fields(p) == {"prompt": p.text}
    assert get_adapter("chat").prompt_fields(p) == {"messages": p.messages}
    with pytest.raises(ValueError, match="a prompt without token ids cannot be sent to the generate endpoint"):
        get_adapter("generate").prompt_fields(Prompt(None, "text only"))


def test_the_client_refuses_an_endpoint_that_does_not_stream(monkeypatch, tmp_path: Path):
    monkeypatch.setitem(ENDPOINTS, "blocking", Endpoint("blocking", "/v1/blocking", PromptForm.TEXT,
                                                         streams=False, needs_model_name=False))
    with pytest.raises(ValueError, match="endpoint 'blocking' does not stream"):
        run_workload("http://127.0.0.1:1", {**WORKLOAD, "endpoint": "blocking"}, tmp_path / "w.jsonl",
                     tmp_path / "m.jsonl", io.StringIO())


# ---------------------------------------------------------------- adding an endpoint


@pytest.fixture()
def echo(monkeypatch) -> Iterator[type]:
    """A new endpoint, ``echo`` (POST /v1/echo, text, streamed, names the model): its entry and its adapter.

    That is all a new endpoint needs; the registrations are undone after the test.
    """
    monkeypatch.setitem(ENDPOINTS, "echo", Endpoint("echo", "/v1/echo", PromptForm.TEXT, streams=True,
                                                    needs_model_name=True))
    monkeypatch.setattr(payloads, "ADAPTERS", dict(payloads.ADAPTERS))

    @adapter_for("echo")
    class EchoAdapter(EndpointAdapter):
        """Chunks ``{"token": int}``, then ``{"usage": {"prompt_tokens", "completion_tokens"}}``."""

        prompt_field = "input"

        def build_payload(self, prompt: Prompt, workload: dict[str, Any]) -> dict[str, Any]:
            return {"model": self.model, **self.prompt_fields(prompt), "tokens": int(workload["output_len"]),
                    "stream": self.endpoint.streams}

        def feed(self, state: StreamState, obj: dict[str, Any]) -> int | None:
            if "token" in obj:
                state.output_ids = (state.output_ids or []) + [obj["token"]]
                return 1
            usage = obj.get("usage") or {}
            state.prompt_tokens, state.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
            state.finish_reason = "length"
            return 0

    config._schema_text_cached.cache_clear()  # the loaded schema is read again, with the new entry
    yield EchoAdapter
    config._schema_text_cached.cache_clear()


def test_a_new_endpoint_is_its_entry_and_its_adapter(echo, tmp_path: Path):
    # the config schema allows it
    schema = config.load_schema()
    jsonschema.validate({"endpoint": "echo"}, {"$defs": schema["$defs"], **schema["$defs"]["workload"]})
    # dataset selection gives it prompts in its form, by its tokenizer's count
    tok = ByteChatTokenizer()
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    assert endpoint_prompt(chat, tok, "echo", 100, "cut") == {"text": tok.render_chat(chat["messages"]),
                                                              "input_len": len(tok.render_chat(chat["messages"]))}
    selected, _ = select_prompts([{"text": "a b c d e f g h"}], tok, endpoint="echo", input_len=6, min_input_len=1,
                                 long_prompts="cut", needed=5, seed=0, source="test")
    assert selected[0] == {"text": "a b c ", "input_len": 6}

    # the client streams it, names the served model, and records it
    bodies: list[dict] = []

    async def serve_echo(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        bodies.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(body["tokens"]):
            await resp.write(sse({"token": 100 + i}))
        await resp.write(sse({"usage": {"prompt_tokens": 6, "completion_tokens": body["tokens"]}}))
        await resp.write(sse(b"[DONE]"))
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/echo", serve_echo)
    with serve_app(app) as url:
        run_workload(url, {**WORKLOAD, "endpoint": "echo"}, tmp_path / "w.jsonl", tmp_path / "m.jsonl",
                     io.StringIO(), prompts=[Prompt.from_dict(p) for p in selected])
    records = read_jsonl(tmp_path / "m.jsonl")
    assert len(records) == 3
    for r in records:
        assert validate_record(r) == [] and r["status"] == "ok" and r["endpoint"] == "echo"
        assert r["output_ids"] == [100, 101, 102, 103] and r["chunk_tokens"] == [1, 1, 1, 1, 0]
        assert r["input_len"] == 6 and r["completion_tokens"] == 4
    assert bodies[0] == {"model": "served-model", "input": "a b c ", "tokens": 4, "stream": True}
