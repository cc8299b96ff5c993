"""Plan-time checks: what `snakemake -n` and `specsweep check` refuse (or warn about) before any job."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.plan.checks import start_findings
from specsweep.plan.config import check_config, load_configs
from specsweep.plan.resolve import resolve_labels, resolve_plans
from specsweep.testing.datasets import write_sharegpt
from specsweep.testing.workflow import REPO, plain_default_config


def _config() -> dict:
    """The shipped configurations (nospec, eagle3-gloo, eagle3-shm), without its positive control."""
    return plain_default_config()


def _findings(config: dict) -> tuple[list[str], list[str]]:
    config = check_config(config, "test.yaml")
    return start_findings(config, resolve_plans(config, "test.yaml"), resolve_labels(config))


def test_the_shipped_config_passes():
    config = load_configs([REPO / "config.yaml"])
    assert start_findings(config, resolve_plans(config), resolve_labels(config)) == ([], [])


def _sharegpt(config: dict, path: Path, **workload) -> dict:
    config["defaults"]["workload"].update(dataset={"format": "sharegpt", "path": str(path)}, **workload)
    return config


def test_a_dataset_with_fewer_distinct_prompts_than_num_prompts_is_refused_with_key_and_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the config's model paths are relative to the workflow's directory
    data = write_sharegpt(tmp_path / "two.json", 2)
    errors, _ = _findings(_sharegpt(_config(), data, num_prompts=50))
    plans = resolve_plans(check_config(_sharegpt(_config(), data, num_prompts=50), "t"), "t")
    distinct = plans["nospec"]["prompts"]["distinct"]
    assert distinct < 50
    assert len(errors) == 3, errors  # one per configuration
    [nospec] = [e for e in errors if e.startswith("configurations.nospec.")]
    assert nospec.startswith("configurations.nospec.workload.num_prompts: ")
    assert f"{distinct} distinct prompt(s)" in nospec and "num_prompts=50" in nospec
    assert "prefix cache" in nospec and f"at most {distinct}" in nospec


def test_a_dataset_of_identical_prompts_is_refused_and_the_plan_counts_one(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    data = tmp_path / "same.jsonl"
    data.write_text('{"prompt": "Tell me about the weather today."}\n' * 20)
    config = _config()
    config["defaults"]["workload"].update(dataset={"format": "jsonl", "path": str(data)}, num_prompts=4)
    errors, _ = _findings(config)
    plans = resolve_plans(check_config(config, "t"), "t")
    assert plans["nospec"]["prompts"]["distinct"] == 1
    assert len(errors) == 3 and all("gives 1 distinct prompt(s)" in e and "num_prompts=4" in e for e in errors), errors


def test_prompts_reused_across_rounds_only_are_a_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    data = write_sharegpt(tmp_path / "few.json", 12)
    config = _sharegpt(_config(), data, num_prompts=4, repeats=3)
    errors, warnings = _findings(config)
    assert errors == [], errors
    assert len(warnings) == 3 and all("rounds reuse each other's prompts" in w for w in warnings), warnings


def test_the_check_names_the_point_whose_selection_repeats(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    data = write_sharegpt(tmp_path / "few.json", 12)
    config = _sharegpt(_config(), data, num_prompts=4, repeats=1)
    config["defaults"]["workload"]["warmup"] = {"max_requests": 2}
    config["configurations"]["nospec"]["points"] = [{"concurrency": 1}, {"concurrency": 2, "num_prompts": 40}]
    errors, _ = _findings(config)
    assert len(errors) == 3, errors  # the eagle3 configurations extend nospec: its points too
    assert errors[-1].startswith("configurations.nospec.points[1].num_prompts (point c2-n40): "), errors


def test_a_speculative_baseline_is_refused():
    config = _config()
    config["baseline"] = "eagle3-shm"
    errors, _ = _findings(config)
    assert len(errors) == 1, errors
    assert errors[0].startswith("baseline: 'eagle3-shm' runs speculative decoding (server_args.speculative-algorithm")
    assert "configurations.eagle3-shm.server_args.speculative-algorithm: NONE" in errors[0]


@pytest.mark.parametrize("variant, words", [
    ("all-reduce:nccl2", ["unknown variant(s) ['all-reduce:nccl2']", "allowed: ['all-reduce:gloo', "]),
    ("custom_allreduce", ["unknown variant(s) ['custom_allreduce'] for the reference engine"]),
    ("all-reduce:gloo", ["contradicts the flags", "--all-reduce-backend shm", "variant: all-reduce:shm"]),
])
def test_the_reference_engine_refuses_a_variant_it_cannot_prove(variant, words):
    config = _config()
    config["configurations"]["eagle3-shm"]["variant"] = variant
    errors, _ = _findings(config)
    assert len(errors) == 1 and errors[0].startswith("configurations.eagle3-shm.variant: "), errors
    assert all(w in errors[0] for w in words), errors[0]
    config["configurations"]["eagle3-shm"]["variant"] = "all-reduce:shm"  # the one its flags select
    assert _findings(config) == ([], [])


def test_reference_engine_flag_errors_are_found_at_plan_time(monkeypatch):
    monkeypatch.chdir(REPO)
    config = _config()
    config["configurations"]["eagle3-shm"]["server_args"]["tp-sise"] = 2
    config["configurations"]["eagle3-gloo"]["server_args"]["speculative-num-steps"] = 5
    errors, _ = _findings(config)
    assert sorted(e.split(":")[0] for e in errors) == ["configurations.eagle3-gloo",
                                                       "configurations.eagle3-shm"], errors
    assert any("--tp-sise" in e for e in errors)
    assert any("--speculative-num-draft-tokens must equal --speculative-num-steps + 1" in e for e in errors)


def test_an_external_server_has_no_flags_to_parse_at_plan_time():
    config = load_configs([REPO / "config/external.yaml"])
    plans = resolve_plans(config)
    assert all(p["argv"] == [] for p in plans.values())
    assert start_findings(config, plans, resolve_labels(config)) == ([], [])


def test_a_workload_longer_than_one_request_may_be_is_refused_naming_the_limit_and_its_source(monkeypatch):
    monkeypatch.chdir(REPO)
    config = _config()
    config["defaults"]["workload"]["output_len"] = 4064  # + input_len 32 = 4096: beyond nospec's 4095
    errors, _ = _findings(config)
    assert len(errors) == 3, errors
    [nospec] = [e for e in errors if e.startswith("configurations.nospec.")]
    assert nospec.startswith("configurations.nospec.workload.output_len: input_len 32 + output_len 4064 = 4096 "
                             "tokens, beyond the 4095 one request may ask for (specsweep/refengine/configs/tiny/"
                             "config.json: max_position_embeddings 4096"), nospec
    config["defaults"]["workload"]["output_len"] = 4060  # 4092: the most an EAGLE request may ask for
    assert _findings(config) == ([], [])
