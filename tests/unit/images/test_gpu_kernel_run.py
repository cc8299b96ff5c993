"""containers/sglang/gpu_kernel_run.py where no GPU is: the references, the tolerance, the shapes, the refusal."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from specsweep.testing.workflow import REPO

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location("gpu_kernel_run", REPO / "containers" / "sglang" / "gpu_kernel_run.py")
gkr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gkr)


def _bf16(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_silu_and_mul_reference_is_silu_of_the_first_half_times_the_second():
    x = _bf16(3, 2 * 64)
    a, b = x[:, :64].double(), x[:, 64:].double()
    want = (a / (1 + torch.exp(-a)) * b).to(torch.bfloat16)
    got = gkr.silu_and_mul_ref(x)
    assert got.dtype == torch.bfloat16 and got.shape == (3, 64)
    assert gkr.compare(got, want)["ok"]


def test_fused_add_rmsnorm_reference():
    x, res, w = _bf16(4, 256, seed=1), _bf16(4, 256, seed=2), _bf16(256, seed=3)
    r = x.double() + res.double()
    want = r / torch.sqrt(r.pow(2).mean(-1, keepdim=True) + 1e-5) * w.double()
    out, new_res = gkr.fused_add_rmsnorm_ref(x, res, w, 1e-5)
    assert torch.equal(new_res, r.to(torch.bfloat16))
    cmp = gkr.compare(out, want.to(torch.bfloat16))
    assert cmp["ok"] and cmp["max_rel"] <= gkr.RTOL


def test_compare_passes_one_ulp_and_fails_a_real_error():
    ref = _bf16(1000)
    one_ulp = torch.nextafter(ref.float(), torch.full_like(ref.float(), float("inf"))).to(torch.bfloat16)
    one_ulp = torch.where(one_ulp == ref, (ref.float() * (1 + 2**-7)).to(torch.bfloat16), one_ulp)
    assert gkr.compare(one_ulp, ref)["ok"]
    wrong = ref.clone()
    wrong[17] = ref[17] * 1.1 + 0.01
    cmp = gkr.compare(wrong, ref)
    assert not cmp["ok"] and cmp["n_bad"] == 1
    nan = ref.clone()
    nan[3] = float("nan")
    assert not gkr.compare(nan, ref)["ok"]
    assert not gkr.compare(ref[:10], ref)["ok"]


def test_shapes_come_from_the_model_configs():
    shapes = {s["model"]: s for s in gkr.model_shapes()}
    assert (shapes["kimi-k25-text"]["hidden"], shapes["kimi-k25-text"]["intermediate"]) == (7168, [2048, 18432])
    assert (shapes["llama31-8b-instruct"]["hidden"], shapes["llama31-8b-instruct"]["intermediate"]) == (4096, [14336])


def test_without_a_gpu_it_fails_in_one_line(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert gkr.main(["--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu_kernel_run: no CUDA device") and "\n" not in err
    assert not (tmp_path / "r.json").exists()


def test_arch_only_with_compile_only(tmp_path, capsys):
    assert gkr.main(["--out", str(tmp_path / "r.json"), "--arch", "90"]) == 2
    assert gkr.main(["--out", str(tmp_path / "r.json"), "--compile-only", "--arch", "sm90"]) == 2
    assert "--arch is a compute capability" in capsys.readouterr().err


def test_a_missing_library_still_writes_the_json(tmp_path, monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sglang" else real_find_spec(name, *a))
    for name in ("SGLANG_JIT_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_CUDA_ARCH_LIST", "LIBRARY_PATH"):
        monkeypatch.setenv(name, "")
    out = tmp_path / "r.json"
    assert gkr.main(["--out", str(out), "--compile-only", "--arch", "90", "--cache-dir", str(tmp_path / "c")]) == 1
    result = json.loads(out.read_text())
    assert result["ok"] is False and "sglang is not importable" in result["error"]
    assert result["versions"]["torch"] == torch.__version__ and result["arch"] == "90"
    assert "FAILED" in capsys.readouterr().out


def test_nvcc_release_line():
    text = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0")
    assert gkr._release(text) == "Cuda compilation tools, release 13.0, V13.0.88"
