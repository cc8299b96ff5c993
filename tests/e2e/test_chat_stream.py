"""Chat streaming against the real reference engine (TP=2, speculative): golden stream shape, the client's
adapter on it, and the same tokens as /generate and /v1/completions for the same prompt."""

from __future__ import annotations

import io
import json
import os
import sys
import urllib.request
from typing import Any, Iterator

import pytest

from specsweep.analysis.summary import build_summary
from specsweep.files import read_jsonl
from specsweep.plan.datasets import read_candidates, select_prompts
from specsweep.plan.tokenizer import ByteChatTokenizer, HFTokenizer
from specsweep.refengine.tokenizer import apply_chat_template
from specsweep.serve.client import run_workload
from specsweep.serve.payloads import ChatAdapter, Prompt, StreamState
from specsweep.serve.server import Server, free_port
from specsweep.testing.datasets import write_sharegpt, write_tokenizer
from specsweep.testing.workflow import REPO

pytestmark = pytest.mark.slow

TINY = str(REPO / "specsweep" / "refengine" / "configs" / "tiny")
SPEC_TOKENS_DETAILS_FIELDS = {  # SGLang 0.5.23 entrypoints/openai/protocol.py SpecTokensDetails
    "spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts",
    "spec_verify_ct", "spec_correct_drafts_histogram"}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why does NCCL use rings?"}]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> Iterator[str]:
    port = free_port("127.0.0.1")
    log = (tmp_path_factory.mktemp("chat") / "server.log").open("wb")
    server = Server(
        argv=[sys.executable, "-m", "specsweep.refengine", "--model-path", TINY, "--tp-size", "2", "--port", str(port),
              "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4"],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, host="127.0.0.1", port=port, ready_path="/ready",
        log_file=log)
    server.start()
    try:
        server.wait_ready(180)
        yield server.base_url
    finally:
        server.stop()
        log.close()


def sse(base: str, path: str, body: dict[str, Any]) -> list[Any]:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    out: list[Any] = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: "):
                payload = line[6:]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def chat_body(max_tokens: int) -> dict[str, Any]:
    body = ChatAdapter("m").build_payload(Prompt(None, None, MESSAGES), {"output_len": max_tokens, "temperature": 0.0})
    return body


def test_chat_stream_shape_is_sglangs(base_url):
    events = sse(base_url, "/v1/chat/completions", chat_body(20))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    usage_chunk, sglext_chunk, finish_chunk = chunks[-1], chunks[-2], chunks[-3]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 20
    assert usage_chunk["usage"]["prompt_tokens"] == len(apply_chat_template(MESSAGES).encode())
    assert finish_chunk["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    details = sglext_chunk["sglext"]["spec_tokens_details"]
    assert set(details) == SPEC_TOKENS_DETAILS_FIELDS
    assert sum(details["spec_correct_drafts_histogram"]) == details["spec_verify_ct"] > 0
    assert len(sglext_chunk["sglext"]["output_ids"][0]) == 20
    content = chunks[1:-3]
    assert content and all(c["choices"][0]["delta"]["content"] for c in content)  # no empty-text chunks
    cum = [c["usage"]["completion_tokens"] for c in content]
    assert cum == sorted(cum) and cum[-1] <= 20


def test_the_clients_chat_adapter_reads_the_real_stream(base_url):
    events = [e for e in sse(base_url, "/v1/chat/completions", chat_body(20)) if e != "[DONE]"]
    state = StreamState()
    new = [ChatAdapter().feed(state, e) for e in events]
    assert state.error is None and state.finish_reason == "length"
    assert state.completion_tokens == 20 and sum(n for n in new if n) == 20 and None not in new
    assert state.output_ids == events[-2]["sglext"]["output_ids"][0]
    assert state.spec_verify_ct == sum(state.spec_correct_drafts_histogram)
    assert state.timing and state.timing["forward_ct"] == state.spec_verify_ct  # the engine's meta_info extension


def test_chat_generates_what_generate_does_on_the_templated_prompt(base_url):
    chat = sse(base_url, "/v1/chat/completions", chat_body(16))[-3]["sglext"]["output_ids"][0]
    ids = list(apply_chat_template(MESSAGES).encode())
    gen = sse(base_url, "/generate", {"input_ids": ids, "stream": True,
                                      "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}})[-2]
    assert gen["output_ids"] == chat
    comp = sse(base_url, "/v1/completions", {"prompt": apply_chat_template(MESSAGES), "max_tokens": 16,
                                             "ignore_eos": True, "stream": True, "return_token_ids": True})
    assert [t for c in comp[:-1] for t in c["choices"][0]["token_ids"]] == chat


def test_a_sharegpt_workload_over_chat_is_served_at_its_intended_lengths(base_url, tmp_path):
    """The byte tokenizer selected the prompts, so the server's prompt_tokens equals input_len exactly."""
    cands = read_candidates(write_sharegpt(tmp_path / "s.jsonl", 20), "sharegpt")
    workload = {"endpoint": "chat", "num_prompts": 3, "input_len": 120, "output_len": 8, "concurrency": 1,
                "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 60,
                "warmup": {"window": 1, "tolerance": 1.0, "min_windows": 1, "max_requests": 1}}
    selected, _ = select_prompts(cands, ByteChatTokenizer(), endpoint="chat", input_len=120, min_input_len=4,
                                 long_prompts="cut", needed=4, seed=0, source="s.jsonl")
    run_workload(base_url, workload, tmp_path / "w.jsonl", tmp_path / "r.jsonl", io.StringIO(),
                 [Prompt.from_dict(p) for p in selected])
    recs = read_jsonl(tmp_path / "r.jsonl")
    assert [r["status"] for r in recs] == ["ok"] * 3
    for r, p in zip(recs, selected):
        assert r["endpoint"] == "chat" and r["input_len"] == p["input_len"] == r["prompt_tokens"] <= 120
        assert len(r["output_ids"]) == r["completion_tokens"] == 8
        assert r["spec_correct_drafts_histogram"] is not None


def test_prompts_counted_by_another_tokenizer_than_the_servers_are_warned_about(base_url, tmp_path):
    """Prompts selected with a Hugging Face tokenizer, served by the byte-level engine: the report warns."""
    tok = HFTokenizer(write_tokenizer(tmp_path / "tok"))
    cands = read_candidates(write_sharegpt(tmp_path / "s.json", 20), "sharegpt")
    selected, _ = select_prompts(cands, tok, endpoint="chat", input_len=60, min_input_len=4, long_prompts="cut",
                                 needed=3, seed=0, source="s.json")
    workload = {"endpoint": "chat", "num_prompts": 3, "input_len": 60, "output_len": 4, "concurrency": 1,
                "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 60,
                "warmup": {"window": 1, "tolerance": 1.0, "min_windows": 1, "max_requests": 0}}
    run_workload(base_url, workload, tmp_path / "w.jsonl", tmp_path / "r.jsonl", io.StringIO(),
                 [Prompt.from_dict(p) for p in selected])
    recs = read_jsonl(tmp_path / "r.jsonl")
    assert all(r["prompt_tokens"] > r["input_len"] for r in recs)  # bytes outnumber BPE tokens
    plan = {"name": "c", "engine": "reference", "image": None, "env": {}, "workload": workload,
            "server_args": {"speculative-algorithm": "EAGLE3"}}
    s = build_summary(plan, None, {"status": "ok"}, [], recs, None)
    assert any(w.startswith("prompt length: 3 of 3 requests") for w in s["warnings"]), s["warnings"]
