"""Output agreement with the baseline, acceptance per draft position, served prompt lengths."""

from __future__ import annotations

import pytest

from specsweep.analysis.formulas import (
    NOT_COMPARABLE,
    Absent,
    accept_histogram,
    accept_rate_by_position,
    output_common_prefix_tokens,
    output_match_share,
    prompt_length_mismatches,
)
from specsweep.analysis.summary import BaselineRun, build_summary
from specsweep.records import new_record
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import MS, OK

WORKLOAD = {
    "endpoint": "chat", "num_prompts": 4, "input_len": 64, "output_len": 6, "concurrency": 1,
    "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 10,
    "warmup": {"window": 2, "tolerance": 0.1, "min_windows": 2, "max_requests": 0},
}


def rec(i: int, output: list[int] | None, *, run: str = "r", key: str | None = None, hist: list[int] | None = None,
        input_len: int | None = 40, prompt_tokens: int | None = 40, verify: int | None = 3) -> dict:
    t0 = i * 100 * MS
    return new_record(
        run_id=run, request_id=f"{run}-{i}", phase="measured", repeat=0, index=i, endpoint="chat",
        prompt_key=key or f"k{i}", input_len=input_len, output_len=6, send_ns=t0,
        chunk_ns=[t0 + 10 * MS, t0 + 20 * MS, t0 + 30 * MS], chunk_tokens=[1, 2, 3], end_ns=t0 + 30 * MS,
        http_status=200, prompt_tokens=prompt_tokens, completion_tokens=6, spec_verify_ct=verify,
        spec_correct_drafts_histogram=hist, output_ids=output, status="ok")


def plan(name: str, spec: bool = True, env: dict | None = None, temperature: float = 0.0) -> dict:
    args = {"speculative-algorithm": "EAGLE3"} if spec else {}
    return {"name": name, "engine": "reference", "image": None, "server_args": args, "env": env or {},
            "workload": {**WORKLOAD, "temperature": temperature}, "facts": engine_facts("reference", args, env)}


OUT = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12], [2, 2, 2, 2, 2, 2], [3, 1, 4, 1, 5, 9]]
BASE = [rec(i, OUT[i], run="b", verify=None) for i in range(4)]


def summary(records: list[dict], **kw) -> dict:
    baseline = kw.pop("baseline", BaselineRun("nospec", plan("nospec", spec=False), BASE))
    return build_summary(kw.pop("plan", plan("eagle3")), kw.pop("launch", None), OK, [], records, None,
                         baseline, kw.pop("threshold", 0.9))


def test_acceptance_histogram_sums_bins_of_unequal_length_and_gives_rates_by_position():
    recs = [rec(0, None, hist=[2, 1]), rec(1, None, hist=[0, 0, 0, 3])]  # an SGLang histogram grows lazily
    assert accept_histogram(recs) == [2.0, 1.0, 0.0, 3.0]
    assert accept_rate_by_position(recs) == [4 / 6, 3 / 6, 3 / 6]
    assert accept_histogram([rec(0, None)]) == Absent("engine reported no spec_correct_drafts_histogram")
    partial = accept_histogram([rec(0, None, hist=[1]), rec(1, None)])
    assert isinstance(partial, Absent) and "1 of 2" in partial.reason


def test_match_share_and_common_prefix_over_paired_requests():
    mine = [rec(0, OUT[0]), rec(1, [7, 8, 0, 0, 0, 0]), rec(2, OUT[2]), rec(3, [9] * 6, key="not-in-baseline")]
    share = output_match_share(mine, BASE)
    assert share == {"value": 2 / 3, "paired": 3, "unpaired": 1, "matching": 2}
    prefix = output_common_prefix_tokens(mine, BASE)
    assert prefix["value"] == pytest.approx((6 + 2 + 6) / 3) and prefix["mean_baseline_tokens"] == 6


def test_pairing_that_does_not_hold_is_absent_with_the_reason():
    other = [rec(i, OUT[i], key=f"other{i}") for i in range(4)]
    assert "no measured prompt in common" in output_match_share(other, BASE).reason
    assert "carry no output_ids" in output_match_share([rec(0, None)], BASE).reason
    assert "baseline's measured requests carry no output_ids" in output_match_share(
        [rec(0, OUT[0])], [rec(0, None, run="b")]).reason


def test_equal_outputs_are_ok_and_carry_the_agreement():
    s = summary([rec(i, OUT[i], hist=[3, 0]) for i in range(4)])
    assert s["status"] == "ok", s["detail"]
    assert s["agreement"]["match_share"] == 1.0 and s["agreement"]["flagged"] is False
    assert s["metrics"]["output_match_share"]["definition"]
    assert s["metrics"]["output_common_prefix_tokens"]["value"] == 6
    assert s["metrics"]["accept_histogram"]["value"] == [12.0, 0.0]


def test_outputs_that_differ_fail_the_configuration_whatever_its_speed():
    s = summary([rec(0, OUT[0])] + [rec(i, [0] * 6) for i in range(1, 4)])
    assert s["status"] == "failed" and s["stage"] == "summarize" and s["reason"] == "outputs_differ"
    assert s["agreement"]["flagged"] is True
    assert "outputs differ from the baseline (nospec): 1 of 4 paired prompts match (25%, threshold 90%)" in s["detail"]
    # At a lower threshold the same outputs pass.
    assert summary([rec(0, OUT[0])] + [rec(i, [0] * 6) for i in range(1, 4)], threshold=0.2)["status"] == "ok"


@pytest.mark.parametrize("kw, fragment", [
    ({"plan": plan("eagle3", env={"SGLANG_SIMULATE_ACC_LEN": "2.5"})},
     "acceptance is simulated (SGLANG_SIMULATE_ACC_LEN=2.5 in this configuration)"),
    ({"launch": {"provenance": {"env": {"SGLANG_SIMULATE_ACC_LEN": "3"}}}},
     "SGLANG_SIMULATE_ACC_LEN=3 in this configuration's server"),
    ({"plan": plan("eagle3", temperature=0.7)}, "samples at temperature 0.7"),
])
def test_not_comparable_says_so_instead_of_a_number(kw, fragment):
    s = summary([rec(i, [0] * 6) for i in range(4)], **kw)  # outputs differ, but that means nothing here
    assert s["status"] == "ok"
    assert s["agreement"]["match_share"] is None and s["agreement"]["flagged"] is None
    assert s["agreement"]["reason"].startswith(NOT_COMPARABLE) and fragment in s["agreement"]["reason"]
    assert "output_match_share" not in s["metrics"]


def test_simulated_acceptance_off_is_comparable():
    s = summary([rec(i, OUT[i]) for i in range(4)], plan=plan("eagle3", env={"SGLANG_SIMULATE_ACC_LEN": "-1"}))
    assert s["agreement"]["match_share"] == 1.0


def test_the_baseline_and_a_missing_baseline():
    assert summary(BASE, plan=plan("nospec", spec=False))["agreement"]["reason"] == "this configuration is the baseline"
    s = build_summary(plan("eagle3"), None, OK, [], [rec(0, OUT[0])], None)
    assert s["agreement"]["reason"] == "no baseline named in config.yaml" and s["status"] == "ok"


def test_a_served_prompt_length_beyond_tolerance_is_a_warning():
    """Intended 40 tokens, served 47 (beyond max(2, 2%)): warned; 41 (a BOS) is within tolerance."""
    served = [rec(0, OUT[0], prompt_tokens=47), rec(1, OUT[1], prompt_tokens=41), rec(2, OUT[2]),
              rec(3, OUT[3], input_len=None, prompt_tokens=400)]
    assert prompt_length_mismatches(served) == [(40, 47)]
    warnings = summary(served)["warnings"]
    assert any(w.startswith("prompt length: 1 of 4 requests") and "intended 40, served 47" in w for w in warnings)
    assert not any(w.startswith("prompt length") for w in summary([rec(i, OUT[i]) for i in range(4)])["warnings"])
