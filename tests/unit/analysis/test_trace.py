"""Trace analysis: kernel names of every all-reduce implementation, forwards, comm/compute/idle, rank skew.

The kernel-name fixtures (tests/fixtures/traces/kernels/, written by
make_kernel_fixtures.py) carry the names each library's source gives its
kernels, cited in the fixture and in ``analysis.kernels.PATTERNS``; each states
what it was built to contain, which the analysis must find from the events.
"""

from __future__ import annotations

import copy
import gzip
import json

import pytest

from specsweep.analysis.kernels import IMPLEMENTATIONS, PATTERNS, classify_kernel, forward_kind
from specsweep.analysis.profiling import comm_share_agreement, trace_variant_evidence
from specsweep.analysis.trace import analyze_traces, trace_rank
from specsweep.testing.workflow import REPO

KERNELS = REPO / "tests/fixtures/traces/kernels"
FIXTURES = sorted(KERNELS.glob("*-TP-0.trace.json"))


def fixture(name: str) -> dict:
    return json.loads((KERNELS / f"{name}-TP-0.trace.json").read_text())


# Kernel names as each library names them (source in the comment), and the implementation they prove.
NAMES = [
    # NVIDIA/nccl src/device/generate.py; nvidia-nccl-cu13 2.30.7 libnccl.so.2
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", "all_reduce"),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", "all_reduce"),
    # NVIDIA/nccl src/device/symmetric/generate.py kernel_cname
    ("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_bf16(ncclSymkDevWorkArgs4K)", "nccl", "all_reduce"),
    # NCCL <= 2.18 (ncclKernel_<coll>_<algo>_<proto>_<op>_<ty>)
    ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclDevComm*, unsigned long, ncclWork*)", "nccl", "all_reduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", "all_gather"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "nccl", "other"),
    # sglang v0.5.23 kernels/jit/csrc/distributed/custom_all_reduce.cuh:140,219,324,353
    ("void sglang::all_reduce_1shot_push_kernel<__nv_bfloat16, 8u, true>(sglang::AllReducePushParams<8u>)",
     "custom_allreduce", "all_reduce"),
    ("void sglang::all_reduce_2shot_pull_kernel<__nv_bfloat16, 4u, false>(sglang::AllReducePullParams<4u>)",
     "custom_allreduce", "all_reduce"),
    # sgl-kernel csrc/allreduce/custom_all_reduce.cuh (sglang-kernel 0.4.10 common_ops.abi3.so)
    ("void sglang::cross_device_reduce_2stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, "
     "sglang::Signal*, __nv_bfloat16*, int, int)", "custom_allreduce", "all_reduce"),
    # microsoft/mscclpp v0.10.0 src/ext/collectives/allreduce/*.cu, src/core/include/execution_kernel.hpp:794
    ("void mscclpp::collective::allreduceRsAgZeroCopy<(mscclpp::ReduceOp)0, __nv_bfloat16>(__nv_bfloat16*)",
     "mscclpp", "all_reduce"),
    ("void mscclpp::collective::allreduceAllPairs<(mscclpp::ReduceOp)0, __nv_bfloat16, float>(__nv_bfloat16*)",
     "mscclpp", "all_reduce"),
    ("void mscclpp::executionKernel<__nv_bfloat16, false>(int, __nv_bfloat16*, __nv_bfloat16*)", "mscclpp",
     "all_reduce"),
    # pytorch v2.14.1 CUDASymmetricMemoryOps.cu (symbols of libtorch_cuda.so 2.14.1+cu130)
    ("void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 4, 2>(c10::BFloat16**, "
     "c10::BFloat16*, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)",
     "torch_symm_mem", "all_reduce"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
     "unsigned int**, unsigned long, unsigned long)", "torch_symm_mem", "all_reduce"),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<float, 8, 4>(float**)", "torch_symm_mem",
     "all_reduce"),
    # flashinfer v0.7.2 trtllm_allreduce_fusion.cuh:1516,1587, trtllm_mnnvl_allreduce.cuh:915,1269
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_twoshot_sync<(flashinfer::"
     "trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, true>(flashinfer::"
     "trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>, std::array<int, 8ul>, std::array<int, 8ul>)",
     "flashinfer_fusion", "all_reduce"),
    ("void flashinfer::trtllm_mnnvl_allreduce::oneshotAllreduceFusionKernel<__nv_bfloat16, 8, true>"
     "(flashinfer::trtllm_mnnvl_allreduce::AllReduceKernelParams<__nv_bfloat16>)", "flashinfer_fusion", "all_reduce"),
    # flashinfer v0.7.2 pcie_ipc_all_reduce.cuh:858,991,1338, pcie_ipc_ce_sm120.cuh:28
    ("void flashinfer::comm::pcie_ipc::ipc_tp2_remote_push_kernel<__nv_bfloat16, true, false>(flashinfer::comm::"
     "pcie_ipc::TP2RemotePushParams<__nv_bfloat16>)", "pcie_ipc_allreduce", "all_reduce"),
    ("void flashinfer::comm::pcie_ipc::ipc_topo_rsag8_push_param_kernel<__nv_bfloat16, true>(flashinfer::comm::"
     "pcie_ipc::Rsag8Params<__nv_bfloat16>)", "pcie_ipc_allreduce", "all_reduce"),
    ("kernel_pcie_ipc_ce_sm120_binary_wait_clear", "pcie_ipc_allreduce", "all_reduce"),
    # deepseek-ai/DeepEP csrc/kernels/*.cu; sgl-deep-ep 0.1.2.post1 symbols (deep_ep::legacy::...)
    ("void deep_ep::internode_ll::dispatch<true, false, 7168>(void*, float*, int*, long*)", "deepep", "dispatch"),
    ("void deep_ep::legacy::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*)", "deepep",
     "combine"),
    ("void deep_ep::legacy::internode_ll::combine_overlappable<false, 8192, 16, 4>(void*)", "deepep", "combine"),
    ("void deep_ep::legacy::intranode::notify_dispatch<8>(int const*, int*, int)", "deepep", "other"),
]

COMPUTE = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>(float)",
    "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*)",
    "Memcpy DtoD (Device -> Device)",
    "Memset (Device)",
]


@pytest.mark.parametrize("name,impl,collective", NAMES)
def test_each_library_kernel_name_is_classified(name, impl, collective):
    pat = classify_kernel(name)
    assert pat is not None, name
    assert (pat.impl, pat.collective) == (impl, collective)
    assert pat.source  # every pattern cites where its names come from


@pytest.mark.parametrize("name", COMPUTE)
def test_compute_kernels_are_not_communication(name):
    assert classify_kernel(name) is None


def test_every_implementation_of_the_issue_has_a_pattern_and_a_fixture():
    have = {p.impl for p in PATTERNS}
    for impl in ("nccl", "custom_allreduce", "mscclpp", "torch_symm_mem", "flashinfer_fusion", "pcie_ipc_allreduce",
                 "deepep"):
        assert impl in have and impl in IMPLEMENTATIONS
    fixtured = {json.loads(p.read_text())["specsweep_fixture"]["impl"] for p in FIXTURES}
    assert have - {"p2p_copy"} <= fixtured | {"gloo", "shm"}


def test_forward_names_of_both_engines():
    assert forward_kind("refengine.verify") == "verify"
    assert forward_kind("refengine.draft_prefill") == "draft_prefill"
    assert forward_kind("refengine.all_reduce.shm") is None
    # sglang 0.5.23 utils/profile_utils.py:462 build_step_span_name
    assert forward_kind("step[VERIFY bs=1]") == "verify"
    assert forward_kind("step[DRAFT bs=1]") == "draft"
    assert forward_kind("step[DRAFT bs=1 toks=17]") == "draft_prefill"
    assert forward_kind("step[EXTEND bs=2 toks=2048]") == "prefill"
    assert forward_kind("step[DECODE bs=4 g_sq=4 g_sqsq=4 g_sqsk=80 g_sk=80 forward_id=9]") == "decode"
    assert forward_kind("step[IDLE bs=0]") == "idle"


def test_rank_from_file_names_of_both_engines():
    assert trace_rank("1796117042-TP-1.trace.json.gz") == 1
    assert trace_rank("1722-TP-3-EP-3.trace.json.gz") == 3  # SGLang adds -DP/-PP/-EP when those are > 1
    assert trace_rank("pre-17.2-TP-0-DP-1-DECODE.trace.json.gz") == 0
    assert trace_rank("x.trace.json", {"distributedInfo": {"rank": 2}}) == 2


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name.split("-TP-")[0])
def test_kernel_fixture_split_counts_and_implementation(path):
    fx = json.loads(path.read_text())["specsweep_fixture"]
    want = fx["expected"]
    a = analyze_traces([path])
    assert a["mode"] == "gpu" and a["attribution"] == ["annotations"] and a["target"] == "verify"
    forwards = a["ranks"]["0"]["forwards"]
    v = forwards["verify"]
    assert v["count"] == want["verify_forwards"]
    assert v["allreduce_min"] == v["allreduce_max"] == want["allreduce_per_verify"]
    assert v["a2a_per_forward"] == want["a2a_per_verify"]
    assert v["span_ms"] * 1e3 == pytest.approx(want["verify_span_us"])
    assert v["comm_ms"] * 1e3 == pytest.approx(want["verify_comm_us"])
    assert v["compute_ms"] * 1e3 == pytest.approx(want["verify_compute_us"])
    assert v["idle_ms"] * 1e3 == pytest.approx(want["verify_idle_us"])
    impl = "nccl" if fx["impl"] == "deepep" else fx["impl"]  # DeepEP replaces the MoE all-reduce only
    assert v["allreduce_impl"] == {impl: want["allreduce_per_verify"] * want["verify_forwards"]}
    assert fx["impl"] in v["comm_impl"]
    assert v["graph_forwards"] == want["verify_forwards"]
    # The eager prefill ran NCCL (as SGLang's prefill does above the custom kernels' size limits).
    assert forwards["prefill"]["allreduce_impl"] == {"nccl": want["prefill_allreduce"]}
    assert forwards["draft"]["allreduce_per_forward"] == want["draft_allreduce"]
    assert a["unmatched_comm_like"] == {}
    assert a["ranks"]["0"]["unattributed_gpu_events"] == 0


def test_requested_variant_missing_from_the_verify_kernels_has_fallen_back():
    """A configuration asking for MSCCL++ whose trace shows only NCCL kernels fell back, whatever the log says."""
    nccl_only = analyze_traces([KERNELS / "nccl-TP-0.trace.json"])
    ev = trace_variant_evidence(nccl_only, ["mscclpp", "nccl_env"])
    assert ev["proven"] == ["nccl_env"]
    assert [f["variant"] for f in ev["fell_back"]] == ["mscclpp"]
    assert "MSCCL++" in ev["fell_back"][0]["line"] and ev["fell_back"][0]["source"] == "trace"
    mscclpp = analyze_traces([KERNELS / "mscclpp-TP-0.trace.json"])
    ev = trace_variant_evidence(mscclpp, ["mscclpp"])
    # Its prefill ran NCCL, which is expected (MSCCL++ only inside CUDA graphs) and proves nothing.
    assert ev["proven"] == ["mscclpp"] and ev["fell_back"] == []


def test_unknown_collective_like_kernel_is_reported_not_hidden(tmp_path):
    trace = fixture("nccl")
    for e in trace["traceEvents"]:
        if e.get("name", "").startswith("ncclDevKernel"):
            e["name"] = "void someLib::fancy_allreduce_kernel<__nv_bfloat16>(void*)"
    path = tmp_path / "x-TP-0.trace.json"
    path.write_text(json.dumps(trace))
    a = analyze_traces([path])
    assert "void someLib::fancy_allreduce_kernel<__nv_bfloat16>(void*)" in a["unmatched_comm_like"]
    assert a["ranks"]["0"]["forwards"]["verify"]["comm_ms"] == 0


def test_forwards_inferred_from_graph_launches_without_annotations(tmp_path):
    trace = fixture("nccl")
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "user_annotation"]
    path = tmp_path / "noann-TP-0.trace.json"
    path.write_text(json.dumps(trace))
    a = analyze_traces([path])
    assert a["attribution"] == ["inferred"]
    want = trace["specsweep_fixture"]["expected"]
    f = a["ranks"]["0"]["forwards"]
    assert f["verify"]["count"] == 2 and f["verify"]["allreduce_per_forward"] == want["allreduce_per_verify"]
    assert f["draft"]["count"] == 1 and f["draft"]["allreduce_per_forward"] == want["draft_allreduce"]
    # The eager prefill has no graph launch: its kernels stay unattributed, and say so.
    assert a["ranks"]["0"]["unattributed_gpu_events"] > 0
    assert any("no forward annotations" in n for n in a["notes"])


def test_rank_skew_is_the_wait_for_the_last_rank(tmp_path):
    """Rank 1 starts every kernel 3 us later: rank 0 waits 3 us per call, rank 1 none."""
    base = fixture("nccl")
    late = copy.deepcopy(base)
    for e in late["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            e["ts"] += 3.0
    for rank, trace in ((0, base), (1, late)):
        (tmp_path / f"run-TP-{rank}.trace.json").write_text(json.dumps(trace))
    a = analyze_traces(sorted(tmp_path.glob("*.json")))
    calls = base["specsweep_fixture"]["expected"]["allreduce_per_verify"]
    skew = a["rank_skew"]["verify"]
    assert skew["per_rank_wait_ms"] == pytest.approx([calls * 3e-3, 0.0])
    assert skew["wait_ms_per_forward"] == pytest.approx(calls * 3e-3 / 2)
    assert skew["max_rank_wait_ms_per_forward"] == pytest.approx(calls * 3e-3)
    assert skew["matched_forwards"] == 2


def test_gzip_and_list_only_traces_load(tmp_path):
    events = fixture("custom_allreduce")["traceEvents"]
    with gzip.open(tmp_path / "l-TP-0.trace.json.gz", "wt") as fh:
        json.dump(events, fh)  # a bare event list is valid Chrome trace JSON too
    a = analyze_traces([tmp_path / "l-TP-0.trace.json.gz"])
    assert a["ranks"]["0"]["forwards"]["verify"]["allreduce_impl"] == {"custom_allreduce": 16}


def test_no_files_is_an_error():
    with pytest.raises(ValueError):
        analyze_traces([])


def test_agreement_needs_engine_timing():
    a = analyze_traces([KERNELS / "nccl-TP-0.trace.json"])
    out = comm_share_agreement(a, [{"status": "ok", "timing": None}])
    assert "absent" in out and out["trace_comm_share"] == pytest.approx(80 / 235)
    span = 235e-6
    rec = {"status": "ok", "timing": {"verify_s": 2 * span, "verify_comm_s": 2 * 80e-6, "forward_ct": 2}}
    out = comm_share_agreement(a, [rec])
    assert out["within_tolerance"] and out["difference"] == pytest.approx(0.0, abs=1e-12)
    assert out["engine_verify_ms"] == pytest.approx(0.235)
    rec["timing"]["verify_comm_s"] = 2 * 200e-6
    assert comm_share_agreement(a, [rec])["within_tolerance"] is False
