"""The cost model and the communication budget on synthetic parts with known answers."""

import pytest

from specsweep.analysis.costmodel import (
    StepParts,
    accept_needed,
    latency_budget_us,
    missed_part,
    own_crossover,
    predicted_ms,
    predicted_tok_s,
    residual,
)

# A cycle: draft 3 ms + verify compute 7 ms, 20 all-reduces of 100 us, accept length 2.4.
SPEC = StepParts(fixed_ms=10.0, allreduces=20, latency_us=100.0, tokens=2.4)


def test_predicted_cycle_and_rate():
    assert SPEC.comm_ms == pytest.approx(2.0)
    assert predicted_ms(SPEC) == pytest.approx(12.0)
    assert predicted_tok_s(SPEC) == pytest.approx(2.4 / 12.0 * 1e3)  # 200 tok/s
    assert predicted_ms(SPEC, latency_us=500.0) == pytest.approx(20.0)


def test_budget_is_the_latency_where_the_rate_meets_the_baseline():
    # Against 100 tok/s: 2.4 tokens must take <= 24 ms, 14 ms of it left for 20 all-reduces: 700 us each.
    budget = latency_budget_us(SPEC, 100.0)
    assert budget == pytest.approx(700.0)
    assert predicted_tok_s(SPEC, budget) == pytest.approx(100.0)
    assert predicted_tok_s(SPEC, budget * 0.99) > 100.0 > predicted_tok_s(SPEC, budget * 1.01)


def test_accept_needed_is_the_models_break_even():
    assert accept_needed(SPEC, 100.0) == pytest.approx(1.2)  # 100 tok/s x 12 ms
    assert accept_needed(SPEC, 100.0, latency_us=700.0) == pytest.approx(2.4)  # at the budget: the measured accept


def test_no_communication_has_no_budget():
    tp1 = StepParts(fixed_ms=8.0, allreduces=0, latency_us=None, tokens=2.0)
    assert tp1.comm_ms == 0 and predicted_ms(tp1) == 8.0
    assert latency_budget_us(tp1, 100.0) is None
    assert accept_needed(tp1, 100.0) == pytest.approx(0.8)


def test_negative_budget_when_compute_alone_is_too_slow():
    slow = StepParts(fixed_ms=30.0, allreduces=20, latency_us=10.0, tokens=2.4)
    assert latency_budget_us(slow, 100.0) == pytest.approx((24.0 - 30.0) / 20 * 1e3)  # -300 us: none


def test_a_step_with_all_reduces_needs_their_latency():
    with pytest.raises(ValueError):
        StepParts(fixed_ms=1.0, allreduces=2, latency_us=None)


def test_own_crossover_above_and_always():
    # Plain decode step: 3 ms compute + 20 all-reduces. c = 2.4 x 3 - 10 = -2.8 ms, k = (48 - 20) / 1e3 per us:
    # speculation matches its own baseline at L = 100 us and pays above it (the link's cost is amortised).
    plain = StepParts(fixed_ms=3.0, allreduces=20, latency_us=100.0, tokens=1.0)
    cross = own_crossover(SPEC, plain)
    assert cross["pays"] == "above" and cross["latency_us"] == pytest.approx(100.0)
    assert predicted_tok_s(SPEC, 100.0) == pytest.approx(predicted_tok_s(plain, 100.0))
    assert predicted_tok_s(SPEC, 200.0) > predicted_tok_s(plain, 200.0)
    assert own_crossover(SPEC, StepParts(5.0, 20, 100.0))["pays"] == "always"  # c = +2 ms, k > 0


def test_own_crossover_below_and_never():
    # A cycle that all-reduces more than accept x the plain step (k < 0): pays only on a fast enough link.
    heavy = StepParts(fixed_ms=4.0, allreduces=60, latency_us=10.0, tokens=2.0)
    plain = StepParts(fixed_ms=3.0, allreduces=20, latency_us=10.0)
    cross = own_crossover(heavy, plain)  # c = 2 ms, k = -20 / 1e3: L* = 100 us
    assert cross == {"pays": "below", "latency_us": pytest.approx(100.0)}
    assert own_crossover(StepParts(7.0, 60, 10.0, 2.0), plain)["pays"] == "never"  # c = -1 ms, k < 0


def test_residual_splits_into_its_two_parts():
    # Measured 13 ms; predicted 12 (10 fixed + 2 modelled comm); the engine saw draft+verify 12.5 with 2.5 comm.
    res = residual(13.0, 12.0, 12.5, 2.5, 2.0)
    assert res["residual_ms"] == pytest.approx(1.0) and res["residual_share"] == pytest.approx(1 / 13)
    assert res["outside_ms"] == pytest.approx(0.5) and res["comm_missed_ms"] == pytest.approx(0.5)
    assert res["outside_ms"] + res["comm_missed_ms"] == pytest.approx(res["residual_ms"])
    assert missed_part(res) is None  # 7.7 % is within the model
    big = residual(16.0, 12.0, 15.5, 5.5, 2.0)  # 3.5 ms of comm missed, 0.5 ms outside
    assert big["residual_ms"] == pytest.approx(4.0) and missed_part(big) == "comm_missed_ms"
