"""Percentile method, bootstrap intervals, verdicts and the warmup criterion."""

from __future__ import annotations

import numpy as np
import pytest

from specsweep.analysis import stats as S


def test_percentiles_are_type_7():
    # Hyndman-Fan type 7: h = (n - 1) p; [1, 2, 3, 4] -> p50 = 2.5, p90 = 3.7, p99 = 3.97
    assert S.percentiles([4, 1, 3, 2]) == pytest.approx({"p50": 2.5, "p90": 3.7, "p99": 3.97})
    assert "type 7" in S.PERCENTILE_METHOD_NAME


def test_distribution_fields():
    d = S.distribution([1.0, 2.0, 3.0], "ms")
    assert d["n"] == 3 and d["unit"] == "ms" and d["mean"] == 2.0 and d["min"] == 1.0 and d["max"] == 3.0
    with pytest.raises(ValueError):
        S.distribution([], "ms")


def test_bootstrap_ci_is_seeded_and_brackets_the_median():
    rng = np.random.default_rng(1)
    x = rng.normal(100, 5, 40)
    ci = S.bootstrap_median_ci(x, seed=7, n_resamples=2000)
    assert ci == S.bootstrap_median_ci(x, seed=7, n_resamples=2000)
    assert ci["low"] <= np.median(x) <= ci["high"]
    assert ci["n_resamples"] == 2000 and ci["level"] == 0.95 and "bootstrap" in ci["method"]
    const = S.bootstrap_median_ci([3.0] * 10, seed=0, n_resamples=100)
    assert const["low"] == const["high"] == 3.0


def test_per_repeat_medians():
    assert S.per_repeat_medians([1, 3, 10, 20, 30], [0, 0, 1, 1, 1]) == [2.0, 20.0]


def _samples(center: float, n: int = 30, seed: int = 0) -> list[float]:
    return list(np.random.default_rng(seed).normal(center, 1.0, n))


def test_verdict_faster_and_slower():
    base, fast = _samples(100, seed=1), _samples(120, seed=2)
    v = S.compare_to_baseline(fast, base, [119.8, 120.1, 120.3], [99.9, 100.2, 100.0], seed=0, n_resamples=2000)
    assert v["verdict"] == "faster" and v["ratio"] == pytest.approx(1.2, abs=0.02)
    assert v["ratio_ci"][0] > 1
    v = S.compare_to_baseline(base, fast, [99.9, 100.2, 100.0], [119.8, 120.1, 120.3], seed=0, n_resamples=2000)
    assert v["verdict"] == "slower"


def test_verdict_no_difference_for_same_distribution():
    v = S.compare_to_baseline(_samples(100, seed=3), _samples(100, seed=4), [100, 100.5, 99.7],
                              [99.8, 100.1, 100.3], seed=0, n_resamples=2000)
    assert v["verdict"] == "no significant difference"


def test_verdict_refuses_differences_below_repeat_noise():
    # 2% apart with tight per-request spread (CI excludes 1), but repeats vary by 10%.
    a, b = _samples(102, n=200, seed=5), _samples(100, n=200, seed=6)
    v = S.compare_to_baseline(a, b, [97, 102, 107], [95, 100, 105], seed=0, n_resamples=2000)
    assert v["ratio_ci"][0] > 1
    assert v["noise"] == pytest.approx(max(107 / 97, 105 / 95) - 1, abs=1e-9)
    assert v["verdict"] == "no significant difference"


def test_a_large_slowdown_is_called_even_with_noisy_repeats():
    # 8x slower, repeats of the slow side disagree by 2x: the slowdown is far beyond that noise.
    # (A noise floor on |ratio - 1| could never call this: |0.125 - 1| < 1 <= noise.)
    slow, base = _samples(20, n=60, seed=7), _samples(160, n=60, seed=8)
    v = S.compare_to_baseline(slow, base, [14, 20, 28], [155, 160, 165], seed=0, n_resamples=2000)
    assert v["noise"] == pytest.approx(1.0)
    assert v["verdict"] == "slower"
    fast = S.compare_to_baseline(base, slow, [155, 160, 165], [14, 20, 28], seed=0, n_resamples=2000)
    assert fast["verdict"] == "faster"


def test_verdict_insufficient_samples():
    v = S.compare_to_baseline([1.0] * (S.MIN_SAMPLES - 1), _samples(100), [1.0], [100.0], seed=0)
    assert v["verdict"] == "insufficient samples"
    assert "method" in v and v["min_samples"] == S.MIN_SAMPLES


def test_windows_converged():
    assert S.windows_converged([50, 100, 105], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100, 120], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100, None, 100], tolerance=0.10, min_windows=2)
    assert S.windows_converged([100, 101, 100], tolerance=0.02, min_windows=3)


# ----------------------------------------------------------------- launches


def _launches(rng, medians, n=20, sd=0.01):
    """Per-request tok/s of several launches (relative sd), their labels and per-repeat medians."""
    values, labels, reps = [], [], []
    for k, m in enumerate(medians):
        for r in range(2):
            vals = list(rng.normal(m, sd * m, n // 2))
            values += vals
            labels += [str(k)] * len(vals)
            reps.append(float(np.median(vals)))
    return values, labels, reps


def test_hierarchical_bootstrap_spreads_over_launches():
    rng = np.random.default_rng(0)
    values, labels, _ = _launches(rng, [90.0, 110.0, 95.0, 105.0])
    flat = S.hierarchical_bootstrap_medians(values, [None] * len(values), np.random.default_rng(1), 4000)
    nested = S.hierarchical_bootstrap_medians(values, labels, np.random.default_rng(1), 4000)
    assert np.percentile(nested, 97.5) - np.percentile(nested, 2.5) > 2 * (
        np.percentile(flat, 97.5) - np.percentile(flat, 2.5))
    assert 90 <= np.percentile(nested, 1) and np.percentile(nested, 99) <= 110  # never outside the launches


def test_launch_spread_enters_the_noise_floor():
    rng = np.random.default_rng(2)
    a, la, ra = _launches(rng, [100.0, 100.0])
    b, lb, rb = _launches(rng, [90.0, 110.0])  # two launches of one configuration, 22 % apart
    v = S.compare_to_baseline(a, b, ra, rb, seed=0, launches=la, baseline_launches=lb)
    assert v["noise_sources"]["launches"] == pytest.approx(110 / 90 - 1, rel=0.05)
    assert v["noise"] >= v["noise_sources"]["launches"] and v["launches"] == [2, 2]
    assert v["launch_effect"].startswith("measured")


def test_the_aa_floor_keeps_a_smaller_difference_from_being_called():
    rng = np.random.default_rng(3)
    a, _, ra = _launches(rng, [100.0])
    b, _, rb = _launches(rng, [112.0])  # 12 % apart, far beyond the repeat noise
    called = S.compare_to_baseline(a, b, ra, rb, seed=0)
    assert called["verdict"] == "slower"
    held = S.compare_to_baseline(a, b, ra, rb, seed=0, aa_noise=0.20)  # the same configuration twice: 20 % apart
    assert held["verdict"] == "no significant difference"
    assert held["noise"] == pytest.approx(0.20) and held["noise_sources"]["aa_control"] == 0.20
    assert "unknown for a side of one launch; the A/A control found 20.0%" == held["launch_effect"]
    larger = S.compare_to_baseline(a, list(np.array(b) * 1.5), ra, list(np.array(rb) * 1.5), seed=0, aa_noise=0.20)
    assert larger["verdict"] == "slower", "a difference larger than the A/A spread is still called"
