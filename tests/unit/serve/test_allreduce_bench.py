"""The all-reduce micro-benchmark script, run for real on CPU ranks (gloo, shm; torch.distributed over gloo).

The torch runner is the one the SGLang configurations use with NCCL inside
their image; on this CPU-only host the same code runs with ``--backend gloo``
(only ``init_process_group``'s backend name differs). NCCL itself runs in
the ``gpu`` tier (tests/gpu/test_cuda.py).
"""

from __future__ import annotations

import json

import pytest

from specsweep.serve.allreduce_bench import MIN_FORWARDS, main, measure_sizes, model_shape, served_dtype
from specsweep.testing.refengine import TINY, run_allreduce_bench


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_refengine_backends_at_the_verify_size(backend):
    out = run_allreduce_bench("--runner", "refengine", "--backend", backend, "--world-size", "2",
                              "--model-path", TINY, "--dtype", "float32", "--tokens", "4", "--iters", "30",
                              "--warmup", "5")
    (size,) = out["sizes"]
    # tiny: hidden 256 x 4 draft tokens x float32
    assert (size["tokens"], size["numel"], size["bytes"]) == (4, 1024, 4096)
    assert size["correct"] and size["iters"] == 30 and len(size["per_rank_median_us"]) == 2
    assert 0 < size["p10_us"] <= size["median_us"] <= size["p90_us"]
    assert out["model"]["num_hidden_layers"] == 10 and out["env"]["OMP_NUM_THREADS"] == "1"
    assert (out["runner"], out["backend"], out["world_size"], out["dtype"]) == ("refengine", backend, 2, "float32")


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_refengine_in_forward_times_the_calls_between_the_models_layers(backend):
    """in_forward: the tiny model's target forwards on both ranks, 20 all-reduces each (2 per layer x 10),
    one figure per forward; the back-to-back loop is kept beside it, and the check still sums ones."""
    out = run_allreduce_bench("--runner", "refengine", "--backend", backend, "--world-size", "2",
                              "--model-path", TINY, "--dtype", "float32", "--tokens", "4", "--tokens", "1",
                              "--iters", "30", "--warmup", "5", "--timing", "in_forward")
    assert out["format_version"] == 2 and out["timing"] == "in_forward"
    for size in out["sizes"]:
        assert size["timing"] == "in_forward" and size["correct"]
        assert size["calls_per_forward"] == 20 and size["forwards"] == MIN_FORWARDS  # more than 30 calls / 20
        assert 0 < size["p10_us"] <= size["median_us"] <= size["p90_us"]
        assert size["back_to_back"]["iters"] == 30 and size["back_to_back"]["median_us"] > 0
        assert len(size["per_rank_median_us"]) == 2
    assert [s["bytes"] for s in out["sizes"]] == [1024, 4096]


def test_in_forward_needs_the_refengine_runner(capsys):
    with pytest.raises(SystemExit, match="in_forward needs --runner refengine"):
        main(["--runner", "torch", "--backend", "gloo", "--world-size", "2", "--model-path", TINY,
              "--tokens", "1", "--timing", "in_forward"])


def test_torch_distributed_runner_on_cpu(capsys):
    assert main(["--runner", "torch", "--backend", "gloo", "--world-size", "2", "--model-path", TINY,
                 "--dtype", "bfloat16", "--tokens", "4", "--tokens", "1", "--iters", "20", "--warmup", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["tokens"] for s in out["sizes"]] == [1, 4]
    assert [s["bytes"] for s in out["sizes"]] == [512, 2048]  # bf16: 2 bytes
    assert all(s["correct"] for s in out["sizes"])


def test_timing_does_not_overflow_and_the_check_sums_ones():
    """Timing runs on zeros (a sum of ones doubles every call); the check is a separate sum of ones."""
    import torch

    calls = []

    def fake_all_reduce(t):  # a 3-rank sum of identical tensors
        calls.append(float(t.float().abs().max()))
        t.mul_(3)

    out = measure_sizes(fake_all_reduce, fake_all_reduce, 3, torch.device("cpu"), [8], torch.float32, 200, 10)
    assert out[8]["correct"] and len(out[8]["times"]) == 200
    assert max(calls[:-1]) == 0.0 and calls[-1] == 1.0


def test_model_shape_reads_text_config_as_kimi_k25_has_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["KimiK25ForConditionalGeneration"],
        "text_config": {"hidden_size": 7168, "num_hidden_layers": 61, "torch_dtype": "bfloat16"}}))
    shape = model_shape(str(tmp_path))
    assert (shape["hidden_size"], shape["num_hidden_layers"], shape["torch_dtype"]) == (7168, 61, "bfloat16")
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 3}))
    with pytest.raises(ValueError, match="hidden_size"):
        model_shape(str(tmp_path))


def test_served_dtype_follows_sglang_auto():
    assert served_dtype("config", {"torch_dtype": "bfloat16"}) == "bfloat16"
    assert served_dtype("config", {"torch_dtype": "float32"}) == "float16"  # model_config.py _get_and_verify_dtype
    assert served_dtype("config", {"torch_dtype": None}) == "float16"
    assert served_dtype("half", {}) == "float16" and served_dtype("float32", {}) == "float32"
