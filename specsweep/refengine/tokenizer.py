"""Byte-level tokenizer that needs no download.

Ids 0-255 are the UTF-8 bytes; the config's eos/bos ids and every other id up
to ``vocab_size`` decode to nothing, because a random-weight model emits them
and a placeholder would only inflate the text without meaning.
"""

from __future__ import annotations


class ByteTokenizer:
    """Encode text as its UTF-8 bytes; decode ids < 256 back to text."""

    def __init__(self, vocab_size: int, eos_token_id: int) -> None:
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


# The reference engine's chat template (what /v1/chat/completions applies to
# ``messages`` before tokenizing). Each message becomes ``<|ROLE|>\n`` +
# content + ``\n``; the generation prompt ``<|assistant|>\n`` follows. ROLE is
# the message's role as given (system, user, assistant, ...); a content given
# as a list of parts joins the text of its ``{"type": "text"}`` parts. The
# markers are plain bytes, not special ids: the byte tokenizer has none.
CHAT_TEMPLATE = "<|{role}|>\n{content}\n"
CHAT_GENERATION_PROMPT = "<|assistant|>\n"


def message_text(content: object) -> str:
    """The text of one message's ``content`` (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(parts) == len(content):
            return "".join(str(p) for p in parts)
    raise ValueError("message content must be a string or a list of {'type': 'text', 'text': ...} parts")


def apply_chat_template(messages: list[dict]) -> str:
    """``messages`` rendered with ``CHAT_TEMPLATE``, generation prompt included."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    out = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise ValueError("every message needs a string 'role' and a 'content'")
        out.append(CHAT_TEMPLATE.format(role=m["role"], content=message_text(m["content"])))
    return "".join(out) + CHAT_GENERATION_PROMPT
