"""runtime external: its plan (no argv, the url's address) and the keys it refuses, before any job."""

import copy

import pytest
import yaml

from specsweep.plan.config import ConfigError, check_config
from specsweep.plan.resolve import label_findings, plan_problems, resolve_labels, resolve_plans
from specsweep.testing.workflow import REPO
from specsweep.workflow import inputs


def _external() -> dict:
    return yaml.safe_load((REPO / "config" / "external.yaml").read_text())


def _plans(raw: dict) -> dict:
    return resolve_plans(check_config(copy.deepcopy(raw), "external.yaml"))


def test_the_example_plans_an_attach_with_the_urls_address_and_nothing_to_launch():
    plan = _plans(_external())["served"]
    assert plan["runtime"] == "external" and plan["url"] == "http://127.0.0.1:30000"
    assert plan["argv"] == [] and plan["server_args"] == {} and plan["env"] == {}
    assert (plan["host"], plan["port"]) == ("127.0.0.1", 30000)
    assert plan_problems({"served": plan}) == []


def test_a_trailing_slash_and_a_path_prefix_are_kept_as_the_base_url():
    raw = _external()
    raw["defaults"]["url"] = "https://bench.example:8443/sglang/"
    plan = _plans(raw)["served"]
    assert plan["url"] == "https://bench.example:8443/sglang"
    assert (plan["host"], plan["port"]) == ("bench.example", 8443)


def test_the_parser_env_is_not_an_input_of_an_external_sglang_plan():
    raw = _external()
    raw["defaults"]["engine"] = "sglang"
    plans = _plans(raw)
    assert inputs.parser_env_input(plans, raw, "served") == []


@pytest.mark.parametrize("key, value", [
    ("server_args", {"tp-size": 2}),
    ("env", {"NCCL_ALGO": "Ring"}),
    ("gpus", 2),
    ("volumes", ["models:/models:ro"]),
    ("profile", {"enabled": True}),
])
def test_what_only_a_launch_uses_is_refused_with_its_key_path(key, value):
    raw = _external()
    raw["configurations"]["served"][key] = value
    problems = plan_problems(_plans(raw))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"configurations.served.{key}: runtime 'external' launches nothing")


def test_external_without_url_and_url_without_external_are_refused():
    raw = _external()
    del raw["defaults"]["url"]
    assert plan_problems(_plans(raw)) == ["configurations.served.url: runtime 'external' needs the running "
                                          "server's base URL, e.g. url: http://127.0.0.1:30000"]
    raw = _external()
    raw["defaults"]["runtime"] = "local"
    [problem] = plan_problems(_plans(raw))
    assert problem.startswith("configurations.served.url: only runtime 'external' attaches to a url;")


def test_a_url_the_schema_cannot_read_is_refused_at_the_file():
    raw = _external()
    raw["defaults"]["url"] = "127.0.0.1:30000"  # no scheme
    with pytest.raises(ConfigError, match="url"):
        check_config(raw, "external.yaml")


def test_a_variant_is_refused_because_no_server_log_can_prove_it():
    raw = _external()
    raw["configurations"]["served"]["variant"] = "custom_ar"
    config = check_config(copy.deepcopy(raw), "external.yaml")
    errors, _ = label_findings(resolve_plans(config), resolve_labels(config))
    assert errors == ["configurations.served.variant: runtime 'external' has no server log to prove a variant "
                      "with; remove variant"]
