"""Workload datasets: golden selections per format, length filters, identity and the stat-keyed cache, errors."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from specsweep.plan import datasets
from specsweep.plan.config import ConfigError
from specsweep.plan.datasets import (
    DatasetError,
    endpoint_prompt,
    load_selection,
    read_candidates,
    resolve_prompts,
    select_prompts,
)
from specsweep.plan.resolve import builtin_defaults, merged_entry, resolve_plans
from specsweep.plan.tokenizer import ByteChatTokenizer, HFTokenizer, TokenizerError, tokenizer_source
from specsweep.refengine.tokenizer import apply_chat_template
from specsweep.testing.datasets import write_prompts_jsonl, write_sharegpt, write_tokenizer

BYTES = ByteChatTokenizer()

SHAREGPT = [
    {"id": "a", "conversations": [{"from": "human", "value": "Why is the sky blue?"},
                                  {"from": "gpt", "value": "Rayleigh scattering."}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "Hi, how can I help?"},
                                  {"from": "human", "value": "Explain all-reduce."},
                                  {"from": "human", "value": "second human turn, never the prompt"}]},
    {"id": "c", "conversations": [{"from": "gpt", "value": "no human turn here"}]},
    {"id": "d", "conversations": [{"from": "user", "value": "ok"}]},
]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def chat_len(content: str) -> int:
    return len(apply_chat_template([{"role": "user", "content": content}]).encode())


# ------------------------------------------------------------- golden formats


def test_sharegpt_json_golden(tmp_path):
    """First human turn of each conversation; a conversation without one is skipped."""
    path = write(tmp_path / "s.json", json.dumps(SHAREGPT))
    assert read_candidates(path, "sharegpt") == [
        {"messages": [{"role": "user", "content": "Why is the sky blue?"}]},
        {"messages": [{"role": "user", "content": "Explain all-reduce."}]},
        {"messages": [{"role": "user", "content": "ok"}]},
    ]


def test_sharegpt_jsonl_reads_as_the_json_list(tmp_path):
    js = write(tmp_path / "s.json", json.dumps(SHAREGPT))
    jl = write(tmp_path / "s.jsonl", "".join(json.dumps(c) + "\n" for c in SHAREGPT))
    assert read_candidates(jl, "sharegpt") == read_candidates(js, "sharegpt")


def test_plain_jsonl_of_prompts_and_of_messages_golden(tmp_path):
    path = write(tmp_path / "p.jsonl", '{"prompt": "plain text"}\n\n'
                 '{"messages": [{"role": "system", "content": "Be brief."}, '
                 '{"role": "user", "content": [{"type": "text", "text": "Hi "}, '
                 '{"type": "text", "text": "there"}]}]}\n')
    assert read_candidates(path, "jsonl") == [
        {"text": "plain text"},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]},
    ]


def test_endpoint_forms_with_the_reference_engines_tokenizer():
    """generate gets token ids, completions text, chat messages; lengths are the engine's own counts."""
    chat = {"messages": [{"role": "user", "content": "ok"}]}
    text = apply_chat_template(chat["messages"])  # "<|user|>\nok\n<|assistant|>\n"
    assert text == "<|user|>\nok\n<|assistant|>\n"
    assert endpoint_prompt(chat, BYTES, "chat", 100, "cut") == {"messages": chat["messages"], "input_len": len(text)}
    assert endpoint_prompt(chat, BYTES, "completions", 100, "cut") == {"text": text, "input_len": len(text)}
    assert endpoint_prompt(chat, BYTES, "generate", 100, "cut") == {"input_ids": list(text.encode()),
                                                                    "input_len": len(text)}
    plain = {"text": "plain"}
    assert endpoint_prompt(plain, BYTES, "completions", 100, "cut") == {"text": "plain", "input_len": 5}
    assert endpoint_prompt(plain, BYTES, "chat", 100, "cut") == {
        "messages": [{"role": "user", "content": "plain"}], "input_len": chat_len("plain")}


def test_long_prompts_are_cut_with_the_template_whole_or_dropped():
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x" * 500}]}
    cut = endpoint_prompt(chat, BYTES, "chat", 64, "cut")
    assert cut["input_len"] == 64 == len(BYTES.chat_ids(cut["messages"]))
    assert cut["messages"][0] == chat["messages"][0]  # only the last message is cut
    assert BYTES.render_chat(cut["messages"]).endswith("<|assistant|>\n")
    assert endpoint_prompt(chat, BYTES, "chat", 64, "drop") is None
    assert endpoint_prompt({"text": "y" * 90}, BYTES, "completions", 10, "cut") == {"text": "y" * 10, "input_len": 10}
    assert endpoint_prompt({"text": "y" * 90}, BYTES, "generate", 10, "cut") == {"input_ids": [121] * 10,
                                                                                 "input_len": 10}
    # A template longer than input_len leaves nothing to cut: the prompt does not fit.
    assert endpoint_prompt(chat, BYTES, "chat", 20, "cut") is None


def test_a_cut_never_splits_a_character_into_a_replacement_char():
    cut = endpoint_prompt({"text": "é" * 10}, BYTES, "completions", 5, "cut")  # 2 bytes each
    assert cut == {"text": "éé", "input_len": 4}


def test_selection_is_deterministic_by_seed_measured_first_and_filters_short_prompts():
    cands = [{"text": "p" * n} for n in (1, 2, 10, 11, 12, 13, 14)]
    kw = dict(endpoint="completions", input_len=100, min_input_len=4, long_prompts="cut", needed=5, source="f")
    a, distinct = select_prompts(cands, BYTES, seed=0, **kw)
    assert (a, distinct) == select_prompts(cands, BYTES, seed=0, **kw)
    assert distinct == 5 and all(p["input_len"] >= 4 for p in a)
    assert sorted(p["input_len"] for p in a) == [10, 11, 12, 13, 14]
    b, _ = select_prompts(cands, BYTES, seed=1, **kw)
    assert sorted(map(json.dumps, a)) == sorted(map(json.dumps, b)) and a != b  # same pool, another order
    # Fewer prompts than needed: they repeat in the same order, and the count of distinct ones says so.
    c, distinct = select_prompts(cands, BYTES, seed=0, **{**kw, "needed": 12})
    assert distinct == 5 and c[:5] == a and c[5:10] == a


def test_identical_prompts_count_once_and_plans_record_the_unique_ones():
    # 20 copies of one prompt and 2 others: 3 distinct prompts, whichever way the file repeats them.
    cands = [{"text": "same prompt"}] * 20 + [{"text": "other one"}, {"text": "a third"}]
    kw = dict(endpoint="completions", input_len=100, min_input_len=4, long_prompts="cut", needed=12, source="f")
    chosen, distinct = select_prompts(cands, BYTES, seed=0, **kw)
    assert distinct == 3 and len({json.dumps(p) for p in chosen}) == 3 and len(chosen) == 12
    # Two prompts that differ only past input_len are one prompt once cut.
    cut, distinct = select_prompts([{"text": "x" * 20 + "a"}, {"text": "x" * 20 + "b"}], BYTES, seed=0,
                                   **{**kw, "input_len": 10, "needed": 4})
    assert distinct == 1 and {p["text"] for p in cut} == {"x" * 10}


def test_no_prompt_passing_the_filter_is_an_error_naming_file_and_allowed_values():
    with pytest.raises(DatasetError) as err:
        select_prompts([{"text": "ab"}], BYTES, endpoint="completions", input_len=100, min_input_len=4,
                       long_prompts="drop", needed=3, seed=0, source="data/x.json")
    msg = str(err.value)
    assert "data/x.json" in msg and "min_input_len=4" in msg and "input_len=100" in msg and "'drop'" in msg


# --------------------------------------------------------- Hugging Face tokenizer


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    return write_tokenizer(tmp_path_factory.mktemp("tok") / "model")


def test_hf_tokenizer_selects_and_cuts_by_its_own_counts(hf_dir, tmp_path):
    tok = HFTokenizer(hf_dir)
    assert tok.has_chat_template
    prompts, _ = select_prompts(read_candidates(write_sharegpt(tmp_path / "s.json", 30), "sharegpt"), tok,
                                endpoint="chat", input_len=40, min_input_len=4, long_prompts="cut", needed=10,
                                seed=0, source="s.json")
    for p in prompts:
        assert p["input_len"] == len(tok.chat_ids(p["messages"])) <= 40
    completions, _ = select_prompts([{"text": "the target model verifies " * 20}], tok, endpoint="completions",
                                    input_len=25, min_input_len=4, long_prompts="cut", needed=1, seed=0, source="x")
    assert completions[0]["input_len"] == len(tok.encode(completions[0]["text"])) <= 25


def test_tokenizer_source_prefers_the_model_directory_then_the_engines_own(hf_dir, tmp_path):
    entry = {"server_args": {"model-path": str(hf_dir)}, "workload": {"dataset": {}}}
    assert tokenizer_source(entry, "refengine-bytes") == ("transformers", hf_dir)
    bare = {"server_args": {"model-path": str(tmp_path)}, "workload": {"dataset": {}}}
    assert tokenizer_source(bare, "refengine-bytes") == ("builtin", "refengine-bytes")
    assert tokenizer_source(bare, None) is None
    docker = {"runtime": "docker", "volumes": [f"{hf_dir.parent}:/models:ro"],
              "server_args": {"model-path": f"/models/{hf_dir.name}"}, "workload": {"dataset": {}}}
    assert tokenizer_source(docker, None) == ("transformers", hf_dir.parent / hf_dir.name)
    with pytest.raises(TokenizerError, match="holds no tokenizer"):
        tokenizer_source({"workload": {"dataset": {"tokenizer": str(tmp_path)}}}, None)


# ------------------------------------------------------------ identity, cache


def entry_for(path: Path, fmt: str = "sharegpt", **workload) -> dict:
    config = {"configurations": {"c": {"workload": {"endpoint": "chat", "num_prompts": 3, "repeats": 2,
                                                    "dataset": {"format": fmt, "path": str(path)}, **workload}}}}
    return merged_entry(config, "c", builtin_defaults())


def test_identity_is_pinned_and_the_cache_is_keyed_by_stat(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = write_sharegpt(tmp_path / "s.json", 40)
    ident = resolve_prompts(entry_for(data), "refengine-bytes", write=True)
    assert ident["dataset"] == {"format": "sharegpt", "path": str(data), "size": data.stat().st_size}
    # 40 minus the 4 without a human turn, minus 2 that are equal to others once cut to input_len (32 bytes)
    assert ident["count"] == 3 * 2 + 32 and ident["distinct"] == 34
    assert len(set(Path(ident["file"]).read_text().splitlines())) == 34
    text = Path(ident["file"]).read_text()
    assert ident["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert load_selection(ident) == [json.loads(line) for line in text.splitlines()]

    # An unchanged file is never read again: the index answers from stat alone.
    monkeypatch.setattr(datasets, "read_candidates", lambda *a: pytest.fail("read the dataset again"))
    assert resolve_prompts(entry_for(data), "refengine-bytes", write=True) == ident
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    # Touched, or rewritten with other whitespace: reselected, same prompts, same identity.
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    assert resolve_prompts(entry_for(data), "refengine-bytes", write=True)["sha256"] == ident["sha256"]
    data.write_text(json.dumps(json.loads(data.read_text())))
    assert resolve_prompts(entry_for(data), "refengine-bytes", write=True)["sha256"] == ident["sha256"]
    # Edited: another selection, another hash.
    convs = json.loads(data.read_text())
    convs[0]["conversations"][0]["value"] = "An edited question?"
    data.write_text(json.dumps(convs))
    assert resolve_prompts(entry_for(data), "refengine-bytes", write=True)["sha256"] != ident["sha256"]


def test_a_tampered_selection_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ident = resolve_prompts(entry_for(write_sharegpt(tmp_path / "s.json", 20)), "refengine-bytes", write=True)
    Path(ident["file"]).write_text(Path(ident["file"]).read_text().replace("a", "b", 1))
    with pytest.raises(DatasetError, match="differs from the plan"):
        load_selection(ident)


def test_without_write_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ident = resolve_prompts(entry_for(write_sharegpt(tmp_path / "s.json", 20)), "refengine-bytes", write=False)
    assert ident["sha256"] and not Path("results").exists()


def test_random_has_no_selection_and_keeps_only_its_format():
    config = {"configurations": {"c": {"workload": {"dataset": {"min_input_len": 9}}}}}
    plan = resolve_plans(config)["c"]
    assert plan["prompts"] is None and plan["workload"]["dataset"] == {"format": "random"}


# ------------------------------------------------------------------- errors


@pytest.mark.parametrize("fmt, name, text, fragment", [
    ("sharegpt", "s.json", '[{"conversations": [{"from": "human", "value": "hi"}]}, {"conv', "not valid JSON"),
    ("sharegpt", "s.json", '{"conversations": []}', "must hold a list"),
    ("sharegpt", "s.json", '[{"text": "hi"}]', "entry 0: expected an object with 'conversations'"),
    ("sharegpt", "s.txt", "[]", "must end in .json or .jsonl"),
    ("sharegpt", "s.jsonl", '{"conversations": [{"from": "human"}]}\n', "line 1: every conversation turn"),
    ("jsonl", "p.jsonl", '{"prompt": "ok"}\n{"text": 3}\n', "line 2: expected {'prompt': str}"),
    ("jsonl", "p.jsonl", '{"prompt": "ok"}\nnot json\n', "line 2: not valid JSON"),
])
def test_bad_files_are_errors_naming_file_place_and_what_is_allowed(tmp_path, fmt, name, text, fragment):
    path = write(tmp_path / name, text)
    with pytest.raises(DatasetError) as err:
        read_candidates(path, fmt)
    assert str(path) in str(err.value) and fragment in str(err.value)


def test_bad_dataset_stops_plan_resolution_with_the_key_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"configurations": {
        "missing": {"workload": {"dataset": {"format": "sharegpt", "path": "nope.json"}}},
        "nopath": {"workload": {"dataset": {"format": "jsonl"}}},
        "short": {"workload": {"input_len": 8, "dataset": {"format": "jsonl", "long_prompts": "drop",
                                                           "path": str(write_prompts_jsonl(tmp_path / "p.jsonl"))}}},
    }}
    with pytest.raises(ConfigError) as err:
        resolve_plans(config, "my.yaml")
    msg = str(err.value)
    assert "my.yaml" in msg
    assert "configurations.missing.workload.dataset: nope.json: no such file" in msg
    assert "configurations.nopath.workload.dataset: format 'jsonl' needs a path" in msg
    assert "configurations.short.workload.dataset:" in msg and "no prompt passes the length filter" in msg


def test_sglang_without_a_tokenizer_cannot_select_a_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = write_sharegpt(tmp_path / "s.json", 10)
    config = {"configurations": {"k": {"engine": "sglang", "server_args": {"model-path": "/models/kimi"},
                                       "workload": {"dataset": {"format": "sharegpt", "path": str(data)}}}}}
    with pytest.raises(ConfigError, match="needs a tokenizer.*workload.dataset.tokenizer.*format: random"):
        resolve_plans(config)


def test_editing_one_dataset_changes_only_the_plans_that_use_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = write_sharegpt(tmp_path / "a.json", 20, seed=1), write_sharegpt(tmp_path / "b.json", 20, seed=2)
    config = {"configurations": {
        "on-a": {"workload": {"dataset": {"format": "sharegpt", "path": str(a)}}},
        "on-b": {"workload": {"dataset": {"format": "sharegpt", "path": str(b)}}},
        "synthetic": {},
    }}
    before = resolve_plans(config, write_prompts=True)
    convs = json.loads(a.read_text())
    convs[0]["conversations"][0]["value"] = convs[0]["conversations"][0]["value"][::-1]  # same size, other text
    a.write_text(json.dumps(convs, indent=1))
    after = resolve_plans(config, write_prompts=True)
    assert after["on-a"]["prompts"]["dataset"]["size"] == before["on-a"]["prompts"]["dataset"]["size"]
    assert after["on-a"]["prompts"]["sha256"] != before["on-a"]["prompts"]["sha256"]  # the hash sees it
    assert after["on-b"] == before["on-b"] and after["synthetic"] == before["synthetic"]
