"""Endpoint adapters on golden chunk sequences shaped as SGLang 0.5.23 streams them.

Shapes read from the sglang==0.5.23 wheel: ``entrypoints/openai/serving_chat.py``
(``_generate_chat_stream``: role chunk, content chunks with ``usage`` under
``continuous_usage_stats``, finish chunk, ``sglext`` chunk, ``usage`` chunk),
``entrypoints/openai/protocol.py`` (``SpecTokensDetails``),
``entrypoints/openai/serving_completions.py`` (``token_ids`` per chunk) and
``managers/tokenizer_manager.py`` (/generate ``output_ids``, cumulative unless
``--incremental-streaming-output``).
"""

from __future__ import annotations

from specsweep.serve.payloads import (
    ChatAdapter,
    CompletionsAdapter,
    GenerateAdapter,
    Prompt,
    StreamState,
    get_adapter,
    make_prompt,
    prompt_key,
)

WORKLOAD = {"output_len": 5, "temperature": 0.0}


def feed_all(adapter, chunks: list[dict]) -> tuple[StreamState, list[int | None]]:
    state = StreamState()
    return state, [adapter.feed(state, c) for c in chunks]


def chat_chunk(content: str | None = None, role: str | None = None, finish: str | None = None,
               usage: int | None = None) -> dict:
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    out = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    if usage is not None:
        out["usage"] = {"prompt_tokens": 11, "completion_tokens": usage, "total_tokens": 11 + usage}
    return out


SPEC = {"spec_accept_rate": 0.25, "spec_accept_length": 1.6667, "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0, "spec_num_correct_drafts": 2, "spec_num_proposed_drafts": 9,
        "spec_verify_ct": 3, "spec_correct_drafts_histogram": [2, 0, 1], "spec_cap_lens_histogram": []}


def test_chat_stream_golden():
    chunks = [
        chat_chunk(role="assistant", content=""),
        chat_chunk(content="Hel", usage=2),
        chat_chunk(content="lo", usage=4),
        chat_chunk(finish="length"),
        {"id": "x", "choices": [], "sglext": {"spec_tokens_details": SPEC, "output_ids": [[5, 6, 7, 8, 9]]}},
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}},
    ]
    state, new = feed_all(ChatAdapter(), chunks)
    assert new == [0, 2, 2, 0, 0, 1]  # exact from the cumulative usage; the last token came with no text
    assert sum(new) == state.completion_tokens == 5
    assert state.prompt_tokens == 11 and state.finish_reason == "length"
    assert state.spec_verify_ct == 3 and state.spec_accept_length == 1.6667
    assert state.spec_correct_drafts_histogram == [2, 0, 1]
    assert state.output_ids == [5, 6, 7, 8, 9]


def test_chat_without_continuous_usage_does_not_guess_token_counts():
    state, new = feed_all(ChatAdapter(), [chat_chunk(role="assistant", content=""), chat_chunk(content="abc"),
                                          chat_chunk(finish="stop")])
    assert new == [0, None, 0] and state.completion_tokens is None and state.output_ids is None


def test_chat_payload_asks_for_usage_spec_details_and_output_ids():
    body = ChatAdapter("served").build_payload(make_prompt(0, "measured", 0, 0, 4), WORKLOAD)
    assert body["messages"][0]["role"] == "user" and body["model"] == "served"
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["return_spec_tokens_details"] is True and body["return_output_ids_in_sglext"] is True
    assert body["max_completion_tokens"] == 5 and body["ignore_eos"] is True


def test_generate_output_ids_cumulative_and_incremental():
    def chunk(ids: list[int], cum: int, final: bool = False) -> dict:
        meta = {"completion_tokens": cum}
        if final:
            meta.update(spec_verify_ct=2, spec_correct_drafts_histogram=[1, 0, 1])
        return {"text": "", "output_ids": ids, "meta_info": meta}

    cumulative, _ = feed_all(GenerateAdapter(), [chunk([1, 2], 2), chunk([1, 2, 3, 4], 4, True)])
    incremental, _ = feed_all(GenerateAdapter(), [chunk([1, 2], 2), chunk([3, 4], 4, True)])
    assert cumulative.output_ids == incremental.output_ids == [1, 2, 3, 4]
    assert cumulative.spec_correct_drafts_histogram == [1, 0, 1]


def test_completions_token_ids_give_output_ids_and_exact_chunk_counts():
    def chunk(text: str, ids: list[int], finish: str | None = None) -> dict:
        return {"choices": [{"index": 0, "text": text, "token_ids": ids, "finish_reason": finish}]}

    state, new = feed_all(CompletionsAdapter(), [chunk("a", [7]), chunk("", [8, 9]), chunk("b", [10], "length"),
                                                 {"choices": [], "usage": {"prompt_tokens": 3,
                                                                           "completion_tokens": 4}}])
    assert new == [1, 2, 1, 0] and state.output_ids == [7, 8, 9, 10] and state.completion_tokens == 4
    assert CompletionsAdapter().build_payload(make_prompt(0, "measured", 0, 0, 4), WORKLOAD)["return_token_ids"]


def test_prompt_key_pairs_the_same_question_only():
    p = make_prompt(0, "measured", 1, 2, 8)
    a = get_adapter("chat")
    same = prompt_key("chat", a.prompt_fields(make_prompt(0, "measured", 1, 2, 8)), 5)
    assert prompt_key("chat", a.prompt_fields(p), 5) == same
    assert prompt_key("chat", a.prompt_fields(p), 6) != same  # another output_len
    assert prompt_key("completions", get_adapter("completions").prompt_fields(p), 5) != same  # another endpoint
    assert prompt_key("chat", a.prompt_fields(make_prompt(0, "measured", 1, 3, 8)), 5) != same


def test_intended_lengths():
    synthetic = make_prompt(0, "measured", 0, 0, 9)
    assert get_adapter("generate").intended_len(synthetic) == 9  # ids are sent as they are
    assert get_adapter("completions").intended_len(synthetic) is None  # words: not token-accurate
    selected = Prompt.from_dict({"messages": [{"role": "user", "content": "hi"}], "input_len": 27})
    assert get_adapter("chat").intended_len(selected) == 27


def test_chat_graceful_abort_is_a_failed_request():
    """/v1/chat/completions passes a graceful abort (no status code) through as an ordinary finish chunk with
    finish_reason "abort" (entrypoints/openai/serving_chat.py:2561-2580), then the usage chunk and [DONE]."""
    state, _ = feed_all(ChatAdapter(), [
        chat_chunk(role="assistant", content=""),
        chat_chunk(content="Hel", usage=2),
        chat_chunk(finish="abort"),
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}},
    ])
    assert state.finish_reason == "abort"
    assert state.error == "request aborted by the server: no message"


def test_completions_graceful_abort_is_a_failed_request():
    """The same on /v1/completions (entrypoints/openai/serving_completions.py:356-372)."""
    state, _ = feed_all(CompletionsAdapter(), [
        {"id": "x", "choices": [{"index": 0, "text": "a", "token_ids": [7], "finish_reason": None}]},
        {"id": "x", "choices": [{"index": 0, "text": "", "token_ids": [], "finish_reason": "abort"}]},
    ])
    assert state.error == "request aborted by the server: no message"
