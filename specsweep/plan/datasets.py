"""Workload datasets: read a prompt file, select prompts by length, and pin the selection in the plan.

Formats (``workload.dataset.format``):

* ``random``: synthetic prompts made by the client (``serve.payloads.make_prompt``);
  nothing is selected here, no file and no tokenizer are needed.
* ``sharegpt``: a ``.json`` file (a list) or ``.jsonl`` file (one per line) of
  objects with ``conversations``: ``[{"from": "human"|"gpt"|..., "value": str}, ...]``,
  the format SGLang's and vLLM's serving benchmarks read. The first human
  turn (``from`` ``human`` or ``user``) is the prompt; entries without one are
  skipped.
* ``jsonl``: one object per line, ``{"prompt": str}`` (a raw completion
  prompt) or ``{"messages": [{"role": str, "content": str}, ...]}`` (a chat).

Selection (``select_prompts``), deterministic for a given file, tokenizer and
workload: the candidates are shuffled with ``random.Random(f"specsweep-dataset:{seed}")``;
in that order each is turned into the prompt form of the endpoint's registry
entry (``contracts.endpoints``: token ids, text or messages) and measured with the
tokenizer (``plan.tokenizer``); a prompt longer than ``input_len`` is cut to
it (``long_prompts: cut``: a chat's last message is shortened, so the
template stays whole) or dropped (``drop``); one shorter than
``min_input_len`` is dropped. Selection stops once ``prompts_needed`` prompts
passed, each distinct by content as sent (a prompt equal to one already
chosen, e.g. a repeated line or two prompts equal once cut, is skipped);
when the file has fewer, they repeat in the same order (the plan records
how many are distinct). The layout is measured prompts first
(``repeat * num_prompts + index``), then warmup, so two configurations with the
same dataset, seed and lengths measure the same prompts.

Identity and speed: plan resolution runs at every Snakemake start, so a
selection is computed once and kept: ``results/prompts/<sha256>.jsonl`` holds
the selected prompts (the benchmark job reads it, and checks its hash), and
``results/prompts/index/<key>.json`` maps a cache key to it. The key is made
of ``stat`` results only (the dataset's absolute path, size and mtime, the
tokenizer files' sizes and mtimes) and the selection settings, so a start
with an unchanged dataset costs a few ``stat`` calls and one small read,
whatever the file's size. The plan holds the dataset's path and size, the
tokenizer's identity and the sha256 of the selected prompts, never the mtime:
touching a file reselects (same prompts, same identity, nothing reruns);
changing its bytes reruns the configurations that use it, and only those
(an edit that keeps the size is caught by the hash).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.endpoints import PromptForm, get_endpoint
from specsweep.contracts.layout import PROMPTS_DIR  # where selections live (relative to Snakemake's directory)
from specsweep.engines.reference import message_text
from specsweep.files import canonical_json, write_json_atomic, write_text_atomic
from specsweep.plan.tokenizer import (
    PromptTokenizer,
    TokenizerError,
    load_tokenizer,
    source_stat_key,
    tokenizer_source,
)

FORMATS = ("random", "sharegpt", "jsonl")
# Format history of a selection (the lines of results/prompts/<sha256>.jsonl and its identity):
#   1  one prompt per line: {"input_len", and "input_ids" | "text" | "messages"}.
SELECTION_FORMAT_VERSION = 1
_HUMAN = ("human", "user")


class DatasetError(ValueError):
    """A dataset that cannot be used: the message names the file, where in it, and what is allowed."""


def prompts_needed(workload: Mapping[str, Any]) -> int:
    """Prompts one run sends: every measured request, then the warmup cap."""
    return int(workload["repeats"]) * int(workload["num_prompts"]) + int(workload["warmup"]["max_requests"])


# ------------------------------------------------------------------ reading


def _sharegpt_prompt(item: Any, where: str) -> list[dict[str, str]] | None:
    if not isinstance(item, dict) or not isinstance(item.get("conversations"), list):
        raise DatasetError(f"{where}: expected an object with 'conversations': a list of "
                           "{'from': 'human'|'gpt'|..., 'value': str} (ShareGPT format)")
    for turn in item["conversations"]:
        if (not isinstance(turn, dict) or not isinstance(turn.get("from"), str)
                or not isinstance(turn.get("value"), str)):
            raise DatasetError(f"{where}: every conversation turn needs a string 'from' and a string 'value'")
        if turn["from"].lower() in _HUMAN:
            return [{"role": "user", "content": turn["value"]}]
    return None  # no human turn: skipped


def _jsonl_prompt(item: Any, where: str) -> dict[str, Any]:
    if isinstance(item, dict) and isinstance(item.get("prompt"), str):
        return {"text": item["prompt"]}
    if isinstance(item, dict) and isinstance(item.get("messages"), list) and item["messages"]:
        messages = []
        for m in item["messages"]:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
                raise DatasetError(f"{where}: every message needs a string 'role' and a 'content'")
            try:
                messages.append({"role": m["role"], "content": message_text(m["content"])})
            except ValueError as exc:
                raise DatasetError(f"{where}: {exc}") from exc
        return {"messages": messages}
    raise DatasetError(f"{where}: expected {{'prompt': str}} or {{'messages': [{{'role': str, 'content': str}}, ...]}}")


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield f"{path} line {n}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path} line {n}: not valid JSON ({exc.msg} at column {exc.colno})") from exc


def read_candidates(path: Path, fmt: str) -> list[dict[str, Any]]:
    """Every usable prompt of a file, in file order: ``{"messages": [...]}`` or ``{"text": str}``."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    if fmt == "sharegpt":
        if path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}, "
                                   f"byte {exc.pos}; a truncated download ends like this)") from exc
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}: not UTF-8 text ({exc})") from exc
            if not isinstance(data, list):
                raise DatasetError(f"{path}: a ShareGPT .json file must hold a list of conversations, "
                                   f"got {type(data).__name__}")
            items: Iterator[tuple[str, Any]] = ((f"{path} entry {i}", x) for i, x in enumerate(data))
        elif path.suffix == ".jsonl":
            items = _json_lines(path)
        else:
            raise DatasetError(f"{path}: a ShareGPT file must end in .json or .jsonl")
        found = [_sharegpt_prompt(x, where) for where, x in items]
        return [{"messages": m} for m in found if m is not None]
    if fmt == "jsonl":
        return [_jsonl_prompt(x, where) for where, x in _json_lines(path)]
    raise DatasetError(f"format {fmt!r} has no file; allowed: {list(FORMATS)}")


# ---------------------------------------------------------------- selecting


def _fit(cut: Any, measure: Any, full_len: int, input_len: int) -> tuple[Any, int] | None:
    """Shorten until ``measure(cut(k)) <= input_len``; ``cut(k)`` keeps ``k`` tokens of the cuttable part.

    A few rounds at most: a cut text can re-tokenize a little longer than
    its tokens were (BPE merges across the cut).
    """
    k = full_len
    for _ in range(8):
        if k < 1:
            return None
        value = cut(k)
        n = measure(value)
        if n <= input_len:
            return value, n
        k -= n - input_len
    return None


def endpoint_prompt(cand: dict[str, Any], tok: PromptTokenizer, endpoint: str, input_len: int,
                    long_prompts: str) -> dict[str, Any] | None:
    """The prompt ``endpoint`` is sent, with its length by ``tok``; None when it does not fit.

    The endpoint's registry entry says the form (``PromptForm``): token ids are
    the prompt as sent (a chat rendered and tokenized here), text is tokenized
    by the server (a chat rendered here), messages get the server's template.
    The result is ``{form: prompt, "input_len": n}``.
    """
    form = get_endpoint(endpoint).prompt_form
    messages = cand.get("messages")
    if form is PromptForm.MESSAGES and messages is None:
        messages = [{"role": "user", "content": cand["text"]}]
    if messages is not None and form is not PromptForm.MESSAGES and not tok.has_chat_template:
        raw: str | None = "\n".join(m["content"] for m in messages)  # no template to render a chat with
    else:
        raw = cand.get("text") if messages is None else None

    if raw is not None:  # a plain text prompt, cut by its own tokens (never the messages form: set above)
        ids = tok.encode(raw)
        if len(ids) <= input_len:
            return {form.value: ids if form is PromptForm.TOKEN_IDS else raw, "input_len": len(ids)}
        if long_prompts == "drop":
            return None
        if form is PromptForm.TOKEN_IDS:
            return {form.value: ids[:input_len], "input_len": input_len}
        plain = tok.encode_plain(raw)
        fitted = _fit(lambda k: tok.decode(plain[:k]), lambda t: len(tok.encode(t)), len(plain), input_len)
        return None if fitted is None else {form.value: fitted[0], "input_len": fitted[1]}

    # A chat: the template is applied whole, only the last message's content is cut.
    def render(msgs: list[dict[str, Any]]) -> list[int]:
        """The tokens the server will see: text is tokenized again by the server, the others are the template's."""
        return tok.encode(tok.render_chat(msgs)) if form is PromptForm.TEXT else tok.chat_ids(msgs)

    def shaped(msgs: list[dict[str, Any]], n: int) -> dict[str, Any]:
        as_sent = {PromptForm.MESSAGES: lambda: msgs, PromptForm.TOKEN_IDS: lambda: tok.chat_ids(msgs),
                   PromptForm.TEXT: lambda: tok.render_chat(msgs)}[form]
        return {form.value: as_sent(), "input_len": n}

    n = len(render(messages))
    if n <= input_len:
        return shaped(messages, n)
    if long_prompts == "drop":
        return None
    last = tok.encode_plain(messages[-1]["content"])

    def cut(k: int) -> list[dict[str, Any]]:
        return [*messages[:-1], {**messages[-1], "content": tok.decode(last[:k])}]

    fitted = _fit(cut, lambda msgs: len(render(msgs)), len(last) - (n - input_len), input_len)
    return None if fitted is None else shaped(*fitted)


def select_prompts(candidates: list[dict[str, Any]], tok: PromptTokenizer, *, endpoint: str, input_len: int,
                   min_input_len: int, long_prompts: str, needed: int, seed: int,
                   source: str) -> tuple[list[dict[str, Any]], int]:
    """``needed`` prompts (module doc) and how many of them are distinct."""
    order = list(range(len(candidates)))
    random.Random(f"specsweep-dataset:{seed}").shuffle(order)
    chosen: list[dict[str, Any]] = []
    seen: set[str] = set()  # by content as sent: a file's repeated lines (or two prompts equal once cut) are one
    lengths: list[int] = []
    for i in order:
        p = endpoint_prompt(candidates[i], tok, endpoint, input_len, long_prompts)
        if p is None or p["input_len"] < min_input_len:
            if p is not None:
                lengths.append(p["input_len"])
            continue
        content = canonical_json(p)
        if content in seen:
            continue
        seen.add(content)
        chosen.append(p)
        if len(chosen) == needed:
            break
    if not chosen:
        seen = f"; lengths seen: min {min(lengths)}, max {max(lengths)}" if lengths else ""
        raise DatasetError(
            f"{source}: no prompt passes the length filter ({len(candidates)} candidates; allowed: "
            f"min_input_len={min_input_len} <= tokens <= input_len={input_len}, long_prompts={long_prompts!r}"
            f"{seen})")
    return [chosen[j % len(chosen)] for j in range(needed)], len(chosen)


# ------------------------------------------------------- identity and cache


def selection_sha256(prompts: list[dict[str, Any]]) -> str:
    """The hash of a selection: sha256 of its file's text (one canonical JSON object per line)."""
    return hashlib.sha256(selection_text(prompts).encode()).hexdigest()


def selection_text(prompts: list[dict[str, Any]]) -> str:
    return "".join(canonical_json(p) + "\n" for p in prompts)


def _settings(workload: Mapping[str, Any]) -> dict[str, Any]:
    ds = workload["dataset"]
    return {"format": ds["format"], "endpoint": workload["endpoint"], "input_len": int(workload["input_len"]),
            "min_input_len": int(ds["min_input_len"]), "long_prompts": ds["long_prompts"],
            "needed": prompts_needed(workload), "seed": int(workload["seed"]),
            "selection_format": SELECTION_FORMAT_VERSION}


def resolve_prompts(entry: Mapping[str, Any], builtin_tokenizer: str | None, write: bool) -> dict[str, Any] | None:
    """The ``prompts`` section of a plan: ``None`` for ``random``, else the selection's identity.

    ``{"file", "sha256", "count", "distinct", "dataset": {"format", "path",
    "size"}, "tokenizer": {...}}``. ``write``: keep the selection and its
    cache entry under ``PROMPTS_DIR`` (Snakemake); without it nothing is
    written (``python -m specsweep check``). Raises ``DatasetError`` /
    ``TokenizerError`` naming the file and what is allowed.
    """
    workload = entry["workload"]
    ds = workload["dataset"]
    if ds["format"] == "random":
        return None
    if not ds.get("path"):
        raise DatasetError(f"format {ds['format']!r} needs a path (a .json or .jsonl file)")
    path = Path(ds["path"])
    try:
        st = path.stat()
    except OSError:
        raise DatasetError(f"{path}: no such file") from None
    source = tokenizer_source(entry, builtin_tokenizer)
    if source is None:
        raise TokenizerError(
            f"dataset {path} needs a tokenizer to select prompts by length: the model directory "
            f"({(entry.get('server_args') or {}).get('model-path')!r}) holds none and the engine has none built in; "
            "set workload.dataset.tokenizer to a tokenizer directory, or use format: random")
    settings = _settings(workload)
    # "distinct": how the cached count was made; selections cached before prompts were told apart by content
    # are made again (the same prompts for a file without repeats, so the same plan).
    key = hashlib.sha256(canonical_json({
        "path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "tokenizer": source_stat_key(source), "distinct": "by-content", **settings}).encode()).hexdigest()
    index = Path(PROMPTS_DIR) / "index" / f"{key}.json"
    if write and index.is_file():
        cached = json.loads(index.read_text())
        if Path(cached["file"]).is_file():
            return cached
    trust = bool((entry.get("server_args") or {}).get("trust-remote-code"))
    tok = load_tokenizer(source, trust_remote_code=trust)
    candidates = read_candidates(path, ds["format"])
    prompts, distinct = select_prompts(
        candidates, tok, endpoint=settings["endpoint"], input_len=settings["input_len"],
        min_input_len=settings["min_input_len"], long_prompts=settings["long_prompts"],
        needed=settings["needed"], seed=settings["seed"], source=str(path))
    sha = selection_sha256(prompts)
    identity = {"file": f"{PROMPTS_DIR}/{sha}.jsonl", "sha256": sha, "count": len(prompts), "distinct": distinct,
                "dataset": {"format": ds["format"], "path": str(ds["path"]), "size": st.st_size},
                "tokenizer": tok.identity(), "format_version": SELECTION_FORMAT_VERSION}
    if write:
        target = Path(identity["file"])
        if not target.is_file():  # content-addressed: never rewritten, so its mtime reruns nothing
            write_text_atomic(target, selection_text(prompts))
        write_json_atomic(index, identity)
    return identity


def load_selection(identity: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The selected prompts of a plan, checked against the hash the plan pinned."""
    path = Path(identity["file"])
    if not path.is_file():
        raise DatasetError(f"{path}: the selected prompts of this plan are missing (rerun the workflow to reselect)")
    text = path.read_text(encoding="utf-8")
    sha = hashlib.sha256(text.encode()).hexdigest()
    if sha != identity["sha256"]:
        raise DatasetError(f"{path}: sha256 {sha} differs from the plan's {identity['sha256']}")
    return [json.loads(line) for line in text.splitlines() if line]
