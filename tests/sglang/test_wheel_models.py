"""The model classes the weight-free Kimi-K2.5 configurations name exist in the pinned SGLang wheel.

Against the sglang of the preflight venv (``specsweep.testing.parser_env``): fails, never skips,
when the venv cannot be built.
"""

from __future__ import annotations

from specsweep.testing.parser_env import parser_python, wheel_site


def test_dummy_architectures_exist_in_pinned_wheel():
    """Both architectures are model entry classes of the sglang that the parser venv pins."""
    srt = wheel_site(parser_python()) / "sglang" / "srt"  # the venv built if needed (fails, never skips)
    models = srt / "models"
    assert "EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM" in (models / "deepseek_v2.py").read_text()
    assert "EntryClass = [KimiK25ForConditionalGeneration]" in (models / "kimi_k25.py").read_text()
    assert "EntryClass = [LlamaForCausalLMEagle3]" in (models / "llama_eagle3.py").read_text()
    assert "KimiK25Config" in (srt / "utils" / "hf_transformers" / "common.py").read_text()
