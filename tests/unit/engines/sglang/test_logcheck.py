"""Variant evidence from server logs: SGLang 0.5.23's own lines and NCCL_DEBUG=INFO."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specsweep.engines.sglang.logcheck import NOTES, SIGNATURES, parse_nccl, variant_evidence
from specsweep.testing.workflow import REPO

FIXTURES = REPO / "tests" / "fixtures"
VARIANT_LINES = FIXTURES / "sglang" / "variant_lines.log"


def _fixture_cases() -> list[tuple[str, str, str, str]]:
    """(variant, kind, source, line) from variant_lines.log."""
    cases = []
    header = None
    for line in VARIANT_LINES.read_text().splitlines():
        if line.startswith("# ") and len(line.split()) == 4 and ":" in line.split()[3]:
            header = line.split()[1:]
        elif header and not line.startswith("#"):
            cases.append((header[0], header[1], header[2], line))
            header = None
    return cases


def test_every_signature_has_a_fixture_line():
    cases = {(v, k, s) for v, k, s, _ in _fixture_cases()}
    for sig in SIGNATURES + NOTES:
        assert (sig.variant, sig.kind, sig.source) in cases, sig.source


@pytest.mark.parametrize("variant,kind,source,line", _fixture_cases())
def test_fixture_line_is_recognised(variant, kind, source, line):
    sigs = [s for s in SIGNATURES + NOTES if s.pattern.search(line)]
    assert [(s.variant, s.kind, s.source) for s in sigs] == [(variant, kind, source)]


def _plan(variant, env=None):
    return {"name": "x", "variant": variant, "env": env or {}}


def test_custom_allreduce_falls_back_on_pcie():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    ev = variant_evidence(log, _plan(["custom_allreduce"]))
    assert ev["requested"] == ["custom_allreduce"]
    assert ev["fell_back"][0]["variant"] == "custom_allreduce"
    assert "more than two PCIe-only GPUs" in ev["fell_back"][0]["line"]
    assert "custom_allreduce" not in ev["active"]


def test_not_requested_fallback_is_not_a_fallback():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    ev = variant_evidence(log, _plan([]))
    assert ev["fell_back"] == [] and ev["unproven"] == []


def test_nccl_env_proven_by_nccl_itself():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    env = {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS",
           "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512"}
    ev = variant_evidence(log, _plan("nccl_env", env))
    assert "nccl_env" in ev["active"] and ev["fell_back"] == []
    # A value NCCL did not take (e.g. overridden in the image) is a fallback with NCCL's own line.
    ev = variant_evidence(log, _plan("nccl_env", {**env, "NCCL_PROTO": "Simple"}))
    assert ev["fell_back"] == [{"variant": "nccl_env",
                                "line": "NCCL reports NCCL_PROTO set by environment to LL (plan: Simple)"}]
    # Not mentioned at all (NCCL_DEBUG_SUBSYS without ENV): unproven, not active.
    ev = variant_evidence(log, _plan("nccl_env", {"NCCL_NVLS_ENABLE": "0"}))
    assert ev["unproven"] == ["nccl_env"]


def test_parse_nccl_seed_log():
    nccl = parse_nccl((FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text())
    assert nccl["version"] == "2.27.5" and nccl["build"] == "cuda12.9"
    assert nccl["env"]["NCCL_ALGO"] == "Ring"
    assert nccl["env"]["NCCL_MAX_NCHANNELS"] == "16"  # trailing '.' of integer params dropped
    assert nccl["channels"] == 16 and nccl["coll_channels"] == 16
    assert nccl["transports"] == ["P2P/CUMEM/read", "SHM/direct/direct"]
    assert nccl["collectives"]["AllReduce"] == {"algorithms": ["RING"], "protocols": ["LL"], "calls": 2}
    assert nccl["trees"] is True
    assert nccl["no_algorithm"] == [] and nccl["warnings"] == []
    json.dumps(nccl)  # goes into summary.json


def test_bare_tree_failure_is_recognised():
    log = (FIXTURES / "nccl" / "tree-bare-failure.log").read_text()
    nccl = parse_nccl(log)
    assert nccl["env"] == {"NCCL_ALGO": "Tree"}
    assert nccl["channels"] == 2
    assert len(nccl["no_algorithm"]) == 1 and "AllGather" in nccl["no_algorithm"][0]
    ev = variant_evidence(log, _plan("nccl_env", {"NCCL_ALGO": "Tree"}))
    assert ev["fell_back"][0]["variant"] == "nccl_env"
    assert "no algorithm/protocol available" in ev["fell_back"][0]["line"]


def test_active_and_unproven():
    log = "\n".join([
        "[2026-11-29 12:00:05 TP0] FlashInfer PCIe-IPC all-reduce enabled (world=8, workspace sized on first "
        "reduction)",
        "[2026-11-29 12:00:05 TP0] FlashInfer PCIe-IPC all-reduce serves bf16 only; torch.float32 reductions "
        "stay on NCCL.",
    ])
    ev = variant_evidence(log, _plan(["pcie_ipc_allreduce", "torch_symm_mem"]))
    assert ev["active"] == ["pcie_ipc_allreduce"]
    assert ev["unproven"] == ["torch_symm_mem"]
    assert ev["notes"][0]["variant"] == "pcie_ipc_allreduce"
    assert ev["fell_back"] == []


def test_engine_variant_evidence_delegates():
    from specsweep.engines.sglang.engine import SGLangEngine

    ev = SGLangEngine().variant_evidence("", {"name": "x", "variant": "mscclpp", "env": {}})
    assert ev["unproven"] == ["mscclpp"] and ev["nccl"]["version"] is None


@pytest.mark.slow
def test_format_strings_are_in_the_pinned_wheel():
    """Each signature's literal is at its file:line in the sglang the parser venv pins."""
    from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, ensure_parser_env

    # The same venv as test_sglang_preflight (fails, never skips, if it cannot be built).
    venv = os.environ.get("SPECSWEEP_PARSER_ENV") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specsweep" / "sglang-parser"
    )
    python = ensure_parser_env(Path(venv), DEFAULT_REQUIREMENTS)
    site = subprocess.run(
        [python, "-I", "-c", "import importlib.util, pathlib; "
         "print(pathlib.Path(importlib.util.find_spec('sglang').origin).parent.parent)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    for sig in SIGNATURES + NOTES:
        path, line = sig.source.rsplit(":", 1)
        text = (Path(site) / path).read_text().splitlines()
        assert sig.literal in text[int(line) - 1], f"{sig.source}: {sig.literal!r} not at that line"
