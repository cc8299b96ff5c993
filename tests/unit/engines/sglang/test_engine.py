"""SGLangEngine: golden argv, address flags, readiness path, registry."""

from __future__ import annotations

from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.engine import SGLangEngine
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_labels, resolve_plans
from specsweep.testing.workflow import REPO


def test_identity():
    engine = get_engine("sglang")
    assert isinstance(engine, SGLangEngine)
    assert engine.name == "sglang"
    assert engine.ready_path == "/ready"  # never /health: it generates a token
    assert engine.container_port == 30000


def test_launch_argv_golden():
    argv = SGLangEngine().launch_argv(
        "/usr/bin/python3",
        {
            "tp-size": 8,
            "model-path": "/models/kimi-k2.5",
            "trust-remote-code": True,
            "disable-custom-all-reduce": False,
            "speculative-draft-load-format": None,
            "speculative-algorithm": "EAGLE3",
            "speculative-num-steps": 3,
        },
    )
    assert argv == [
        "/usr/bin/python3", "-m", "sglang.launch_server",
        "--model-path", "/models/kimi-k2.5",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-num-steps", "3",
        "--tp-size", "8",
        "--trust-remote-code",
    ]


def test_address_args():
    assert SGLangEngine().address_args("0.0.0.0", 30000) == ["--host", "0.0.0.0", "--port", "30000"]


def test_matrix_argv_golden():
    """The resolved argv of the EAGLE-3 baseline and of a combination, as plan.json will hold them."""
    config = load_configs([REPO / "config" / "kimi-k25-8gpu.yaml"])
    plans = resolve_plans(config)
    assert plans["eagle3"]["argv"] == [
        "python3", "-m", "sglang.launch_server",
        "--cuda-graph-max-bs-decode", "8",
        "--model-path", "/models/kimi-k2.5",
        "--random-seed", "0",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/kimi-k2.5-eagle3",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--speculative-num-steps", "3",
        "--tp-size", "8",
        "--trust-remote-code",
    ]
    combo = plans["fi-fusion-pcie-ipc"]
    assert combo["image"] == "sglang-fi-fusion"
    assert "--flashinfer-allreduce-fusion-backend" in combo["argv"]
    assert combo["env"]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1"
    assert "variant" not in combo  # a label: it changes the summary, never what the server runs
    assert resolve_labels(config)["fi-fusion-pcie-ipc"]["variant"] == ["flashinfer_fusion", "pcie_ipc_allreduce"]
    deepep = plans["deepep"]["argv"]
    assert deepep[deepep.index("--moe-a2a-backend") + 1] == "deepep"
    assert deepep[deepep.index("--deepep-mode") + 1] == "low_latency"


def test_dummy_argv_golden():
    files = [REPO / "config" / "kimi-k25-8gpu.yaml", REPO / "config" / "kimi-k25-8gpu-dummy.yaml"]
    plans = resolve_plans(load_configs(files))
    argv = plans["eagle3"]["argv"]
    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert argv[argv.index("--speculative-draft-load-format") + 1] == "dummy"
    assert "--skip-tokenizer-init" in argv
    assert argv[argv.index("--model-path") + 1] == "/specsweep-models/kimi-k25-text"
    # the overlay's list replaces the matrix's weights mount
    assert plans["eagle3"]["volumes"] == ["config/models:/specsweep-models:ro"]


def test_dummy_model_configs_have_the_real_shape():
    """config.json of the weight-free target: Kimi-K2.5's text model (DeepSeek-V3 at Kimi-K2 size), text-only."""
    import json

    target = json.loads((REPO / "config" / "models" / "kimi-k25-text" / "config.json").read_text())
    assert target["architectures"] == ["DeepseekV3ForCausalLM"] and target["model_type"] == "deepseek_v3"
    assert (target["num_hidden_layers"], target["hidden_size"], target["n_routed_experts"],
            target["num_experts_per_tok"]) == (61, 7168, 384, 8)
    assert target["quantization_config"]["quant_method"] == "compressed-tensors"
    # the same numbers as Kimi-K2.5's own text_config (the multimodal fixture)
    mm = json.loads((REPO / "tests" / "fixtures" / "models" / "kimi-k25-multimodal" / "config.json").read_text())
    assert {k: v for k, v in target.items() if k not in ("architectures", "model_type")} == {
        k: v for k, v in mm["text_config"].items() if k not in ("architectures", "model_type")}
    draft = json.loads((REPO / "config" / "models" / "kimi-k25-eagle3" / "config.json").read_text())
    assert draft["architectures"] == ["LlamaForCausalLMEagle3"]
    assert draft["hidden_size"] == draft["target_hidden_size"] == target["hidden_size"]
    assert draft["vocab_size"] == target["vocab_size"]
