"""The reference engine's argument checks, as the workflow's preflight calls them (no launch, no exit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.refengine.cli import build_parser, check_args, parse_args

SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]


def test_defaults_are_fine() -> None:
    assert check_args([]) == []
    ns = parse_args([])
    assert ns.host == "127.0.0.1" and ns.load_format == "dummy" and ns.all_reduce_backend == "shm"
    assert ns.speculative_algorithm == "NONE" and ns.dtype == "float32"


def test_full_eagle3_configuration() -> None:
    assert check_args(["--tp-size", "2", "--all-reduce-backend", "gloo", *SPEC]) == []


def test_eagle3_without_numbers_gets_sglang_defaults() -> None:
    ns = parse_args(["--speculative-algorithm", "EAGLE3"])
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens) == (3, 1, 4)


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--no-such-flag"], "--no-such-flag"),
    (["--tp"], "--tp"),  # abbreviations are off: a prefix is an unknown flag
    (["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"], "give all three"),
    ([*SPEC[:-1], "5"], "--speculative-num-draft-tokens must equal"),
    (["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
      "--speculative-num-draft-tokens", "4"], "topk must be 1"),
    (["--speculative-num-steps", "3"], "without --speculative-algorithm"),
    (["--all-reduce-backend", "nccl"], "needs --device cuda"),
    (["--device", "cuda", "--all-reduce-backend", "shm"], "cpu only"),
    (["--load-format", "auto"], "invalid choice"),
    (["--tp-size", "3"], "not divisible by --tp-size 3"),
    (["--tp-size", "0"], "must be >= 1"),
    (["--model-path", "/nonexistent"], "no config.json"),
])
def test_errors_name_the_problem(argv: list[str], fragment: str) -> None:
    errors = check_args(argv)
    assert errors, argv
    assert any(fragment in e for e in errors), errors


def test_check_args_never_exits_and_parse_args_does() -> None:
    assert check_args(["--bogus"])  # returned, not raised
    with pytest.raises(SystemExit) as exc:
        parse_args(["--bogus"])
    assert exc.value.code == 2


def test_build_parser_is_plain_argparse() -> None:
    ns = build_parser().parse_args(["--port", "1234", "--random-seed", "7"])
    assert ns.port == 1234 and ns.random_seed == 7


def test_bad_config_fields(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2, "hidden_size": 60, "num_attention_heads": 8, '
                                          '"intermediate_size": 64, "vocab_size": 512}')
    assert any("divisible by num_attention_heads" in e for e in check_args(["--model-path", str(tmp_path)]))


def test_draft_config_must_match_target(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 1, "hidden_size": 128, "num_attention_heads": 8, '
                                          '"intermediate_size": 64, "vocab_size": 512}')
    errors = check_args(["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(tmp_path)])
    assert any("hidden_size=128 differs" in e for e in errors)
