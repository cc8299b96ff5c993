"""The tokenizer that selects and cuts dataset prompts, as the server will count them.

Which one (``tokenizer_source``), first match wins:

1. ``workload.dataset.tokenizer``: a directory holding a Hugging Face tokenizer;
2. the model directory (``server_args`` ``tokenizer-path``, else ``model-path``;
   for the docker runtime mapped back to the host through ``volumes``) when it
   holds tokenizer files (``TOKENIZER_FILES``);
3. the engine's own built-in tokenizer (``Engine.builtin_tokenizer``: the
   reference engine's byte tokenizer and chat template);
4. none: only the ``random`` dataset can run then.

A Hugging Face tokenizer is loaded with ``transformers`` (imported only here,
and only when a dataset is selected, never at every Snakemake start), from
local files only, with ``trust_remote_code`` exactly when the server gets
``trust-remote-code``. Its counts follow SGLang 0.5.23: a completions prompt
is ``tokenizer.encode(text)`` (special tokens added), a chat prompt is the
chat template applied with the generation prompt, tokenized without adding
special tokens again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from specsweep.engines import reference

#: Files whose presence makes a directory a tokenizer directory (any one of them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json", "vocab.txt")
#: Files whose size and mtime enter the selection cache key (and whose bytes the identity hashes).
_IDENTITY_GLOBS = ("tokenizer*", "*.model", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json",
                   "chat_template*", "tokenization_*.py")


class TokenizerError(ValueError):
    """No usable tokenizer where one is needed; the message names the directory and what was looked for."""


class PromptTokenizer(Protocol):
    """What prompt selection needs of a tokenizer."""

    has_chat_template: bool

    def identity(self) -> dict[str, Any]:
        """What determines its counts (kind, path, hash of its files)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Tokens of a completions prompt, as the server counts them."""
        ...

    def encode_plain(self, text: str) -> list[int]:
        """Tokens of a piece of text, no special tokens added (for cutting)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def render_chat(self, messages: list[dict[str, Any]]) -> str:
        """The chat template applied to ``messages``, generation prompt added."""
        ...

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """Tokens of a chat prompt as the server counts them (template included)."""
        ...


class ByteChatTokenizer:
    """The reference engine's tokenizer: UTF-8 bytes, and its documented chat template."""

    has_chat_template = True
    kind = "refengine-bytes"

    def identity(self) -> dict[str, Any]:
        template = reference.CHAT_TEMPLATE + reference.CHAT_GENERATION_PROMPT
        return {"kind": self.kind, "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()}

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    encode_plain = encode

    def decode(self, ids: Sequence[int]) -> str:
        # Cutting may split a character: drop the partial bytes rather than send U+FFFD (3 bytes).
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="ignore")

    def render_chat(self, messages: list[dict[str, Any]]) -> str:
        return reference.apply_chat_template(messages)

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.encode(self.render_chat(messages))


#: Built-in tokenizers by the name an engine gives (``Engine.builtin_tokenizer``).
BUILTIN = {ByteChatTokenizer.kind: ByteChatTokenizer}


class HFTokenizer:
    """A Hugging Face tokenizer directory, loaded with ``transformers`` from local files only."""

    def __init__(self, path: Path, trust_remote_code: bool = False) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise TokenizerError(
                f"{path} holds a tokenizer, which needs the transformers package "
                f"(pip install -r requirements.txt): {exc}") from exc
        self.path = Path(path)
        try:
            self.tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                                     trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as exc:
            raise TokenizerError(f"{path}: transformers cannot load this tokenizer: {exc}") from exc
        self.has_chat_template = bool(getattr(self.tok, "chat_template", None))

    def identity(self) -> dict[str, Any]:
        digest = hashlib.sha256()
        for f in identity_files(self.path):
            digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
        return {"kind": "transformers", "path": str(self.path), "files_sha256": digest.hexdigest()}

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=True)["input_ids"])

    def encode_plain(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def render_chat(self, messages: list[dict[str, Any]]) -> str:
        if not self.has_chat_template:
            raise TokenizerError(f"{self.path}: the tokenizer has no chat template (chat prompts need one)")
        return str(self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def chat_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.encode_plain(self.render_chat(messages))


def has_tokenizer(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in TOKENIZER_FILES)


def identity_files(path: Path) -> list[Path]:
    """The tokenizer's own files in ``path`` (sorted), whose bytes decide its counts."""
    found = {f for pattern in _IDENTITY_GLOBS for f in path.glob(pattern) if f.is_file()}
    return sorted(found)


def _host_path(model_path: str, runtime: str, volumes: Sequence[str]) -> Path:
    """Where a server-side model path lies on this host (docker: mapped back through ``volumes``)."""
    if runtime == "docker":
        for volume in volumes:
            host, container = volume.split(":")[:2]
            container = container.rstrip("/")
            if model_path == container or model_path.startswith(container + "/"):
                return Path(host) / model_path[len(container):].lstrip("/")
    return Path(model_path)


def tokenizer_source(entry: Mapping[str, Any], builtin: str | None) -> tuple[str, Any] | None:
    """Where the tokenizer of a merged configuration entry comes from, without loading it.

    Returns ``("transformers", Path)``, ``("builtin", name)`` or ``None``.
    Cheap (a few ``stat`` calls): plan resolution calls it at every start.
    """
    explicit = ((entry.get("workload") or {}).get("dataset") or {}).get("tokenizer")
    if explicit:
        path = Path(explicit)
        if not has_tokenizer(path):
            raise TokenizerError(f"workload.dataset.tokenizer: {path} holds no tokenizer "
                                 f"(looked for any of {list(TOKENIZER_FILES)})")
        return "transformers", path
    args = entry.get("server_args") or {}
    model = args.get("tokenizer-path") or args.get("model-path")
    if isinstance(model, str):
        path = _host_path(model, entry.get("runtime", "local"), entry.get("volumes") or [])
        if has_tokenizer(path):
            return "transformers", path
    if builtin is not None:
        return "builtin", builtin
    return None


def source_stat_key(source: tuple[str, Any]) -> dict[str, Any]:
    """What decides a tokenizer's counts, by ``stat`` only (the selection cache key)."""
    kind, where = source
    if kind == "builtin":
        return {"builtin": where, **BUILTIN[where]().identity()}
    files = {f.name: [f.stat().st_size, f.stat().st_mtime_ns] for f in identity_files(Path(where))}
    return {"transformers": str(Path(where).resolve()), "files": files}


def load_tokenizer(source: tuple[str, Any], trust_remote_code: bool = False) -> PromptTokenizer:
    kind, where = source
    if kind == "builtin":
        return BUILTIN[where]()
    return HFTokenizer(Path(where), trust_remote_code)
