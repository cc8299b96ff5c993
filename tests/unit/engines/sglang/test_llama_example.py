"""The Llama-3.1-8B-Instruct + EAGLE-3 example at TP=2/4/8, on NVLink and on PCIe hosts: the static
rules (fast) and SGLang 0.5.23's own parser and model loading of every configuration (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.engines.sglang.rules import check_plan
from specsweep.testing.parser_env import assert_only_unmounted_weights, labelled_plans, preflight_config_set
from specsweep.testing.parser_env import parser_python as build_parser_python
from specsweep.testing.workflow import REPO

BASE = REPO / "config" / "llama31-8b-eagle3.yaml"
PCIE = REPO / "config" / "llama31-8b-eagle3-pcie.yaml"
DUMMY = REPO / "config" / "llama31-8b-eagle3-dummy.yaml"
CONFIG_SETS = {
    "nvlink": [BASE],
    "pcie": [BASE, PCIE],
    "nvlink-dummy": [BASE, DUMMY],
    "pcie-dummy": [BASE, PCIE, DUMMY],
}


@pytest.mark.parametrize("config_set", sorted(CONFIG_SETS))
def test_every_tp_size_has_a_baseline_and_eagle3_with_gpus_to_match(config_set):
    _config, plans, labels = labelled_plans(CONFIG_SETS[config_set])
    for tp in (2, 4, 8):
        for name in (f"nospec-tp{tp}", f"eagle3-tp{tp}", f"eagle3-tp{tp}-nccl"):
            assert plans[name].server_args["tp-size"] == tp and plans[name].gpus == tp, name
        sa = plans[f"eagle3-tp{tp}"].server_args
        assert (sa["speculative-algorithm"], sa["speculative-num-steps"], sa["speculative-eagle-topk"],
                sa["speculative-num-draft-tokens"]) == ("EAGLE3", 3, 1, 4)
        assert "speculative-algorithm" not in plans[f"nospec-tp{tp}"].server_args
    pcie = config_set.startswith("pcie")
    assert all(p.nvlink is (not pcie) for p in plans.values())
    assert {n for n in plans if n.endswith("-pcie-ipc")} == ({f"eagle3-tp{t}-pcie-ipc" for t in (2, 4, 8)}
                                                             if pcie else set())
    for name, plan in plans.items():
        assert [f.message for f in check_plan(plan, labels[name]) if f.severity == "error"] == [], name


@pytest.mark.parametrize("config_set", ["pcie", "pcie-dummy"])
def test_tp2_pcie_ipc_runs_without_the_custom_all_reduce(config_set):
    """At TP=2 on PCIe SGLang's legacy custom all-reduce comes up (custom_all_reduce_utils.py:490-513), is
    tried before PCIe IPC (parallel_state.py:959-975) and takes the all-reduces up to its size
    (custom_all_reduce.py:260-274): the PCIe IPC configuration turns it off, and the rule warns whenever a
    PCIe IPC configuration at TP=2 leaves it on."""
    _, plans, labels = labelled_plans(CONFIG_SETS[config_set])
    plan, own = plans["eagle3-tp2-pcie-ipc"], labels["eagle3-tp2-pcie-ipc"]
    assert plan.server_args["disable-custom-all-reduce"] is True
    assert "--disable-custom-all-reduce" in plan.argv
    assert [f for f in check_plan(plan, own) if f.rule == "pcie-ipc-custom-ar"] == []
    left_on = plan.replace(server_args={k: v for k, v in plan.server_args.items() if k != "disable-custom-all-reduce"})
    found = [f for f in check_plan(left_on, own) if f.rule == "pcie-ipc-custom-ar"]
    assert [f.severity for f in found] == ["warning"]
    assert found[0].message.startswith("configurations.eagle3-tp2-pcie-ipc.server_args.disable-custom-all-reduce: ")
    assert "set disable-custom-all-reduce: true" in found[0].message
    # Only at TP=2: above it the custom all-reduce refuses PCIe-only GPUs itself (and logs it).
    tp4 = "eagle3-tp4-pcie-ipc"
    assert [f for f in check_plan(plans[tp4], labels[tp4]) if f.rule == "pcie-ipc-custom-ar"] == []


def test_the_model_directories_hold_the_shapes_the_verify_path_depends_on():
    import json

    target = json.loads((REPO / "config/models/llama31-8b-instruct/config.json").read_text())
    draft = json.loads((REPO / "config/models/llama31-8b-eagle3/config.json").read_text())
    assert (target["num_hidden_layers"], target["hidden_size"], target["num_key_value_heads"]) == (32, 4096, 8)
    assert draft["architectures"] == ["LlamaForCausalLMEagle3"] and draft["num_hidden_layers"] == 1
    assert draft["hidden_size"] == target["hidden_size"] and draft["vocab_size"] == target["vocab_size"]
    assert target["num_key_value_heads"] % 8 == 0  # TP=8 splits the KV heads evenly


# --- SGLang 0.5.23's own parser and ModelConfig (slow: the pinned parser venv) ----------------


@pytest.fixture(scope="session")
def parser_python() -> str:
    # The shared pinned venv (specsweep.testing.parser_env); a venv that cannot be built fails the tests.
    return build_parser_python()


@pytest.mark.slow
@pytest.mark.parametrize("config_set", sorted(CONFIG_SETS))
def test_every_configuration_passes_sglang_parser(parser_python, config_set):
    plans, results, bad = preflight_config_set(CONFIG_SETS[config_set], parser_python)
    assert set(results) == set(plans)
    if not config_set.endswith("dummy") and not Path("/models").exists():
        assert_only_unmounted_weights(bad)
    else:
        assert bad == {}
    assert {r["sglang_version"] for r in results.values()} == {"0.5.23"}
    assert results["eagle3-tp2"]["argv"][:3] == ["python3", "-m", "sglang.launch_server"]


@pytest.mark.slow
def test_custom_all_reduce_at_tp2_on_pcie_is_as_the_rule_says(parser_python):
    """The lines the pcie-ipc-custom-ar rule cites, in the pinned wheel (paths under sglang/srt/distributed/)."""
    from specsweep.testing.parser_env import wheel_site

    root = wheel_site(parser_python) / "sglang" / "srt" / "distributed"

    def lines(path: str, first: int, last: int) -> str:
        return "\n".join((root / path).read_text().splitlines()[first - 1:last])

    utils = lines("device_communicators/custom_all_reduce_utils.py", 490, 513)
    assert "if world_size > 2 and not full_nvlink:" in utils and "return full_nvlink" in utils  # 2 GPUs: on
    v2 = lines("device_communicators/custom_all_reduce_v2.py", 586, 604)
    assert "return full_nvlink is True" in v2  # V2 wants full NVLink
    legacy = lines("device_communicators/custom_all_reduce.py", 260, 274)
    assert "if self.world_size == 2 or self.full_nvlink:" in legacy and "return inp_size <= self.max_size" in legacy
    order = lines("parallel_state.py", 959, 975)
    assert order.index('return "ca"') < order.index('return "pcie_ipc"')
