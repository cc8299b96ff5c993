"""Bad input fails before anything starts, naming file, key path and what is allowed."""


import pytest
import yaml

from specsweep.plan.config import ConfigError, check_config, load_config, load_configs
from specsweep.testing.workflow import REPO


def _minimal(**configurations):
    return {"configurations": configurations or {"a": {}}}


def _problems(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(cfg, "test.yaml")
    return str(info.value)


# Overlays that are only meaningful merged on their base (no `configurations` of their own).
OVERLAYS = {"kimi-k25-8gpu-local-base.yaml": ["kimi-k25-8gpu.yaml"],
            "refengine-gpu-launches.yaml": ["refengine-gpu.yaml"],
            "llama31-8b-eagle3-pcie.yaml": ["llama31-8b-eagle3.yaml"],
            "screen-check-cpu.yaml": ["screen-cpu.yaml"],
            "race-gpu-effect1.yaml": ["race-gpu.yaml"],
            "race-first-round.yaml": ["race-gpu.yaml", "race-gpu-effect1.yaml"]}


def test_shipped_configs_are_valid():
    for path in [REPO / "config.yaml", *sorted((REPO / "config").glob("*.yaml"))]:
        if path.name in OVERLAYS:
            load_configs([REPO / "config" / base for base in OVERLAYS[path.name]] + [path])
        else:
            load_config(path)


def test_unknown_key_names_path_and_allowed_keys():
    msg = _problems(_minimal(a={"server_arg": {}}))
    assert "test.yaml" in msg
    assert "configurations.a" in msg and "server_arg" in msg and "server_args" in msg


def test_unknown_engine_lists_allowed_values():
    msg = _problems(_minimal(a={"engine": "vllm"}))
    assert "configurations.a.engine" in msg and "'reference', 'sglang'" in msg


def test_wrong_type_is_reported_with_its_path():
    msg = _problems(_minimal(a={"workload": {"concurrency": "four"}}))
    assert "configurations.a.workload.concurrency" in msg


@pytest.mark.parametrize("name", ["Bad", "a b", "../x", "é"])
def test_names_must_be_path_safe(name):
    msg = _problems({"configurations": {name: {}}})
    assert "a-z, 0-9" in msg


def test_unknown_image_and_extends_and_baseline():
    msg = _problems({"baseline": "zz", "configurations": {"a": {"image": "nope", "extends": "ghost"}}})
    assert "baseline: 'zz'" in msg
    assert "configurations.a.image: 'nope'" in msg
    assert "configurations.a.extends: 'ghost'" in msg


def test_extends_cycle():
    msg = _problems({"configurations": {"a": {"extends": "b"}, "b": {"extends": "a"}}})
    assert "cycle" in msg


def test_duplicate_yaml_key_is_an_error(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("configurations:\n  a: {}\n  a: {engine: reference}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "duplicate key 'a'" in str(info.value) and "dup.yaml" in str(info.value)


def test_all_problems_reported_at_once():
    msg = _problems(_minimal(a={"engine": "x"}, b={"runtime": "k8s"}))
    assert "configurations.a.engine" in msg and "configurations.b.runtime" in msg


def test_default_config_round_trips_through_yaml():
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    checked = check_config(cfg, "config.yaml")
    control = checked["configurations"].pop("eagle3-shm-slow10")  # the positive control, added by the check
    assert checked == cfg and control["extends"] == "eagle3-shm"
    assert check_config(check_config(cfg, "config.yaml"), "config.yaml")["configurations"] == \
        check_config(cfg, "config.yaml")["configurations"], "checking twice adds nothing"
