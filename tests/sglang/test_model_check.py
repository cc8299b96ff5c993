"""Preflight loads every model and draft directory through SGLang 0.5.23's own code (slow, runs in CI).

Against the pinned wheel in the preflight venv (``specsweep.testing.parser_env``):
fails, never skips, when the venv cannot be built.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specsweep.contracts.plan import Plan
from specsweep.engines.sglang.preflight import preflight_plans, run_model_check
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_plans
from specsweep.testing.parser_env import job_preflights
from specsweep.testing.parser_env import parser_python as build_parser_python
from specsweep.testing.workflow import REPO

GPU_CONFIG = REPO / "config" / "kimi-k25-8gpu.yaml"
DUMMY_OVERLAY = REPO / "config" / "kimi-k25-8gpu-dummy.yaml"
MULTIMODAL = REPO / "tests" / "fixtures" / "models" / "kimi-k25-multimodal"
DRAFT = REPO / "config" / "models" / "kimi-k25-eagle3"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def parser_python() -> str:
    return build_parser_python()


def _plans(*paths: Path) -> tuple[dict, dict[str, Plan]]:
    config = load_configs(list(paths))
    return config, {name: Plan.from_dict(plan) for name, plan in resolve_plans(config).items()}


def test_weight_free_matrix_passes_and_loads_a_text_model():
    # The matrix as the workflow's preflight jobs check it, in one process shared with tests/workflow/test_dag.py.
    _plans_, results = job_preflights((GPU_CONFIG, DUMMY_OVERLAY))
    assert {n: r["errors"] for n, r in results.items() if not r["ok"]} == {}
    loaded = results["eagle3"]["loaded"]
    assert [(x["role"], x["architectures"], x["multimodal"]) for x in loaded] == [
        ("model", ["DeepseekV3ForCausalLM"], False), ("draft", ["LlamaForCausalLMEagle3"], False)]
    assert loaded[0]["tokenizer_manager"].startswith("nothing")  # --skip-tokenizer-init, text model
    assert loaded[0]["path"] == str(REPO / "config" / "models" / "kimi-k25-text")
    assert [x["role"] for x in results["nospec"]["loaded"]] == ["model"]


def test_real_weights_matrix_fails_on_a_missing_mount_and_on_a_config_json_only_multimodal_dir(
    parser_python, tmp_path
):
    """Unmounted weights: the volume key. A multimodal config.json-only checkpoint: SGLang's own OSError."""
    config, plans = _plans(GPU_CONFIG)
    eagle3 = plans["eagle3"]
    missing = eagle3.replace(volumes=[f"{tmp_path}/nothing-here:/models:ro"])
    weights = tmp_path / "weights"
    (weights / "kimi-k2.5").mkdir(parents=True)
    shutil.copy(MULTIMODAL / "config.json", weights / "kimi-k2.5" / "config.json")
    shutil.copytree(DRAFT, weights / "kimi-k2.5-eagle3")
    multimodal = eagle3.replace(name="multimodal", volumes=[f"{weights}:/models:ro"])
    results = preflight_plans([missing, multimodal], parser_python, config["images"], base=REPO)

    errors = results["eagle3"]["errors"]
    assert any(e.startswith("configurations.eagle3.volumes[0]: host path") and "nothing-here" in e for e in errors)
    errors = results["multimodal"]["errors"]
    assert len(errors) == 1, errors
    assert errors[0].startswith("configurations.multimodal.server_args.model-path: model directory "
                                f"{weights}/kimi-k2.5: SGLang's get_processor raised OSError: "
                                "Can't load image processor")
    model, draft = results["multimodal"]["loaded"]
    assert model["architectures"] == ["KimiK25ForConditionalGeneration"] and model["multimodal"] is True
    assert draft["architectures"] == ["LlamaForCausalLMEagle3"]


def test_language_model_only_is_not_an_option_for_kimi_k25(parser_python):
    """Why the weight-free overlay uses a text-only DeepSeek-V3 config: SGLang refuses --language-model-only here."""
    flags = ["--model-path", str(MULTIMODAL), "--load-format", "dummy", "--skip-tokenizer-init", "--tp-size", "8",
             "--trust-remote-code"]
    report = run_model_check([{"name": "lmo", "argv": [*flags, "--language-model-only"], "env": {}},
                              {"name": "mm", "argv": flags, "env": {}}], parser_python)
    assert report["sglang_version"] == "0.5.23" and report["transformers_version"] == "5.19.0"
    (lmo,) = report["results"]["lmo"]["errors"]
    assert "handle_language_model_only raised ValueError: --language-model-only does not support " \
           "['KimiK25ForConditionalGeneration']" in lmo
    (mm,) = report["results"]["mm"]["errors"]
    assert "get_processor raised OSError: Can't load image processor" in mm
