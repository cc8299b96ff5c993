"""SGLangEngine: golden argv, address flags, readiness path, registry."""

from __future__ import annotations

from pathlib import Path

from specsweep.engines import get_engine
from specsweep.plan import resolve_plans
from specsweep.sglang.engine import SGLangEngine
from specsweep.sglang.preflight import load_configs

REPO = Path(__file__).resolve().parents[2]


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
    plans = resolve_plans(load_configs([REPO / "config" / "kimi-k25-8gpu.yaml"]))
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
    assert combo["variant"] == ["flashinfer_fusion", "pcie_ipc_allreduce"]
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
    assert argv[argv.index("--model-path") + 1] == "/specsweep-models/kimi-k25"
