"""Grids: axes expanded into ordinary configurations with readable, deterministic names."""

from __future__ import annotations

import copy

import pytest
import yaml

from specsweep.__main__ import main
from specsweep.files import canonical_json
from specsweep.plan.config import ConfigError, check_config, check_sweep
from specsweep.plan.grid import value_label
from specsweep.plan.resolve import resolve_plans
from specsweep.testing.workflow import REPO

AXES = [
    {"server_args.all-reduce-backend": ["gloo", "shm"]},
    {"env.SGLANG_SIMULATE_ACC_LEN": ["1.5", "2.0", "3.0"], "token": "acc"},
]


def _config(axes=None, **entry) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    grid = {"description": "the grid", "extends": "eagle3-gloo", "axes": copy.deepcopy(axes or AXES), **entry}
    config["configurations"]["sweep"] = grid
    return config


def _problems(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(config, "grid.yaml")
    text = str(info.value)
    assert "grid.yaml" in text
    return text


def test_axes_multiply_into_named_configurations_with_their_values():
    expanded = check_config(_config(), "grid.yaml")
    names = sorted(n for n in expanded["configurations"] if n.startswith("sweep-"))
    assert names == sorted(f"sweep-{b}-acc{a}" for b in ("gloo", "shm") for a in ("1p5", "2p0", "3p0"))
    assert "sweep" not in expanded["configurations"], "a grid entry is replaced by its configurations"
    plans = resolve_plans(expanded)
    plan = plans["sweep-shm-acc2p0"]
    assert plan["server_args"]["all-reduce-backend"] == "shm"
    assert plan["env"]["SGLANG_SIMULATE_ACC_LEN"] == "2.0"
    assert plan["server_args"]["speculative-algorithm"] == "EAGLE3"  # inherited through extends
    assert "--all-reduce-backend" in plan["argv"] and "shm" in plan["argv"]
    desc = expanded["configurations"]["sweep-shm-acc2p0"]["description"]
    assert desc == "the grid [all-reduce-backend=shm, SGLANG_SIMULATE_ACC_LEN=2.0]"


def test_a_generated_configuration_equals_the_same_configuration_written_out():
    expanded = check_config(_config(), "grid.yaml")
    by_hand = yaml.safe_load((REPO / "config.yaml").read_text())
    by_hand["configurations"]["sweep-shm-acc2p0"] = {
        "extends": "eagle3-gloo", "server_args": {"all-reduce-backend": "shm"},
        "env": {"SGLANG_SIMULATE_ACC_LEN": "2.0"}}
    a = resolve_plans(expanded)["sweep-shm-acc2p0"]
    b = resolve_plans(check_config(by_hand, "x"))["sweep-shm-acc2p0"]
    assert canonical_json(a) == canonical_json(b)


def test_zipped_axes_vary_together_and_labels_name_values():
    axes = [{"server_args.speculative-num-steps": [1, 3], "server_args.speculative-num-draft-tokens": [2, 4],
             "token": "steps", "labels": ["short", "long"]},
            {"env.NCCL_ALGO": [None, "Ring"], "labels": ["auto", "ring"]}]
    sweep = check_sweep(_config(axes), "grid.yaml")
    names = sorted(n for n in sweep.config["configurations"] if n.startswith("sweep-"))
    assert names == ["sweep-stepslong-auto", "sweep-stepslong-ring", "sweep-stepsshort-auto", "sweep-stepsshort-ring"]
    plans = resolve_plans(sweep.config)
    assert plans["sweep-stepsshort-ring"]["server_args"]["speculative-num-steps"] == 1
    assert plans["sweep-stepsshort-ring"]["server_args"]["speculative-num-draft-tokens"] == 2
    assert "NCCL_ALGO" not in plans["sweep-stepslong-auto"]["env"], "null removes the variable"
    assert plans["sweep-stepslong-ring"]["env"]["NCCL_ALGO"] == "Ring"
    assert sweep.grids["sweep"].members["sweep-stepslong-ring"] == {
        "server_args.speculative-num-draft-tokens": 4, "server_args.speculative-num-steps": 3, "env.NCCL_ALGO": "Ring"}


def test_workload_axes_reach_the_plan():
    axes = [{"workload.concurrency": [1, 4], "token": "c"}, {"workload.warmup.window": [2, 3], "token": "w"}]
    plans = resolve_plans(check_config(_config(axes), "grid.yaml"))
    assert plans["sweep-c4-w3"]["workload"]["concurrency"] == 4
    assert plans["sweep-c4-w3"]["workload"]["warmup"]["window"] == 3
    assert plans["sweep-c4-w3"]["workload"]["warmup"]["max_requests"] == 8  # the rest of warmup is kept


@pytest.mark.parametrize("value, label", [("2.5", "2p5"), ("allreduce:tree", "allreduce_tree"), (None, "none"),
                                          (True, "true"), (16777216, "16777216"), ("Ring", "ring")])
def test_value_labels(value, label):
    assert value_label(value) == label


def test_names_do_not_depend_on_key_order_in_the_file():
    a = check_config(_config(), "grid.yaml")
    reordered = _config([{"token": "acc", "env.SGLANG_SIMULATE_ACC_LEN": ["1.5", "2.0", "3.0"]},
                         {"server_args.all-reduce-backend": ["gloo", "shm"]}][::-1])
    b = check_config(reordered, "grid.yaml")
    plans_a, plans_b = resolve_plans(a), resolve_plans(b)
    assert {k: canonical_json(v) for k, v in plans_a.items()} == {k: canonical_json(v) for k, v in plans_b.items()}


def test_editing_one_axis_value_adds_and_removes_only_its_configurations():
    before = {k: canonical_json(v) for k, v in resolve_plans(check_config(_config(), "g")).items()}
    edited_axes = copy.deepcopy(AXES)
    edited_axes[1]["env.SGLANG_SIMULATE_ACC_LEN"][2] = "3.5"
    after = {k: canonical_json(v) for k, v in resolve_plans(check_config(_config(edited_axes), "g")).items()}
    assert sorted(set(before) - set(after)) == ["sweep-gloo-acc3p0", "sweep-shm-acc3p0"]
    assert sorted(set(after) - set(before)) == ["sweep-gloo-acc3p5", "sweep-shm-acc3p5"]
    assert all(before[k] == after[k] for k in set(before) & set(after)), "every other plan is byte-identical"


def test_editing_a_labelled_value_changes_only_that_plan():
    axes = [{"env.NCCL_BUFFSIZE": ["4194304", "16777216"], "labels": ["buf4m", "buf16m"]}]
    before = {k: canonical_json(v) for k, v in resolve_plans(check_config(_config(axes), "g")).items()}
    axes[0]["env.NCCL_BUFFSIZE"][1] = "33554432"
    after = {k: canonical_json(v) for k, v in resolve_plans(check_config(_config(axes), "g")).items()}
    assert set(before) == set(after)
    assert [k for k in before if before[k] != after[k]] == ["sweep-buf16m"]


def test_unknown_axis_key_names_the_file_the_key_and_the_allowed_forms():
    text = _problems(_config([{"sever_args.tp-size": [1, 2]}]))
    assert "configurations.sweep.axes[0]" in text and "sever_args.tp-size" in text
    assert "server_args.<flag>, env.<VAR> or workload.<key>" in text


def test_unknown_workload_key_lists_the_allowed_keys():
    text = _problems(_config([{"workload.concurency": [1, 2]}]))
    assert "workload.concurency" in text and "'concurrency'" in text and "allowed" in text


def test_empty_list_is_refused():
    text = _problems(_config([{"env.NCCL_ALGO": []}]))
    assert "configurations.sweep.axes[0]" in text and "NCCL_ALGO" in text


def test_zipped_lists_of_unequal_length_are_refused():
    text = _problems(_config([{"env.A": ["1", "2"], "env.B": ["1"]}]))
    assert "equal length" in text and "'env.A': 2" in text


def test_a_value_the_schema_refuses_names_its_axis_and_position():
    text = _problems(_config([{"workload.concurrency": [1, 0]}]))
    assert "configurations.sweep.axes[0].workload.concurrency[1]" in text and "minimum" in text


def test_values_with_the_same_name_part_collide():
    text = _problems(_config([{"env.NCCL_ALGO": ["Ring", "ring"]}]))
    assert "same name part ['ring']" in text and "configurations.sweep.axes[0]" in text


def test_generated_name_colliding_with_a_configuration_is_refused():
    config = _config([{"server_args.all-reduce-backend": ["gloo", "shm"]}])
    config["configurations"]["sweep-shm"] = {"extends": "nospec"}
    text = _problems(config)
    assert "'sweep-shm' collides with configurations.sweep-shm" in text


def test_a_grid_cannot_be_extended_or_the_baseline():
    config = _config()
    config["configurations"]["child"] = {"extends": "sweep"}
    text = _problems(config)
    assert "configurations.child.extends: 'sweep' is a grid" in text and "sweep-gloo-acc1p5" in text
    config = _config()
    config["baseline"] = "sweep"
    assert "baseline: 'sweep' is a grid" in _problems(config)


def test_axes_in_defaults_are_refused():
    config = _config()
    config["defaults"]["axes"] = AXES
    assert "defaults.axes" in _problems(config)


def test_a_generated_configuration_can_be_the_baseline_and_be_extended():
    config = _config()
    config["baseline"] = "sweep-shm-acc1p5"
    config["configurations"]["child"] = {"extends": "sweep-shm-acc1p5", "env": {"NCCL_DEBUG": "INFO"}}
    plans = resolve_plans(check_config(config, "g"))
    assert plans["child"]["env"]["SGLANG_SIMULATE_ACC_LEN"] == "1.5"


def test_check_lists_the_generated_configurations(tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    # The grid varies the all-reduce backend, so the parent's `variant: all-reduce:gloo` label
    # would contradict its shm members (a plan-time refusal of its own): the grid clears it.
    path.write_text(yaml.safe_dump(_config(variant=[])))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sweep-shm-acc3p0: python3 -m specsweep.refengine" in out
    assert sum(line.startswith("sweep-") for line in out.splitlines()) == 6


def test_check_reports_bad_axes_before_anything_runs(tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(_config([{"env.X": []}])))
    assert main(["check", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_shipped_grid_configs_expand():
    names = check_config(yaml.safe_load((REPO / "config/sweep-cpu.yaml").read_text()), "x")["configurations"]
    assert len(names) == 9 and "eagle3-gloo-acc2p8" in names
