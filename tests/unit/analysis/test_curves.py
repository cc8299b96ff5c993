"""The measured break-even: interpolation on known data, and its bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from specsweep.analysis.curves import crossing, crossing_interval


def test_crossing_interpolates_between_the_two_points_around_the_baseline():
    # tok/s = 10 x accept length; baseline 23 -> crossing at 2.3, between the points at 2 and 3
    c = crossing([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], 23.0)
    assert c == {"x": pytest.approx(2.3), "where": "inside", "between": [2.0, 3.0], "crossings": 1}


def test_crossing_sorts_by_accept_length_and_handles_uneven_spacing():
    c = crossing([3.6, 1.2, 2.8, 2.0], [36.0, 12.0, 20.0, 16.0], 18.0)
    assert c["x"] == pytest.approx(2.0 + (18 - 16) / (20 - 16) * 0.8) and c["between"] == [2.0, 2.8]


def test_crossing_outside_the_measured_range_is_said_not_extrapolated():
    assert crossing([1.0, 2.0], [30.0, 40.0], 25.0) == {"x": None, "where": "below_range", "between": None,
                                                         "crossings": 0}
    assert crossing([1.0, 2.0], [10.0, 20.0], 25.0) == {"x": None, "where": "above_range", "between": None,
                                                         "crossings": 0}


def test_a_curve_that_dips_back_below_the_baseline_is_flagged():
    # the shape seen on a loaded CPU: up, down, up again
    c = crossing([1.2, 2.0, 2.8, 3.6], [9.5, 19.6, 10.6, 27.0], 12.8)
    assert c["x"] == pytest.approx(1.2 + (12.8 - 9.5) / (19.6 - 9.5) * 0.8) and c["crossings"] == 3


def test_a_point_exactly_on_the_baseline_is_the_crossing():
    assert crossing([1.0, 2.0, 3.0], [10.0, 20.0, 30.0], 20.0)["x"] == pytest.approx(2.0)


def _noisy(rng, centres, n=40, sd=1.0):
    return [list(rng.normal(c, sd, n)) for c in centres]


def test_interval_brackets_the_true_crossing_and_narrows_with_less_noise():
    rng = np.random.default_rng(0)
    xs = [1.0, 2.0, 3.0, 4.0]
    wide = crossing_interval(xs, _noisy(rng, [10, 20, 30, 40], sd=4.0), [None] * 4,
                             list(rng.normal(25, 4.0, 40)), None, seed=1, n_resamples=2000)
    narrow = crossing_interval(xs, _noisy(rng, [10, 20, 30, 40], sd=0.5), [None] * 4,
                               list(rng.normal(25, 0.5, 40)), None, seed=1, n_resamples=2000)
    for iv in (wide, narrow):
        assert iv["low"] < 2.5 < iv["high"]
    assert narrow["high"] - narrow["low"] < (wide["high"] - wide["low"]) / 3


def test_interval_is_open_where_resamples_leave_the_range():
    rng = np.random.default_rng(2)
    # baseline barely above the first point: many resamples cross below the range
    iv = crossing_interval([1.0, 2.0], _noisy(rng, [24.5, 40], sd=3.0), [None, None],
                           list(rng.normal(25, 3.0, 40)), None, seed=3, n_resamples=2000)
    assert iv["low_open"] and iv["low"] is None and iv["below_range_share"] > 0.025
    assert not iv["high_open"] and 1.0 < iv["high"] < 2.0


def test_launch_labels_widen_the_interval():
    rng = np.random.default_rng(4)
    xs = [1.0, 2.0, 3.0, 4.0]
    # four launches per point that disagree by up to +-3 tok/s: the pooled requests alone understate it
    offsets = (-3.0, -1.0, 1.0, 3.0)
    samples = [[v for o in offsets for v in rng.normal(c + o, 0.3, 10)] for c in (10, 20, 30, 40)]
    labels = [[str(i) for i in range(4) for _ in range(10)]] * 4
    base = list(rng.normal(25, 0.3, 40))
    flat = crossing_interval(xs, samples, [None] * 4, base, None, seed=5, n_resamples=2000)
    nested = crossing_interval(xs, samples, labels, base, None, seed=5, n_resamples=2000)
    assert flat["low"] < 2.5 < flat["high"] and nested["low"] < 2.5 < nested["high"]
    assert (nested["high"] - nested["low"]) > 1.5 * (flat["high"] - flat["low"])
