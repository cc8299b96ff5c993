"""The endpoints the benchmark client can talk to: one entry each, read by every stage that needs one.

An entry declares what the rest of the package needs to know about an endpoint,
so that nobody branches on its name (vLLM's ``ASYNC_REQUEST_FUNCS``, aiperf's
endpoint plugins):

* ``path``: where the client POSTs (appended to the server's base URL);
* ``prompt_form``: what the prompt is sent as (token ids, text or chat
  messages). Dataset selection (``plan.datasets``) turns each dataset prompt
  into this form and measures it; a selected prompt's key is the form's value;
* ``streams``: the request asks for a streamed (SSE) response, which the
  client's one timing loop reads chunk by chunk;
* ``needs_model_name``: the body names the served model (OpenAI's ``model``),
  which the client asks the server for (``GET /v1/models``) before sending.

The ground floor holds only these declarations, so that planning may read them;
what goes over the wire (the payload builder and the chunk parser of each
endpoint) is its adapter in ``specsweep.serve.payloads``, registered under the
same name. The schema's allowed ``workload.endpoint`` values are the names of
``ENDPOINTS`` (``plan.config.load_schema`` fills them in).

Adding an endpoint: its entry here, its adapter in ``serve.payloads``
(``@adapter_for(name)``: ``build_payload`` and ``feed``), and its test.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PromptForm(StrEnum):
    """What a prompt is sent as; the value is its key in a selected prompt and the ``Prompt`` field holding it."""

    TOKEN_IDS = "input_ids"  # sent as they are: the prompt is exactly its ids
    TEXT = "text"  # the server tokenizes it
    MESSAGES = "messages"  # the server applies its chat template, then tokenizes


@dataclass(frozen=True)
class Endpoint:
    """One endpoint, as the module doc describes its fields."""

    name: str  # the workload's ``endpoint`` value and a record's ``endpoint``
    path: str
    prompt_form: PromptForm
    streams: bool
    needs_model_name: bool


ENDPOINTS: dict[str, Endpoint] = {e.name: e for e in (
    # SGLang's native API: the prompt as token ids, the answer's ids and speculation in meta_info
    Endpoint("generate", "/generate", PromptForm.TOKEN_IDS, streams=True, needs_model_name=False),
    # OpenAI-compatible completions: the prompt as text
    Endpoint("completions", "/v1/completions", PromptForm.TEXT, streams=True, needs_model_name=True),
    # OpenAI-compatible chat: the prompt as messages, the server's chat template applied
    Endpoint("chat", "/v1/chat/completions", PromptForm.MESSAGES, streams=True, needs_model_name=True),
)}


def get_endpoint(name: str) -> Endpoint:
    """The entry of a workload's ``endpoint``; ``ValueError`` naming the allowed ones for any other."""
    try:
        return ENDPOINTS[name]
    except KeyError:
        raise ValueError(f"unknown endpoint {name!r}; allowed: {list(ENDPOINTS)}") from None
