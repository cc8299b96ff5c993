"""The measured break-even: where tok/s against accept length crosses the baseline.

For configurations that differ only in accept length (``SGLANG_SIMULATE_ACC_LEN``),
speculative tok/s rises with accept length; the baseline's tok/s is a
horizontal line. The measured break-even is where the curve crosses it:

* point estimate (``crossing``): the piecewise-linear curve through the
  points (accept length, decode rate), sorted by accept length, crosses the
  baseline's decode rate between the last point below it and the first point at
  or above it; the crossing is interpolated linearly between those two
  points. When every point lies above (below) the baseline, the crossing is
  below (above) the measured range and only that is said.
  The decode rate is the verdicts' statistic (``formulas.decode_rate``: the
  geometric mean over launches of each launch's median decode tok/s).
* uncertainty (``crossing_interval``): parametric bootstrap under the
  verdicts' launch model (``stats.pooled_noise``). Each resample draws one
  variance scale df / chi2(df) shared by every point (the pooled variance is
  one estimate) and, for every point and the baseline, its log decode rate
  as the estimate + a normal draw of variance var x scale / launches; then
  the crossing as above. The interval is the (1-level)/2 and (1+level)/2
  quantiles (type 7) over all resamples, a resample without a crossing in
  range counting as below or above the range; a bound that falls outside the
  range is reported open (``None``, with ``low_open`` / ``high_open``).

This is compared with the computed break-even, cycle time x baseline tok/s
(``formulas.break_even_accept_length``): both answer "above which accept
length does speculation pay", one from the formula at each point, one from
the measured curve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from specsweep.analysis.stats import BOOTSTRAP_RESAMPLES, CI_LEVEL, Noise

CROSSING_METHOD = (
    "linear interpolation between the two measured accept lengths whose decode rates lie on either side "
    "of the baseline's; interval: parametric bootstrap of that crossing under the verdicts' launch model "
    "(a variance scale df / chi2(df) shared by the points, each point's and the baseline's log decode rate "
    "drawn normal around its estimate with the pooled launch variance / its launches)"
)


def crossing(xs: Sequence[float], ys: Sequence[float], y0: float) -> dict[str, Any]:
    """Where the curve through ``(xs, ys)`` first rises to ``y0`` (see the module docstring).

    Returns ``{"x": float|None, "where": "inside"|"below_range"|"above_range", "between": [x_a, x_b]|None,
    "crossings": int}``; ``crossings`` counts how often the curve passes the baseline (more than one: the
    curve is not monotone, from noise or a real dip, and "pays above X" does not hold everywhere above X).
    """
    if len(xs) != len(ys) or not xs:
        raise ValueError("crossing needs as many xs as ys, at least one")
    order = np.argsort(np.asarray(xs, dtype=float), kind="stable")
    x = np.asarray(xs, dtype=float)[order]
    y = np.asarray(ys, dtype=float)[order]
    above = y >= y0
    crossings = int(np.count_nonzero(above[1:] != above[:-1]))
    if y[0] >= y0:
        return {"x": None, "where": "below_range", "between": None, "crossings": crossings}
    for i in range(1, len(x)):
        if y[i - 1] < y0 <= y[i]:
            t = (y0 - y[i - 1]) / (y[i] - y[i - 1])
            return {"x": float(x[i - 1] + t * (x[i] - x[i - 1])), "where": "inside",
                    "between": [float(x[i - 1]), float(x[i])], "crossings": crossings}
    return {"x": None, "where": "above_range", "between": None, "crossings": crossings}


def _crossing_x(x: np.ndarray, y: np.ndarray, y0: float) -> float:
    """Crossing of sorted points, -inf below the range and +inf above it."""
    if y[0] >= y0:
        return -np.inf
    above = np.nonzero(y >= y0)[0]
    above = above[above > 0]
    if above.size == 0:
        return np.inf
    i = int(above[0])
    return float(x[i - 1] + (y0 - y[i - 1]) / (y[i] - y[i - 1]) * (x[i] - x[i - 1]))


def crossing_interval(
    xs: Sequence[float],
    estimates: Sequence[float],
    units: Sequence[int],
    baseline: float,
    baseline_units: int,
    noise: Noise,
    seed: int,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = CI_LEVEL,
) -> dict[str, Any] | None:
    """Bootstrap interval of the crossing (module docstring); None when ``noise`` has no variance.

    ``estimates[i]``: the decode rate at ``xs[i]`` from ``units[i]`` launches
    (rounds, when ``noise.unit`` is ``round``); ``baseline``: the baseline's.
    """
    if noise.var is None:
        return None
    rng = np.random.default_rng(seed)
    order = np.argsort(np.asarray(xs, dtype=float), kind="stable")
    x = np.asarray(xs, dtype=float)[order]
    scale = noise.df / rng.chisquare(noise.df, size=(n_resamples, 1))
    sd = np.sqrt(noise.var * scale / np.asarray(units, dtype=float)[order][None, :])
    meds = np.exp(np.log(np.asarray(estimates, dtype=float)[order])[None, :] + sd * rng.standard_normal(sd.shape))
    base = np.exp(math.log(baseline) + np.sqrt(noise.var * scale[:, 0] / baseline_units)
                  * rng.standard_normal(n_resamples))
    cross = np.sort(np.array([_crossing_x(x, meds[b], base[b]) for b in range(n_resamples)]))
    lo = _quantile_or_open(cross, (1 - level) / 2)
    hi = _quantile_or_open(cross, (1 + level) / 2)
    return {
        "low": lo,
        "high": hi,
        "low_open": lo is None,
        "high_open": hi is None,
        "below_range_share": float(np.mean(cross == -np.inf)),
        "above_range_share": float(np.mean(cross == np.inf)),
        "level": level,
        "n_resamples": n_resamples,
        "seed": seed,
        "method": CROSSING_METHOD,
    }


def _quantile_or_open(sorted_values: np.ndarray, q: float) -> float | None:
    """Type-7 quantile of sorted values, or None when it touches a crossing outside the range (+-inf)."""
    h = (sorted_values.size - 1) * q
    a, b = sorted_values[int(np.floor(h))], sorted_values[int(np.ceil(h))]
    if not (np.isfinite(a) and np.isfinite(b)):
        return None
    return float(a + (h - np.floor(h)) * (b - a))
