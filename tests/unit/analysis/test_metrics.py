"""Every metric on synthetic records with hand-computed answers."""

from __future__ import annotations

import pytest

from specsweep.analysis import formulas as M
from specsweep.analysis.compute import compute_metrics, select_measured
from specsweep.records import new_record, validate_record
from specsweep.warmup import warmup_windows_tok_s

MS = 1_000_000  # ns per ms


def rec(send_ms: float, chunks: list[tuple[float, int | None]], end_ms: float | None, **kw: object) -> dict:
    """A measured ok record; ``chunks`` = (arrival ms, new tokens)."""
    fields = dict(
        run_id="run1", request_id=f"r{send_ms}", phase="measured", repeat=0, index=0, endpoint="generate",
        input_len=8, output_len=10, send_ns=int(send_ms * MS), chunk_ns=[int(t * MS) for t, _ in chunks],
        chunk_tokens=[n for _, n in chunks], end_ns=None if end_ms is None else int(end_ms * MS),
        http_status=200, status="ok",
    )
    fields.update(kw)
    return new_record(**fields)


TIMING_A = {"draft_s": 0.009, "verify_s": 0.060, "verify_comm_s": 0.045, "allreduce_ct": 366, "forward_ct": 3}


@pytest.fixture()
def a() -> dict:
    """Speculative request with multi-token chunks: 1 + 3 + 2 + 4 = 10 tokens in 3 verifies."""
    return rec(0, [(100, 1), (130, 3), (160, 2), (190, 4)], 195,
               completion_tokens=10, spec_verify_ct=3, timing=dict(TIMING_A))


@pytest.fixture()
def b() -> dict:
    """6 tokens, 3 verifies, a final meta-only chunk (0 tokens) that must not count as a token chunk."""
    t = {"draft_s": 0.003, "verify_s": 0.030, "verify_comm_s": 0.015, "allreduce_ct": 366, "forward_ct": 3}
    return rec(1000, [(1050, 1), (1070, 2), (1090, 2), (1110, 1), (1111, 0)], 1112,
               completion_tokens=6, spec_verify_ct=3, timing=t, repeat=1)


@pytest.fixture()
def failed() -> dict:
    return rec(2000, [], 2005, status="error", error="HTTP 500: boom")


@pytest.fixture()
def empty() -> dict:
    """A successful request that produced no token (0 completion tokens)."""
    return rec(3000, [(3010, 0)], 3011, completion_tokens=0, spec_verify_ct=0,
               timing={"draft_s": 0.0, "verify_s": 0.0, "verify_comm_s": 0.0, "allreduce_ct": 0, "forward_ct": 0})


@pytest.fixture()
def warm() -> dict:
    """A warmup record with an absurd accept length: must never enter the metrics."""
    return rec(-500, [(-400, 1), (-390, 99)], -389, phase="warmup", repeat=None, window=0,
               completion_tokens=100, spec_verify_ct=1, timing=dict(TIMING_A))


def test_records_are_schema_complete(a, b, failed, empty, warm):
    for r in (a, b, failed, empty, warm):
        assert validate_record(r) == []


def test_ttft(a, b, empty):
    assert M.ttft_ms(a) == pytest.approx(100.0)
    assert M.ttft_ms(b) == pytest.approx(50.0)
    assert isinstance(M.ttft_ms(empty), M.Absent)


def test_itl_is_per_token_chunk(a, b, empty):
    assert M.itl_ms(a) == pytest.approx([30.0, 30.0, 30.0])
    assert M.itl_ms(b) == pytest.approx([20.0, 20.0, 20.0])  # the 0-token chunk adds no gap
    assert M.itl_ms(empty) == []


def test_decode_and_tpot(a, b, empty):
    assert M.decode_ms(a) == pytest.approx(90.0)
    assert M.tpot_ms(a) == pytest.approx(10.0)  # 90 ms / (10 - 1)
    assert M.tpot_ms(b) == pytest.approx(60.0 / 5)
    assert isinstance(M.tpot_ms(empty), M.Absent)
    assert M.decode_tok_s(a) == pytest.approx(100.0)


def test_e2e_and_output_tok_s(a, empty):
    assert M.e2e_ms(a) == pytest.approx(195.0)
    assert M.output_tok_s(a) == pytest.approx(10 / 0.195)
    assert M.output_tok_s(empty) == 0.0  # a measured zero, not a missing value


def test_missing_completion_tokens_is_absent(a):
    a["completion_tokens"] = None
    for fn in (M.output_tok_s, M.tpot_ms, M.accept_length):
        assert isinstance(fn(a), M.Absent)


def test_accept_length_and_cycle_per_request(a, empty):
    assert M.accept_length(a) == pytest.approx(10 / 3)
    assert M.cycle_time_ms(a) == pytest.approx(30.0)
    assert isinstance(M.accept_length(empty), M.Absent)  # 0 verifies: absent, not 0
    a["spec_verify_ct"] = None
    assert M.accept_length(a) == M.Absent("server reported no spec_verify_ct")


def test_weighted_accept_length_and_cycle(a, b, empty):
    assert M.accept_length_weighted([a, b, empty]) == pytest.approx(16 / 6)
    # (90 + 60) ms / 6 verifies; the empty request had no decode and is left out
    assert M.cycle_time_weighted_ms([a, b, empty]) == pytest.approx(25.0)
    b2 = dict(b, spec_verify_ct=None)
    assert isinstance(M.accept_length_weighted([a, b2]), M.Absent)
    assert isinstance(M.cycle_time_weighted_ms([a, b2]), M.Absent)


def test_engine_timing_per_cycle(a, b):
    assert M.timing_per_cycle_ms([a], "draft_s") == pytest.approx(3.0)
    assert M.timing_per_cycle_ms([a], "verify_s") == pytest.approx(20.0)
    assert M.timing_per_cycle_ms([a], "verify_comm_s") == pytest.approx(15.0)
    assert M.verify_compute_per_cycle_ms([a]) == pytest.approx(5.0)
    assert M.verify_comm_share([a]) == pytest.approx(0.75)
    assert M.allreduce_per_forward([a]) == pytest.approx(122.0)
    # weighted over requests: (9 + 3) ms of draft / 6 verifies
    assert M.timing_per_cycle_ms([a, b], "draft_s") == pytest.approx(2.0)
    assert M.verify_comm_share([a, b]) == pytest.approx(0.060 / 0.090)


def test_target_forward_without_spec_verify_ct(a):
    # Per target forward from the engine's own counts: a run without speculation has no spec_verify_ct.
    a["spec_verify_ct"] = None
    assert M.target_forward_ms([a]) == pytest.approx(60 / a["timing"]["forward_ct"])
    assert M.target_forward_comm_ms([a]) == pytest.approx(45 / a["timing"]["forward_ct"])
    assert isinstance(M.timing_per_cycle_ms([a], "verify_s"), M.Absent)
    a["timing"] = dict(a["timing"], forward_ct=0)
    assert M.target_forward_ms([a]) == M.Absent("sum of timing.forward_ct is 0")


def test_timing_absent_when_not_reported(a):
    a["timing"] = None
    v = M.timing_per_cycle_ms([a], "verify_s")
    assert isinstance(v, M.Absent) and "timing" in v.reason


def test_break_even_matches_domain_example():
    assert M.break_even_accept_length(30.0, 82.0) == pytest.approx(2.46)


def test_aggregate_output_tok_s(a):
    other = rec(50, [(150, 1), (300, 19)], 300, completion_tokens=20)
    assert M.aggregate_output_tok_s([a, other]) == pytest.approx(30 / 0.300)
    assert isinstance(M.aggregate_output_tok_s([]), M.Absent)


def test_select_measured_excludes_warmup_failed_and_other_runs(a, b, failed, empty, warm):
    old = rec(-9000, [(-8900, 1), (-8800, 9)], -8800, completion_tokens=10, spec_verify_ct=1, run_id="old")
    sel = select_measured([old, warm, a, b, failed, empty])
    assert sel["run_id"] == "run1"
    assert sel["ok"] == [a, b, empty]
    assert sel["counts"] == {"records": 6, "warmup_excluded": 1, "other_run_excluded": 1, "measured": 4,
                             "ok": 3, "error": 1, "incomplete": 0}
    assert sel["errors"] == ["HTTP 500: boom"]


def test_compute_metrics_end_to_end(a, b, failed, empty, warm):
    m = compute_metrics([warm, a, b, failed, empty], seed=0)
    assert m["counts"]["ok"] == 3 and m["counts"]["error"] == 1 and m["counts"]["warmup_excluded"] == 1
    assert m["accept_length"]["value"] == pytest.approx(16 / 6)
    assert m["cycle_time_ms"]["value"] == pytest.approx(25.0)
    assert m["ttft_ms"]["n"] == 2 and m["ttft_ms"]["p50"] == pytest.approx(75.0)
    assert m["ttft_ms"]["absent_in"]["requests"] == 1  # the empty request
    assert m["itl_ms"]["n"] == 6 and m["itl_ms"]["p50"] == pytest.approx(25.0)
    assert m["output_tok_s"]["n"] == 3
    assert m["output_tok_s"]["per_repeat_median"] == pytest.approx([(10 / 0.195 + 0) / 2, 6 / 0.112])
    assert "Hyndman" in m["percentile_method"]
    assert m["draft_ms_per_cycle"]["value"] == pytest.approx(2.0)
    assert m["aggregate_output_tok_s"]["per_repeat"][1] == pytest.approx(6 / 0.112)
    assert "absent" in m and "accept_length" not in m["absent"]


def test_compute_metrics_without_speculation_marks_absent_not_zero():
    r = rec(0, [(10, 1), (20, 1)], 21, completion_tokens=2)
    m = compute_metrics([r], seed=0)
    assert "accept_length" not in m and "cycle_time_ms" not in m
    assert "spec_verify_ct" in m["absent"]["accept_length"]


def test_warmup_windows(warm):
    ws = [rec(t, [(t + 10, 1), (t + 20, 9)], t + 20, phase="warmup", repeat=None, window=i // 2,
              completion_tokens=10) for i, t in enumerate([0, 20, 40, 60, 80])]
    # window 0 ends at 40 ms (20 tokens / 40 ms); window 1 ends at 80 ms (20 tokens / 40 ms);
    # the fifth request forms an incomplete window and does not count.
    assert warmup_windows_tok_s(ws, 2) == pytest.approx([500.0, 500.0])
    ws[2]["status"], ws[3]["status"] = "error", "error"
    assert warmup_windows_tok_s(ws, 2) == pytest.approx([500.0, None])


def test_decode_rate_weighted_matches_accept_over_cycle(a, b, empty):
    # (9 + 5) tokens after the first in (90 + 60) ms; the empty request has no decode
    assert M.decode_tok_s_weighted([a, b, empty]) == pytest.approx(14 / 0.150)
    # accept / cycle counts the prefill token too: 16/6 tokens per 25 ms = 106.7 tok/s
    al, cyc = M.accept_length_weighted([a, b, empty]), M.cycle_time_weighted_ms([a, b, empty])
    assert al / (cyc / 1e3) == pytest.approx(16 / 0.150)
    a["completion_tokens"] = None
    assert isinstance(M.decode_tok_s_weighted([a, b]), M.Absent)
