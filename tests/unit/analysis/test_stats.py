"""Percentile method, bootstrap intervals and the warmup criterion (verdicts: test_verdicts.py)."""

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


def test_windows_converged():
    assert S.windows_converged([50, 100, 105], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100, 120], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100], tolerance=0.10, min_windows=2)
    assert not S.windows_converged([100, None, 100], tolerance=0.10, min_windows=2)
    assert S.windows_converged([100, 101, 100], tolerance=0.02, min_windows=3)
