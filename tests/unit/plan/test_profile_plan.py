"""The profile key: absent from every plan unless on, so existing results never rerun for it."""

import copy

import pytest
import yaml

from specsweep.files import canonical_json
from specsweep.plan.config import ConfigError, check_config, load_config
from specsweep.plan.resolve import resolve_plans
from specsweep.testing.workflow import REPO


def _config():
    return check_config(yaml.safe_load((REPO / "config.yaml").read_text()), "config.yaml")


# Config files whose plans resolve without a dataset made at test time (refengine-sharegpt-chat.yaml needs one).
CONFIG_FILES = ["config.yaml", "config/docker-cpu.yaml", "config/kimi-k25-8gpu.yaml", "config/refengine-gpu.yaml",
                "config/profile-cpu.yaml"]


@pytest.mark.parametrize("name", CONFIG_FILES)
def test_plans_carry_profile_only_where_it_is_on(name):
    cfg = load_config(REPO / name)
    for name, plan in resolve_plans(cfg).items():
        entry_profile = (cfg["configurations"][name] or {}).get("profile")
        if "profile" in plan:
            assert plan["profile"]["enabled"] is True
        else:
            assert not (entry_profile or {}).get("enabled"), name


def test_turning_profiling_on_changes_only_that_configuration_and_its_children():
    cfg = _config()
    before = {k: canonical_json(v) for k, v in resolve_plans(cfg).items()}
    on = copy.deepcopy(cfg)
    on["configurations"]["eagle3-gloo"]["profile"] = {"enabled": True, "num_steps": 8}
    after = resolve_plans(check_config(on, "x.yaml"))
    changed = {k for k in before if canonical_json(after[k]) != before[k]}
    assert changed == {"eagle3-gloo", "eagle3-shm", "eagle3-shm-slow10"}  # each extends the one before
    assert after["eagle3-gloo"]["profile"] == {
        "enabled": True, "requests": 2, "num_steps": 8, "activities": ["CPU", "GPU"], "trace_timeout_s": 600,
        "allreduce_bench": True, "allreduce_iters": 200, "allreduce_timeout_s": 600}
    off = copy.deepcopy(on)
    off["configurations"]["eagle3-gloo"]["profile"] = {"enabled": False, "num_steps": 8}
    assert {k: canonical_json(v) for k, v in resolve_plans(check_config(off, "x.yaml")).items()} == before


@pytest.mark.parametrize("profile,path", [
    ({"requests": 0}, "configurations.a.profile.requests"),
    ({"activities": ["TPU"]}, "configurations.a.profile.activities"),
    ({"enable": True}, "configurations.a.profile"),
])
def test_bad_profile_settings_name_the_key(profile, path):
    with pytest.raises(ConfigError) as info:
        check_config({"configurations": {"a": {"profile": profile}}}, "test.yaml")
    assert "test.yaml" in str(info.value) and path in str(info.value)
