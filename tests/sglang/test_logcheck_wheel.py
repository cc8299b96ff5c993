"""Every log signature the SGLang check relies on is printed by the pinned wheels, at a level that prints:
SGLang 0.5.23's own sources, NCCL 2.30.7's and NVSHMEM 3.4.5's libraries, read in the preflight venv
(fails, never skips, when it cannot be built). The signatures' behaviour on log text is unit-tested in
tests/unit/engines/sglang/test_logcheck.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specsweep.engines.sglang.logcheck import (
    FAILURES,
    NCCL_SIGNATURES,
    NOTES,
    NVSHMEM_SIGNATURES,
    SIGNATURES,
    prints_at,
)
from specsweep.testing.parser_env import parser_python as build_parser_python
from specsweep.testing.parser_env import wheel_site as site_of
from specsweep.testing.workflow import REPO

FIXTURES = REPO / "tests" / "fixtures"


_LOG_CALLS = {"debug": "debug", "info": "info", "info_once": "info", "warning": "warning", "warn": "warning",
              "warning_once": "warning", "error": "error", "exception": "exception", "critical": "critical"}


def _printing_call_level(tree: ast.AST, source: str, literal: str, line: int) -> str | None:
    """The level of the innermost logger call or ``raise`` whose source holds ``literal`` on ``line``."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert)):  # an AssertionError is raised like any exception
            level = "raise"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _LOG_CALLS):
            level = _LOG_CALLS[node.func.attr]
        else:
            continue
        if not (node.lineno <= line <= node.end_lineno):
            continue
        if literal not in (ast.get_source_segment(source, node) or ""):
            continue
        if best is None or node.lineno >= best[0]:
            best = (node.lineno, level)
    return best[1] if best else None


@pytest.fixture(scope="module")
def wheel_site() -> Path:
    return site_of(build_parser_python())  # fails (never skips) when the venv cannot be built


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNATURES + NOTES + FAILURES, ids=lambda s: f"{s.variant}-{s.source}")
def test_signature_is_in_the_pinned_wheel_at_a_printing_level(wheel_site, sig):
    """Each signature's literal is at its file:line in sglang 0.5.23, inside a call that prints at INFO."""
    path, line = sig.source.rsplit(":", 1)
    source = (wheel_site / path).read_text()
    assert sig.literal in source.splitlines()[int(line) - 1], f"{sig.source}: {sig.literal!r} not at that line"
    level = _printing_call_level(ast.parse(source), source, sig.literal, int(line))
    assert level == sig.level, f"{sig.source}: printed by a {level!r} call, the signature says {sig.level!r}"
    assert prints_at(level, "info"), f"{sig.source}: a {level} line never reaches the server's INFO log"
    if sig.template is not None:
        where, fragment = sig.template
        t_path, t_line = where.rsplit(":", 1)
        t_source = (wheel_site / t_path).read_text().splitlines()
        assert fragment in t_source[int(t_line) - 1], f"{where}: {fragment!r} not at that line"


@pytest.mark.slow
def test_prefill_failure_is_formatted_with_the_breakable_backend(wheel_site):
    """context.py:35-49 formats PREFILL_CUDA_GRAPH_CAPTURE_FAILED_MSG with Backend.BREAKABLE = "breakable",
    the default prefill backend on CUDA (cuda_graph_config.py:119-123), so the logged text is the
    fixture's "Fail when using backend: breakable for prefill runner."."""
    root = wheel_site / "sglang" / "srt" / "model_executor"
    context = (root / "runner_backend_utils" / "breakable_cuda_graph" / "context.py").read_text().splitlines()
    assert "backend=Backend.BREAKABLE" in context[45]  # line 46
    config = (root / "cuda_graph_config.py").read_text().splitlines()
    assert config[45].strip() == 'BREAKABLE = "breakable"'  # line 46
    assert "return Backend.BREAKABLE if is_cuda() else Backend.DISABLED" in config[122]  # line 123


@pytest.mark.slow
def test_deepep_moe_layer_runs_only_fp8_and_w4afp8_experts(wheel_site):
    """The cited lines of layers/moe/ep_moe/layer.py that make compressed-tensors experts fail with DeepEP."""
    layer = (wheel_site / "sglang/srt/layers/moe/ep_moe/layer.py").read_text().splitlines()
    assert "isinstance(quant_config, Fp8Config)" in layer[153]  # line 154
    assert "isinstance(quant_config, W4AFp8Config)" in layer[158]  # line 159
    assert "return DeepEPMoE" in "\n".join(layer[351:364])  # get_moe_impl_class, 352-364
    assert "is_deepep()" in "\n".join(layer[351:364])
    wna16 = (wheel_site / "sglang/srt/layers/quantization/compressed_tensors/schemes/"
             "compressed_tensors_wNa16_moe.py").read_text().splitlines()
    assert "dispatch_output: StandardDispatchOutput" in wna16[446]  # line 447
    assert "topk_output = dispatch_output.topk_output" in wna16[458]  # line 459


@pytest.mark.slow
def test_custom_allreduce_v2_is_the_default(wheel_site):
    environ = (wheel_site / "sglang/srt/environ.py").read_text().splitlines()
    assert environ[1531].strip() == "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2 = EnvBool(True)"  # line 1532


@pytest.mark.slow
def test_debug_only_line_is_not_a_signature(wheel_site):
    """PCIe IPC's 'unsupported world size' line is logger.debug: never evidence at --log-level info."""
    path = "sglang/srt/distributed/device_communicators/pcie_ipc_ar.py"
    source = (wheel_site / path).read_text()
    literal = "FlashInfer PCIe-IPC all-reduce skipped: unsupported world size"
    line = next(i for i, text in enumerate(source.splitlines(), 1) if literal in text)
    assert _printing_call_level(ast.parse(source), source, literal, line) == "debug"
    assert not any(literal in s.literal for s in SIGNATURES + NOTES)


def _c_literal(literal: str) -> bytes:
    """The first C string literal of ``literal``, as the bytes the compiler puts in the library."""
    text = literal.split('"')[1]
    return text.encode().decode("unicode_escape").encode()


@pytest.mark.slow
@pytest.mark.parametrize("sig", NCCL_SIGNATURES, ids=lambda s: f"{s.variant}-{s.source}")
def test_nccl_signature_is_in_nccl_2_30_7(wheel_site, sig):
    """At its cited line of NCCL v2.30.7-1 (the cited fixture), and in the pinned libnccl.so.2 itself."""
    cited = {}
    for row in (FIXTURES / "nccl" / "source-v2.30.7.txt").read_text().splitlines():
        if not row.startswith("#"):
            where, _, text = row.partition("\t")
            cited[where] = text
    assert sig.literal in cited[sig.source], sig.source
    assert prints_at(sig.level, "info")
    lib = next((wheel_site / "nvidia" / "nccl" / "lib").glob("libnccl.so*"))
    assert _c_literal(sig.literal) in lib.read_bytes(), f"{sig.literal!r} not in {lib}"
    meta = next(wheel_site.glob("nvidia_nccl_cu13-*.dist-info"))
    assert meta.name.startswith("nvidia_nccl_cu13-2.30.7"), meta.name


@pytest.mark.slow
@pytest.mark.parametrize("sig", NVSHMEM_SIGNATURES, ids=lambda s: f"{s.variant}-{s.kind}")
def test_nvshmem_signature_is_in_nvshmem_3_4_5(wheel_site, sig):
    """DeepEP's evidence: at its cited line of NVSHMEM v3.4.5-0, and in the pinned libnvshmem_host.so.3."""
    cited = {}
    for row in (FIXTURES / "nvshmem" / "source-v3.4.5.txt").read_text().splitlines():
        if not row.startswith("#"):
            where, _, text = row.partition("\t")
            cited[where] = text
    assert sig.literal in cited[sig.source], sig.source
    lib = next((wheel_site / "nvidia" / "nvshmem" / "lib").glob("libnvshmem_host.so*"))
    assert _c_literal(sig.literal) in lib.read_bytes()
    assert next(wheel_site.glob("nvidia_nvshmem_cu13-*.dist-info")).name.startswith("nvidia_nvshmem_cu13-3.4.5")
