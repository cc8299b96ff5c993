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
