"""The measured break-even: interpolation on known data, and its interval under the verdicts' launch model."""

from __future__ import annotations

import pytest

from specsweep.analysis.curves import crossing, crossing_interval
from specsweep.analysis.stats import Noise


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


def _noise(sd: float, df: int = 8) -> Noise:
    """A pooled launch variance of relative SD ``sd`` with ``df`` degrees of freedom."""
    return Noise(var=sd * sd, df=df, request_var=None, unit="launch", sides=4, units=df + 4)


def test_interval_brackets_the_true_crossing_and_narrows_with_less_noise():
    xs = [1.0, 2.0, 3.0, 4.0]
    wide = crossing_interval(xs, [10, 20, 30, 40], [2] * 4, 25, 2, _noise(0.15), seed=1, n_resamples=2000)
    narrow = crossing_interval(xs, [10, 20, 30, 40], [2] * 4, 25, 2, _noise(0.02), seed=1, n_resamples=2000)
    for iv in (wide, narrow):
        assert iv["low"] < 2.5 < iv["high"]
    assert narrow["high"] - narrow["low"] < (wide["high"] - wide["low"]) / 3


def test_interval_is_open_where_resamples_leave_the_range():
    # baseline barely above the first point: many resamples cross below the range
    iv = crossing_interval([1.0, 2.0], [24.5, 40], [2, 2], 25, 2, _noise(0.05), seed=3, n_resamples=2000)
    assert iv["low_open"] and iv["low"] is None and iv["below_range_share"] > 0.025
    assert not iv["high_open"] and 1.0 < iv["high"] < 2.0


def test_more_launches_and_more_degrees_of_freedom_narrow_the_interval():
    xs = [1.0, 2.0, 3.0, 4.0]
    few = crossing_interval(xs, [10, 20, 30, 40], [1] * 4, 25, 1, _noise(0.05, df=2), seed=5, n_resamples=4000)
    many = crossing_interval(xs, [10, 20, 30, 40], [4] * 4, 25, 4, _noise(0.05, df=20), seed=5, n_resamples=4000)
    assert few["low"] < 2.5 < few["high"] and many["low"] < 2.5 < many["high"]
    assert (few["high"] - few["low"]) > 2 * (many["high"] - many["low"])


def test_no_interval_without_a_variance():
    none = Noise(var=None, df=0, request_var=None, unit="round", sides=2, units=2)
    assert crossing_interval([1.0, 2.0], [10, 30], [1, 1], 20, 1, none, seed=0) is None
