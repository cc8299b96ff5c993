"""Variant evidence from server logs: SGLang 0.5.23's own lines and NCCL_DEBUG=INFO."""

from __future__ import annotations

import json

import pytest

from specsweep.analysis.summary import expected_failure
from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import requested_variants
from specsweep.engines.sglang import rules
from specsweep.engines.sglang.logcheck import (
    ALLREDUCE_PRECEDENCE,
    FAILURES,
    NOTES,
    NVSHMEM_SIGNATURES,
    SIGNATURES,
    failure_signatures,
    parse_nccl,
    prints_at,
    variant_evidence,
)
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO

FIXTURES = REPO / "tests" / "fixtures"
VARIANT_LINES = FIXTURES / "sglang" / "variant_lines.log"
FAILURE_LINES = FIXTURES / "sglang" / "failure_lines.log"
NVSHMEM_FAILURE_LINES = FIXTURES / "nvshmem" / "deepep_failure_lines.log"


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
    """What ``variant_evidence`` reads of a labelled plan: the requested variants and the plan's env."""
    return requested_variants({"variant": variant}), env or {}


def _failure_blocks(path=FAILURE_LINES) -> list[tuple[str, str, str, bool]]:
    """(signature, source, block of log lines, logged after /ready) from failure_lines.log (or ``path``)."""
    blocks: list[tuple[str, str, list[str], bool]] = []
    for line in path.read_text().splitlines():
        words = line.split()
        if (line.startswith("# ") and len(words) in (4, 5) and words[2] == "failure" and ":" in words[3]
                and words[4:] in ([], ["after-ready"])):
            blocks.append((words[1], words[3], [], words[4:] == ["after-ready"]))
        elif line.startswith("#"):
            continue
        elif blocks:
            blocks[-1][2].append(line)
    return [(name, source, "\n".join(lines), ready) for name, source, lines, ready in blocks]


def test_every_failure_signature_has_a_fixture_block():
    cases = {(name, source) for name, source, _, _ in _failure_blocks() + _failure_blocks(NVSHMEM_FAILURE_LINES)}
    for sig in FAILURES + tuple(s for s in NVSHMEM_SIGNATURES if s.kind == "failure"):
        assert (sig.variant, sig.source) in cases, sig.source


@pytest.mark.parametrize("name,source,block,ready", _failure_blocks() + _failure_blocks(NVSHMEM_FAILURE_LINES),
                         ids=lambda v: str(v)[:60])
def test_failure_block_is_classified(name, source, block, ready):
    """Each block names exactly its failure, recognised by the signature at its source (the decode and
    draft runners raise the same text, so one block matches both of theirs), before or after /ready."""
    ev = variant_evidence(block, *_plan([]), ready=ready)
    assert [f["signature"] for f in ev["failures"]] == [name]
    matched = [s for s in failure_signatures(ready) if any(s.pattern.search(x) for x in block.splitlines())]
    assert source in [s.source for s in matched] and {s.variant for s in matched} == {name}


def test_prefill_breakable_capture_failure_is_the_expected_failure_of_bare_tree():
    """Prefill's breakable graph is captured before decode: its failure line alone names a capture failure
    (model_runner_components/cuda_graph_setup.py:421-424, breakable_cuda_graph/context.py:35-49)."""
    block = next(b for n, s, b, _ in _failure_blocks() if s.endswith("breakable_cuda_graph/context.py:48"))
    ev = variant_evidence(block, *_plan("nccl_env", {"NCCL_ALGO": "Tree"}))
    assert [f["signature"] for f in ev["failures"]] == ["cuda_graph_capture_failed"]
    assert ev["failures"][0]["line"] == "Fail when using backend: breakable for prefill runner."


def test_breakable_graph_failure_after_ready_is_a_serving_crash_not_the_capture_failure():
    """context.py:35-49 logs the same line for any exception inside enable_breakable_cuda_graph(), at capture
    and at every prefill replay while serving (prefill_cuda_graph_runner.py:2351): after /ready it is a crash
    while serving, which must not count as bare Tree's expected capture failure."""
    block = next(b for n, s, b, ready in _failure_blocks() if ready)
    after = variant_evidence(block, *_plan("nccl_env", {"NCCL_ALGO": "Tree"}), ready=True)
    assert [f["signature"] for f in after["failures"]] == ["prefill_graph_replay_failed"]
    before = variant_evidence(block, *_plan("nccl_env", {"NCCL_ALGO": "Tree"}), ready=False)
    assert [f["signature"] for f in before["failures"]] == ["cuda_graph_capture_failed"]
    labels = {"expect": "failure", "expect_signature": ["nccl_no_algorithm", "cuda_graph_capture_failed"]}
    assert expected_failure(labels, after)["expected"] is False
    assert expected_failure(labels, before)["expected"] is True
    assert "prefill_graph_replay_failed" in rules.FAILURE_NAMES  # a label may name it


def test_deepep_on_int4_experts_fails_with_its_own_signature():
    """layers/moe/ep_moe/layer.py:297-301: the low-latency forward asserts for experts not FP8/W4AFP8."""
    for source in ("sglang/srt/layers/moe/ep_moe/layer.py:301", "sglang/srt/layers/moe/ep_moe/layer.py:177"):
        block = next(b for n, s, b, _ in _failure_blocks() if s == source)
        ev = variant_evidence(block, *_plan(["deepep"]))
        assert [f["signature"] for f in ev["failures"]] == ["deepep_quantization"], source


def test_deepep_without_rdma_fails_with_nvshmem_s_error_by_name():
    """Where DeepGEMM loads, NVSHMEM comes up before run_moe_core's assert (ep_moe/layer.py:167-177 passes,
    :297-301 never reached): without RDMA the run ends in NVSHMEM's own lines (v3.4.5-0 transport.cpp:282,
    :294, init/init.cu:1119), named deepep_rdma, which the deepep configuration lists as expected."""
    for source in ("src/host/transport/transport.cpp:282", "src/host/init/init.cu:1119"):
        block = next(b for n, s, b, _ in _failure_blocks(NVSHMEM_FAILURE_LINES) if s == source)
        ev = variant_evidence(block, *_plan(["deepep"]))
        assert [f["signature"] for f in ev["failures"]] == ["deepep_rdma"], source
        labels = {"expect": "failure", "expect_signature": ["deepep_quantization", "deepep_rdma"]}
        assert expected_failure(labels, ev)["expected"] is True
    assert "deepep_rdma" in rules.FAILURE_NAMES


def test_custom_allreduce_falls_back_on_pcie():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    ev = variant_evidence(log, *_plan(["custom_allreduce"]))
    assert ev["requested"] == ["custom_allreduce"]
    assert ev["fell_back"][0]["variant"] == "custom_allreduce"
    assert "more than two PCIe-only GPUs" in ev["fell_back"][0]["line"]
    assert "custom_allreduce" not in ev["active"]


def test_not_requested_fallback_is_not_a_fallback():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    ev = variant_evidence(log, *_plan([]))
    assert ev["fell_back"] == [] and ev["unproven"] == []


def test_nccl_env_proven_by_nccl_itself():
    log = (FIXTURES / "nccl" / "eagle3-nccl-seed.log").read_text()
    env = {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS",
           "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512"}
    ev = variant_evidence(log, *_plan("nccl_env", env))
    assert "nccl_env" in ev["active"] and ev["fell_back"] == []
    # A value NCCL did not take (e.g. overridden in the image) is a fallback with NCCL's own line.
    ev = variant_evidence(log, *_plan("nccl_env", {**env, "NCCL_PROTO": "Simple"}))
    assert ev["fell_back"] == [{"variant": "nccl_env",
                                "line": "NCCL reports NCCL_PROTO set by environment to LL (plan: Simple)"}]
    # Not mentioned at all (NCCL_DEBUG_SUBSYS without ENV): unproven, not active.
    ev = variant_evidence(log, *_plan("nccl_env", {"NCCL_NVLS_ENABLE": "0"}))
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
    ev = variant_evidence(log, *_plan("nccl_env", {"NCCL_ALGO": "Tree"}))
    assert ev["fell_back"][0]["variant"] == "nccl_env"
    assert "no algorithm/protocol available" in ev["fell_back"][0]["line"]


def test_active_and_unproven():
    log = "\n".join([
        "[2026-11-29 12:00:05 TP0] FlashInfer PCIe-IPC all-reduce enabled (world=8, workspace sized on first "
        "reduction)",
        "[2026-11-29 12:00:05 TP0] FlashInfer PCIe-IPC all-reduce serves bf16 only; torch.float32 reductions "
        "stay on NCCL.",
    ])
    ev = variant_evidence(log, *_plan(["pcie_ipc_allreduce", "torch_symm_mem"]))
    assert ev["active"] == ["pcie_ipc_allreduce"]
    assert ev["unproven"] == ["torch_symm_mem"]
    assert ev["notes"][0]["variant"] == "pcie_ipc_allreduce"
    assert ev["fell_back"] == []


def test_engine_variant_evidence_delegates():
    from specsweep.engines.sglang.engine import SGLangEngine

    ev = SGLangEngine().variant_evidence("", Plan.from_dict(plan_dict(engine="sglang")), {"variant": "mscclpp"})
    assert ev["unproven"] == ["mscclpp"] and ev["nccl"]["version"] is None


def test_bare_tree_failure_in_nccl_2_30_7_wording():
    """NCCL 2.30.7 says "No algorithm/protocol available" (capital N); SGLang then fails graph capture."""
    log = (FIXTURES / "nccl" / "tree-bare-failure-2.30.7.log").read_text()
    nccl = parse_nccl(log)
    assert nccl["version"] == "2.30.7"
    assert len(nccl["no_algorithm"]) == 1 and "No algorithm/protocol available" in nccl["no_algorithm"][0]
    ev = variant_evidence(log, *_plan("nccl_env", {"NCCL_ALGO": "Tree"}))
    assert ev["fell_back"][0]["variant"] == "nccl_env"
    assert [f["signature"] for f in ev["failures"]] == ["cuda_graph_capture_failed", "nccl_no_algorithm"]


def _fixture_line(source: str) -> str:
    return next(line for v, k, s, line in _fixture_cases() if s == source)


def test_fusion_shadows_pcie_ipc_on_a_log_of_source_strings():
    """fi-fusion-pcie-ipc: both variants log their "on" line, but SGLang gives the all-reduce to FlashInfer."""
    fusion = _fixture_line("sglang/srt/layers/flashinfer_comm_fusion.py:580")
    pcie = _fixture_line("sglang/srt/distributed/device_communicators/pcie_ipc_ar.py:242")
    plan = _plan(["flashinfer_fusion", "pcie_ipc_allreduce"])
    ev = variant_evidence("\n".join([pcie, fusion]), *plan)
    assert ev["active"] == ["flashinfer_fusion"]
    assert [(s["variant"], s["by"]) for s in ev["shadowed"]] == [("pcie_ipc_allreduce", "flashinfer_fusion")]
    assert "parallel_state.py" in ev["shadowed"][0]["why"]
    assert ev["fell_back"] == [] and ev["unproven"] == []
    # Fusion fell back (no multicast): PCIe IPC gets the call and is credited, nothing is shadowed.
    fusion_off = _fixture_line("sglang/srt/layers/flashinfer_comm_fusion.py:368")
    ev = variant_evidence("\n".join([pcie, fusion_off]), *plan)
    assert ev["active"] == ["pcie_ipc_allreduce"] and ev["shadowed"] == []
    assert ev["fell_back"][0]["variant"] == "flashinfer_fusion"
    # PCIe IPC alone is credited.
    ev = variant_evidence(pcie, *_plan(["pcie_ipc_allreduce"]))
    assert ev["active"] == ["pcie_ipc_allreduce"] and ev["shadowed"] == []


def test_custom_allreduce_v2_is_proven_by_its_config_line():
    """CustomAllReduceV2 (the default, environ.py:1532) logs its config at INFO on rank 0 once it is up
    (distributed/device_communicators/custom_all_reduce_v2.py:340-348): a working custom-ar is active."""
    line = _fixture_line("sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py:342")
    ev = variant_evidence(line, *_plan(["custom_allreduce"]))
    assert ev["active"] == ["custom_allreduce"] and ev["unproven"] == [] and ev["fell_back"] == []


def test_custom_allreduce_shadows_pcie_ipc():
    """_resolve_outplace_all_reduce_method returns "ca" before "pcie_ipc" (parallel_state.py:959-975):
    on a host where custom all-reduce comes up, PCIe IPC logs "enabled" but gets no all-reduce."""
    ca = _fixture_line("sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py:342")
    pcie = _fixture_line("sglang/srt/distributed/device_communicators/pcie_ipc_ar.py:242")
    ev = variant_evidence("\n".join([pcie, ca]), *_plan(["pcie_ipc_allreduce"]))
    assert ev["active"] == ["custom_allreduce"]
    assert [(s["variant"], s["by"]) for s in ev["shadowed"]] == [("pcie_ipc_allreduce", "custom_allreduce")]
    assert "parallel_state.py:959-989" in ev["shadowed"][0]["why"]


def test_mscclpp_shadows_pcie_ipc():
    mscclpp = _fixture_line("sglang/srt/distributed/device_communicators/pymscclpp.py:1123")
    pcie = _fixture_line("sglang/srt/distributed/device_communicators/pcie_ipc_ar.py:242")
    ev = variant_evidence("\n".join([mscclpp, pcie]), *_plan(["mscclpp", "pcie_ipc_allreduce"]))
    assert ev["active"] == ["mscclpp"] and ev["shadowed"][0]["by"] == "mscclpp"


def test_deepep_proven_by_nvshmem_bringing_up_ibgda():
    ok = "gpu-host:77:77 [0] NVSHMEM INFO Successfully initialized the transport: IBGDA. It will be used for " \
         "device-side APIs over IB."
    ev = variant_evidence(ok, *_plan(["deepep"]))
    assert ev["active"] == ["deepep"] and ev["unproven"] == []
    failed = "/nvshmem/src/host/transport/transport.cpp:nvshmemi_transport_init:282: init failed for transport: IBGDA"
    ev = variant_evidence(failed, *_plan(["deepep"]))
    assert ev["fell_back"][0]["variant"] == "deepep" and ev["active"] == []
    assert variant_evidence("", *_plan(["deepep"]))["unproven"] == ["deepep"]


def test_evidence_that_cannot_reach_the_log_is_said_before_launch():
    from specsweep.engines.sglang.logcheck import evidence_warnings

    def plan(**keys) -> Plan:
        return Plan.from_dict(plan_dict(engine="sglang", **keys))

    quiet = plan(server_args={"log-level": "warning"})
    assert any("variant mscclpp's evidence prints at info, below --log-level warning" in w
               for w in evidence_warnings(quiet, {"variant": ["mscclpp"]}))
    assert evidence_warnings(plan(), {"variant": ["mscclpp"]}) == []
    assert any("NVSHMEM_DEBUG" in w for w in evidence_warnings(plan(), {"variant": "deepep"}))
    assert evidence_warnings(plan(env={"NVSHMEM_DEBUG": "INFO"}), {"variant": "deepep"}) == []
    assert any("NCCL_DEBUG" in w for w in evidence_warnings(plan(), {"variant": "nccl_env"}))
    assert evidence_warnings(plan(env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}),
                             {"variant": "nccl_env"}) == []
    assert evidence_warnings(quiet, {}) == []  # no variant asked for: nothing to prove


def test_precedence_names_known_variants():
    assert set(ALLREDUCE_PRECEDENCE) <= rules.KNOWN_VARIANTS


def test_prints_at():
    assert prints_at("warning") and prints_at("info") and prints_at("raise")
    assert not prints_at("debug")
    assert prints_at("debug", "debug")


# --- against the pinned wheel and NCCL (slow, run in CI; fail, never skip) ------------------------

# logger method -> level (SGLang's logger also has *_once variants)
