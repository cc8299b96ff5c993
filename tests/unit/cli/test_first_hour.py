"""A new user's first hour of mistakes, replayed on the shipped config.yaml through `specsweep check` (what
`snakemake -n` refuses too): every mistake that a run used to accept, or found only after a launch, is refused
before anything runs, one line a problem naming the file, the key path and what is allowed; a sweep that is
only too big runs, with a warning that names the keys to check.

The run itself (the run to the end and its HTML report in a browser, an edit, a switch to another config file
and back, Ctrl-C and a rerun) is replayed by tests/e2e/test_first_hour.py on one results/ directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from specsweep.__main__ import main
from specsweep.testing.workflow import REPO


def _default() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def _identical_prompts(config: dict, tmp: Path) -> None:
    data = tmp / "same.jsonl"
    data.write_text('{"prompt": "Tell me a story about a cat."}\n' * 20)
    config["configurations"]["nospec"]["workload"] = {"dataset": {"format": "jsonl", "path": str(data)}}


def _set(path: str, value: Any) -> Callable[[dict, Path], None]:
    """A mistake that sets one key (a dotted path; a list index is a number)."""
    def edit(config: dict, tmp: Path) -> None:
        *parents, leaf = path.split(".")
        node = config
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[leaf] = value
    return edit


#: (what the user did, the edit, words of the refusal: the key path first, then what is allowed or the fix).
REFUSED = [
    ("a dataset of 20 identical prompts", _identical_prompts,
     ["configurations.nospec.workload.num_prompts: ", "gives 1 distinct prompt(s)", "lower num_prompts to at most 1"]),
    ("a misspelled NCCL name", _set("configurations.eagle3-gloo.env.NCCL_ALOG", "Ring"),
     ["configurations.eagle3-gloo.env.NCCL_ALOG: NCCL_ALOG is not a variable NCCL 2.30.7 reads",
      "did you mean NCCL_ALGO?"]),
    ("a misspelled NCCL_ALGO value", _set("configurations.eagle3-gloo.env.NCCL_ALGO", "Rnig"),
     ["configurations.eagle3-gloo.env.NCCL_ALGO: unknown element 'Rnig'", "src/graph/tuning.cc",
      "algo one of ['Tree', 'Ring'"]),
    ("a misspelled NCCL_PROTO value in a grid axis",
     _set("configurations.eagle3-gloo.axes", [{"env.NCCL_PROTO": ["LL", "LL129"]}]),
     ["configurations.eagle3-gloo.axes[0].env.NCCL_PROTO[1]: unknown element 'LL129'",
      "proto one of ['LL', 'LL128', 'Simple']"]),
    ("a misspelled SGLANG_* name", _set("defaults.env.SGLANG_SIMULAT_ACC_LEN", "2.0"),
     ["defaults.env.SGLANG_SIMULAT_ACC_LEN: SGLANG_SIMULAT_ACC_LEN is not a variable SGLang 0.5.23 reads",
      "did you mean SGLANG_SIMULATE_ACC_LEN"]),
    ("output_len beyond the model's context", _set("defaults.workload.output_len", 100000),
     ["configurations.nospec.workload.output_len: input_len 32 + output_len 100000 = 100032 tokens, beyond the 4095",
      "max_position_embeddings 4096", "lower output_len or input_len to fit"]),
    ("a speculative baseline", _set("baseline", "eagle3-shm"), ["baseline: 'eagle3-shm' runs speculative decoding"]),
    ("num_prompts written as 1e9 (a string to YAML)", _set("defaults.workload.num_prompts", "1e9"),
     ["defaults.workload.num_prompts: '1e9' is not of type 'integer'"]),
]


@pytest.mark.parametrize("what, edit, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_each_mistake_is_refused_naming_the_file_the_key_and_what_is_allowed(what, edit, words, tmp_path, capsys,
                                                                             monkeypatch):
    config = _default()
    edit(config, tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    monkeypatch.chdir(REPO)  # where snakemake runs: the config's relative model paths mean the checkout
    assert main(["check", str(path)]) == 2, what
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(f"specsweep check: {path}: ") for line in lines), err
    assert "Traceback" not in err
    line = next((x for x in lines if words[0] in x), None)  # a key inherited by others is refused for each
    assert line is not None and all(word in line for word in words), (what, err)


@pytest.mark.parametrize("text, kind", [("- nospec\n- eagle3-shm\n", "list"), ("just a string\n", "string")])
def test_a_yaml_file_that_is_no_mapping_is_one_line(text, kind, tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    assert capsys.readouterr().err == (f"specsweep check: {path}: (top level): a config file is a mapping of keys "
                                       f"(configurations:, defaults:, baseline:, ...), got a YAML {kind}\n")


@pytest.mark.parametrize("key, value, words", [
    ("defaults.workload.num_prompts", 1_000_000_000, ["requests, more than 1,000,000", "`num_prompts:`"]),
    ("defaults.launches", 300, ["server launches, more than 100", "`launches:`"]),
])
def test_a_sweep_that_is_only_too_big_runs_with_a_warning_naming_the_key(key, value, words, tmp_path, capsys,
                                                                         monkeypatch):
    config = _default()
    _set(key, value)(config, tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    monkeypatch.chdir(REPO)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr()
    warnings = [x for x in out.err.splitlines() if x.startswith("specsweep check: warning: ")]
    assert any(all(w in x for w in words) for x in warnings), out.err
    assert out.out.splitlines()[-1].startswith("cost: 4 configuration(s), "), out.out[-500:]
