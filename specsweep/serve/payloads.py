"""Request payload builders and stream-chunk parsers: one adapter per endpoint.

The timing loop lives once, in ``specsweep.serve.client``; this module only knows
what each endpoint wants in the body and how to read one decoded SSE
``data:`` object. What the rest of the package knows of an endpoint (its
path, prompt form, whether it streams and needs the served model name) is
its entry in ``specsweep.contracts.endpoints.ENDPOINTS``; its adapter here is
registered under the same name (``adapter_for``) and reads its path, prompt
and prompt length from that entry. Token counts always come from the server (SGLang's final
``meta_info`` or OpenAI ``usage``), never from counting chunks: under
speculation one chunk carries several tokens.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from specsweep.contracts.endpoints import ENDPOINTS, Endpoint, PromptForm, get_endpoint
from specsweep.records import TIMING_FIELDS

# Synthetic /generate prompts draw token ids from [TOKEN_ID_LOW, TOKEN_ID_HIGH):
# above the first ids, where BOS/EOS/pad sit in Llama/SentencePiece-style
# vocabularies, and below the smallest vocabulary this project serves (the
# reference engine's "tiny" config has 512 ids; real models have >= 32k, where
# these ids are ordinary byte/piece tokens). 490 choices per position keep
# every prompt distinct, so no request hits another's prefix cache.
TOKEN_ID_LOW = 10
TOKEN_ID_HIGH = 500

# Synthetic /v1/completions prompts are space-separated common English words,
# each of which is one token in BPE vocabularies of modern LLMs, so the prompt
# is close to ``input_len`` tokens; the server's ``prompt_tokens`` is recorded.
_WORDS = (
    "time year people way day man thing woman life child world school state "
    "family student group country problem hand part place case week company "
    "system program question work government number night point home water "
    "room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game "
    "line end member law car city community name president team minute idea"
).split()


@dataclass(frozen=True)
class Prompt:
    """What one request asks about, in the forms the endpoints take.

    A synthetic prompt (``make_prompt``) has all three forms: token ids for
    /generate, words for /v1/completions, one user message of those words for
    chat. A dataset prompt (``specsweep.plan.datasets``) was made for one
    endpoint and has only that endpoint's form. ``input_len`` is its intended
    length in tokens by the tokenizer that selected it (chat: template
    included); ``None`` when not token-accurate (synthetic words).
    """

    input_ids: list[int] | None
    text: str | None
    messages: list[dict[str, Any]] | None = None
    input_len: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Prompt":
        """A prompt of a selected-prompts file (``plan.datasets``: input_len and one of input_ids/text/messages)."""
        return cls(input_ids=d.get("input_ids"), text=d.get("text"), messages=d.get("messages"),
                   input_len=d.get("input_len"))


def make_prompt(seed: int, phase: str, repeat: int | None, index: int, input_len: int) -> Prompt:
    """Build the prompt of one request from ``(seed, phase, repeat, index)``.

    Every request gets a distinct prompt (no prefix-cache hits between
    requests); the same key always gives the same prompt.
    """
    rng = random.Random(f"specsweep:{seed}:{phase}:{repeat}:{index}")
    ids = [rng.randrange(TOKEN_ID_LOW, TOKEN_ID_HIGH) for _ in range(input_len)]
    text = " ".join(_WORDS[i % len(_WORDS)] for i in ids)
    return Prompt(input_ids=ids, text=text, messages=[{"role": "user", "content": text}])


def prompt_key(endpoint: str, prompt_fields: dict[str, Any], output_len: int) -> str:
    """The pairing key of a request: sha256 of its endpoint, the prompt part of its body and output_len.

    Two requests with the same key asked the same question of the same
    endpoint for the same number of tokens, so under greedy decoding their
    outputs must agree (``analysis.formulas.output_match_share``).
    """
    text = json.dumps({"endpoint": endpoint, "prompt": prompt_fields, "output_len": int(output_len)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _need(value: Any, what: str, endpoint: str) -> Any:
    if value is None:
        raise ValueError(f"a prompt without {what} cannot be sent to the {endpoint} endpoint")
    return value


@dataclass
class StreamState:
    """What a parser has learnt from the chunks of one response so far."""

    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    e2e_latency_s: float | None = None
    timing: dict[str, Any] | None = None
    finish_reason: str | None = None
    error: str | None = None
    spec_correct_drafts_histogram: list[int] | None = None
    output_ids: list[int] | None = None
    _prev_tokens: int = 0  # cumulative token count seen so far (generate, chat usage)


#: The model name sent where the server did not say which it serves (SGLang's own default).
DEFAULT_MODEL = "default"


class EndpointAdapter:
    """Per-endpoint knowledge: its registry entry, what to send, how to read a chunk.

    An endpoint's adapter subclasses this, is registered for its entry
    (``adapter_for``), names the body key of its prompt and writes
    ``build_payload`` and ``feed``; path, name, the prompt in the entry's form
    and its intended length come from here. ``model``: the served model name,
    sent by the endpoints whose entry ``needs_model_name`` (a workload's
    ``model`` key overrides it); the others ignore it.
    """

    endpoint: Endpoint  # set by ``adapter_for``
    prompt_field: str  # the key of the body that holds the prompt (in the entry's prompt form)

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model

    @property
    def name(self) -> str:
        return self.endpoint.name

    @property
    def path(self) -> str:
        return self.endpoint.path

    def prompt_fields(self, prompt: Prompt) -> dict[str, Any]:
        """The prompt part of the body (what ``prompt_key`` hashes)."""
        form = self.endpoint.prompt_form
        what = {PromptForm.TOKEN_IDS: "token ids"}.get(form, form.value)
        return {self.prompt_field: _need(getattr(prompt, form.value), what, self.name)}

    def intended_len(self, prompt: Prompt) -> int | None:
        """Tokens the prompt should be served as (None = not token-accurate)."""
        if self.endpoint.prompt_form is PromptForm.TOKEN_IDS:
            return len(_need(prompt.input_ids, "token ids", self.name))  # ids sent as they are
        return prompt.input_len

    def build_payload(self, prompt: Prompt, workload: dict[str, Any]) -> dict[str, Any]:
        """The request's body."""
        raise NotImplementedError

    def feed(self, state: StreamState, obj: dict[str, Any]) -> int | None:
        """Update ``state`` from one decoded chunk; return the chunk's new tokens
        (``None`` when the endpoint does not say)."""
        raise NotImplementedError


#: endpoint name -> its adapter class; one per ``ENDPOINTS`` entry (``adapter_for``).
ADAPTERS: dict[str, type[EndpointAdapter]] = {}
_A = TypeVar("_A", bound=type[EndpointAdapter])


def adapter_for(name: str) -> Callable[[_A], _A]:
    """Register the decorated class as the adapter of the registry entry ``name``."""
    endpoint = ENDPOINTS[name]

    def register(cls: _A) -> _A:
        if name in ADAPTERS:
            raise ValueError(f"endpoint {name!r} has two adapters: {ADAPTERS[name].__name__}, {cls.__name__}")
        cls.endpoint = endpoint
        ADAPTERS[name] = cls
        return cls

    return register


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float_or_none(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _read_meta(state: StreamState, meta: dict[str, Any]) -> None:
    """Copy the per-request instrumentation fields of a meta_info/usage dict."""
    for key in ("completion_tokens", "prompt_tokens", "spec_verify_ct"):
        if key in meta and meta[key] is not None:
            setattr(state, key, _int_or_none(meta[key]))
    if meta.get("spec_accept_length") is not None:
        state.spec_accept_length = _float_or_none(meta["spec_accept_length"])
    if meta.get("e2e_latency") is not None:
        state.e2e_latency_s = _float_or_none(meta["e2e_latency"])
    hist = meta.get("spec_correct_drafts_histogram")
    if isinstance(hist, list) and all(_int_or_none(n) is not None for n in hist):
        state.spec_correct_drafts_histogram = [int(n) for n in hist]
    timing = meta.get("timing")
    if isinstance(timing, dict):
        state.timing = {k: timing[k] for k in TIMING_FIELDS if k in timing}
    fr = meta.get("finish_reason")
    if fr is not None:
        # SGLang: {"type": "length", "length": N}; OpenAI: "length".
        state.finish_reason = fr.get("type") if isinstance(fr, dict) else str(fr)
        _check_abort(state, fr)


def _check_abort(state: StreamState, finish_reason: Any) -> None:
    """An aborted request is a failed request (never ``ok``, never in a median).

    SGLang streams an abort as an ordinary chunk whose finish reason has type
    ``"abort"`` (``{"type": "abort", "message": ..., "status_code": ...}``,
    ``managers/tokenizer_manager.py``), then ``[DONE]``; ``/v1/completions``
    and ``/v1/chat/completions`` pass a graceful abort (one without a status
    code) through as ``finish_reason: "abort"`` on the choice
    (``entrypoints/openai/serving_completions.py:355-372``,
    ``entrypoints/openai/serving_chat.py:2561-2580``); one with a status code
    becomes an error chunk (:func:`_error_text`).
    """
    kind = finish_reason.get("type") if isinstance(finish_reason, dict) else finish_reason
    if kind == "abort" and state.error is None:
        message = finish_reason.get("message") if isinstance(finish_reason, dict) else None
        state.error = f"request aborted by the server: {message or 'no message'}"


def _error_text(obj: dict[str, Any]) -> str | None:
    err = obj.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


@adapter_for("generate")
class GenerateAdapter(EndpointAdapter):
    """SGLang native ``POST /generate`` with ``stream: true``.

    Each chunk: ``{"text": cumulative, "output_ids": cumulative, "meta_info":
    {..., "completion_tokens": cumulative}}``; the stream ends with
    ``data: [DONE]``.
    """

    prompt_field = "input_ids"

    def build_payload(self, prompt: Prompt, workload: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.prompt_fields(prompt),
            "sampling_params": {
                "max_new_tokens": int(workload["output_len"]),
                "temperature": float(workload["temperature"]),
                "ignore_eos": True,
            },
            "stream": self.endpoint.streams,
        }

    def feed(self, state: StreamState, obj: dict[str, Any]) -> int | None:
        err = _error_text(obj)
        if err is not None:
            state.error = err
            return 0
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            _read_meta(state, meta)
        _read_generate_ids(state, obj, meta)
        # New tokens in this chunk: delta of the cumulative count; meta_info's
        # completion_tokens first, else the cumulative output_ids length.
        if isinstance(meta, dict) and _int_or_none(meta.get("completion_tokens")) is not None:
            cum = int(meta["completion_tokens"])
        elif isinstance(obj.get("output_ids"), list):
            cum = len(obj["output_ids"])
        else:
            return None
        new = cum - state._prev_tokens
        state._prev_tokens = cum
        return new


def _read_generate_ids(state: StreamState, obj: dict[str, Any], meta: Any) -> None:
    """Output ids of a /generate chunk: cumulative by default, deltas under ``--incremental-streaming-output``.

    SGLang 0.5.23 (``managers/tokenizer_manager.py``) streams the whole
    ``output_ids`` so far, or only the new ones when the server runs with
    incremental streaming; ``meta_info.completion_tokens`` is cumulative in
    both. A chunk whose ids are as many as the tokens so far replaces what was
    seen; a shorter one adds to it.
    """
    ids = obj.get("output_ids")
    if not isinstance(ids, list) or not all(_int_or_none(t) is not None for t in ids):
        return
    cum = _int_or_none(meta.get("completion_tokens")) if isinstance(meta, dict) else None
    if state.output_ids is None or cum is None or len(ids) == cum:
        state.output_ids = [int(t) for t in ids]
    else:
        state.output_ids.extend(int(t) for t in ids)


@adapter_for("completions")
class CompletionsAdapter(EndpointAdapter):
    """OpenAI-compatible ``POST /v1/completions`` with ``stream: true``.

    Chunks carry text deltas in ``choices[0].text``; token counts come from the
    final ``usage`` chunk (``stream_options.include_usage``). SGLang reports
    speculation only when asked (``return_spec_tokens_details``), in a chunk
    of its own at the end, ``{"choices": [], "sglext": {"spec_tokens_details":
    {"spec_verify_ct", "spec_accept_length", ...}}}`` (a list when ``n`` > 1;
    ``entrypoints/openai/serving_completions.py``, ``protocol.py`` SglExt /
    SpecTokensDetails). Engines that add a ``meta_info`` dict (or spec fields in
    ``usage``) have those read too.
    """

    prompt_field = "prompt"

    def build_payload(self, prompt: Prompt, workload: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": workload.get("model", self.model),
            **self.prompt_fields(prompt),
            "max_tokens": int(workload["output_len"]),
            "temperature": float(workload["temperature"]),
            "ignore_eos": True,
            "stream": self.endpoint.streams,
            "stream_options": {"include_usage": True},
            # SGLang 0.5.23: choices[].token_ids = the new ids of each chunk (serving_completions.py).
            "return_token_ids": True,
            "return_spec_tokens_details": True,
        }

    def feed(self, state: StreamState, obj: dict[str, Any]) -> int | None:
        err = _error_text(obj)
        if err is not None:
            state.error = err
            return 0
        for key in ("usage", "meta_info"):
            meta = obj.get(key)
            if isinstance(meta, dict):
                _read_meta(state, meta)
        sglext = obj.get("sglext")
        details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
        if isinstance(details, list):
            details = details[0] if details else None  # one prompt per request: n = 1
        if isinstance(details, dict):
            _read_meta(state, {k: details.get(k) for k in ("spec_verify_ct", "spec_accept_length")})
        new: int | None = 0
        choices = obj.get("choices") or []
        if choices:
            choice = choices[0]
            if choice.get("text"):
                new = None  # a text delta holds one or more tokens; the server does not say
            ids = choice.get("token_ids")
            if isinstance(ids, list) and all(_int_or_none(t) is not None for t in ids):
                state.output_ids = (state.output_ids or []) + [int(t) for t in ids]
                new = len(ids)  # the server says exactly which tokens this chunk carried
            if choice.get("finish_reason") is not None:
                state.finish_reason = str(choice["finish_reason"])
                _check_abort(state, choice["finish_reason"])
        return new


@adapter_for("chat")
class ChatAdapter(EndpointAdapter):
    """OpenAI-compatible ``POST /v1/chat/completions`` with ``stream: true`` (the server's chat template).

    As SGLang 0.5.23 streams it (``entrypoints/openai/serving_chat.py``): a
    role chunk, content chunks (only where the text grew; with
    ``stream_options.continuous_usage_stats`` each carries the cumulative
    ``usage``, so its new tokens are known exactly), a finish chunk, an
    ``sglext`` chunk (``spec_tokens_details`` when the request sets
    ``return_spec_tokens_details``, ``output_ids`` when it sets
    ``return_output_ids_in_sglext``), and the final ``usage`` chunk. Chat
    streams carry no per-chunk token ids (``return_token_ids`` is refused with
    streaming there). A ``meta_info`` dict (the reference engine's timing) is
    read too.
    """

    prompt_field = "messages"

    def build_payload(self, prompt: Prompt, workload: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": workload.get("model", self.model),
            **self.prompt_fields(prompt),
            "max_completion_tokens": int(workload["output_len"]),
            "temperature": float(workload["temperature"]),
            "ignore_eos": True,
            "stream": self.endpoint.streams,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "return_spec_tokens_details": True,
            "return_output_ids_in_sglext": True,
        }

    def feed(self, state: StreamState, obj: dict[str, Any]) -> int | None:
        err = _error_text(obj)
        if err is not None:
            state.error = err
            return 0
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            _read_meta(state, meta)
        ext = obj.get("sglext")
        if isinstance(ext, dict):
            details = ext.get("spec_tokens_details")
            if isinstance(details, list) and details:
                details = details[0]
            if isinstance(details, dict):
                _read_meta(state, details)
            ids = ext.get("output_ids")
            if isinstance(ids, list) and ids and isinstance(ids[0], list):
                state.output_ids = [int(t) for t in ids[0] if _int_or_none(t) is not None]
        new: int | None = 0
        choices = obj.get("choices") or []
        if choices:
            choice = choices[0]
            delta = choice.get("delta") or {}
            if delta.get("content"):
                new = None  # a text delta holds one or more tokens (exact below when usage comes with it)
            if choice.get("finish_reason") is not None:
                state.finish_reason = str(choice["finish_reason"])
                # A graceful abort (no status code) streams on as finish_reason "abort"
                # (entrypoints/openai/serving_chat.py:2561-2580); one with a status code is an error chunk.
                _check_abort(state, choice["finish_reason"])
        usage = obj.get("usage")
        if isinstance(usage, dict):
            _read_meta(state, usage)
            cum = _int_or_none(usage.get("completion_tokens"))
            if cum is not None:
                new, state._prev_tokens = cum - state._prev_tokens, cum
        return new


def get_adapter(endpoint: str, model: str = DEFAULT_MODEL) -> EndpointAdapter:
    """The adapter for a workload's ``endpoint`` key; ``model``: the served model name (``EndpointAdapter``)."""
    return ADAPTERS[get_endpoint(endpoint).name](model)
