"""The positive control: one more configuration with a known injected slowdown, checked at plan time."""

from __future__ import annotations

import json

import pytest
import yaml

from specsweep.plan.config import ConfigError, check_config, check_sweep
from specsweep.plan.controls import STEP_SLOWDOWN_ENV, control_name
from specsweep.plan.resolve import resolve_labels, resolve_sweep
from specsweep.testing.workflow import REPO
from specsweep.workflow import inputs


def _config(**control) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.pop("positive_control", None)
    if control:
        config["positive_control"] = control
    return config


def test_names_carry_the_slowdown_in_percent():
    assert control_name("eagle3-shm", 0.10) == "eagle3-shm-slow10"
    assert control_name("x", 0.05) == "x-slow5"
    assert control_name("x", 0.025) == "x-slow2p5"


def test_the_control_is_a_configuration_extending_its_twin_with_the_fault_and_its_launches():
    config = _config(of="eagle3-shm", slowdown=0.1)
    config["configurations"]["eagle3-shm"]["launches"] = 2
    checked = check_config(config, "x")
    plans, launches = resolve_sweep(checked, "x")
    control, twin = plans["eagle3-shm-slow10"], plans["eagle3-shm"]
    assert control["env"] == {**twin["env"], STEP_SLOWDOWN_ENV: "0.1"}
    assert {k: v for k, v in control.items() if k not in ("env", "name")} == \
        {k: v for k, v in twin.items() if k not in ("env", "name")}, "only the fault differs from the twin"
    assert launches["eagle3-shm-slow10"] == 2
    order = inputs.launch_order(checked, launches)
    assert order.index(("eagle3-shm-slow10", "1")) < order.index(("eagle3-shm", "2")), "interleaved, not A A B B"
    labels = resolve_labels(checked)["eagle3-shm-slow10"]
    assert "Positive control" in labels["description"] and labels["variant"] == ["all-reduce:shm"]


def test_without_the_key_nothing_is_added():
    assert sorted(check_config(_config(), "x")["configurations"]) == ["eagle3-gloo", "eagle3-shm", "nospec"]
    assert sorted(check_config({**_config(), "positive_control": None}, "x")["configurations"]) == \
        ["eagle3-gloo", "eagle3-shm", "nospec"]


def test_the_report_params_name_the_control_and_its_twin():
    sweep = check_sweep(_config(of="nospec", slowdown=0.05), "x")
    plans, _ = resolve_sweep(sweep.config, "x")
    params = json.loads(inputs.report_params(sweep.config, resolve_labels(sweep.config), sorted(plans)))
    assert params["positive_control"] == {"name": "nospec-slow5", "of": "nospec", "slowdown": 0.05}


def test_a_grid_member_can_be_the_twin():
    config = _config(of="eagle3-shm-acc2p0", slowdown=0.1)
    config["configurations"]["eagle3-shm"]["axes"] = [{"env.SGLANG_SIMULATE_ACC_LEN": ["2.0", "3.0"], "token": "acc"}]
    plans, _ = resolve_sweep(check_config(config, "x"), "x")
    assert plans["eagle3-shm-acc2p0-slow10"]["env"]["SGLANG_SIMULATE_ACC_LEN"] == "2.0"


@pytest.mark.parametrize("control, message", [
    ({"of": "nope", "slowdown": 0.1}, "positive_control.of: 'nope' is not a configuration"),
    ({"of": "nospec", "slowdown": 0}, "positive_control.slowdown: 0 is less than or equal to the minimum"),
    ({"of": "nospec", "slowdown": 1.5}, "positive_control.slowdown: 1.5 is greater than the maximum"),
    ({"of": "nospec"}, "'slowdown' is a required property"),
    ({"of": "nospec", "slowdown": 0.1, "extra": 1}, "positive_control: unknown key(s) ['extra']"),
])
def test_bad_controls_name_the_key_and_what_is_allowed(control, message):
    with pytest.raises(ConfigError) as info:
        check_config(_config(**control), "config.yaml")
    assert "config.yaml" in str(info.value) and message in str(info.value)


def test_a_name_collision_is_refused():
    config = _config(of="nospec", slowdown=0.1)
    config["configurations"]["nospec-slow10"] = {"extends": "nospec"}
    with pytest.raises(ConfigError, match="already a configuration"):
        check_config(config, "x")


def test_an_sglang_twin_is_a_plan_time_error_naming_the_key():
    config = yaml.safe_load((REPO / "config" / "kimi-k25-8gpu.yaml").read_text())
    twin = sorted(config["configurations"])[0]
    config["positive_control"] = {"of": twin, "slowdown": 0.05}
    with pytest.raises(ConfigError) as info:
        resolve_sweep(check_config(config, "config/kimi-k25-8gpu.yaml"), "config/kimi-k25-8gpu.yaml")
    assert f"positive_control.of: {twin!r} runs engine 'sglang', which has no step-slowdown fault" in str(info.value)
    assert "config/kimi-k25-8gpu.yaml" in str(info.value)
