"""Statistics with named methods: percentiles, bootstrap intervals, verdicts.

* Percentiles: numpy ``method="linear"`` = Hyndman & Fan (1996) type 7, the
  default of numpy, R and Excel's PERCENTILE.INC.
* Confidence interval of a median: percentile bootstrap, seeded, with the
  number of resamples stated in the output.
* Verdict against the baseline: percentile bootstrap of the ratio of medians
  (configuration / baseline, each side resampled independently), plus a
  noise floor from the spread of per-repeat medians; below a minimum sample
  count the verdict is ``insufficient samples``.
* Launches: a side measured in several server launches is resampled
  hierarchically (launches with replacement, then requests with replacement
  within each drawn launch), and the spread of its per-launch medians joins
  the noise floor, as does the A/A control's (the baseline launched twice).
  A side from one launch cannot show its launch effect; then only the A/A
  control's spread stands for it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

PERCENTILE_METHOD = "linear"
PERCENTILE_METHOD_NAME = "numpy method='linear' (Hyndman & Fan 1996 type 7)"
PERCENTILES = (50, 90, 99)

BOOTSTRAP_RESAMPLES = 10_000
CI_LEVEL = 0.95
CI_METHOD = "percentile bootstrap of the median"

#: Fewer successful requests than this on either side: no verdict.
MIN_SAMPLES = 10
VERDICT_METHOD = (
    f"percentile bootstrap of the ratio of medians (configuration/baseline, each side "
    f"resampled independently, {BOOTSTRAP_RESAMPLES} resamples, {CI_LEVEL:.0%} interval; a side measured "
    "in several launches is resampled hierarchically: launches with replacement, then requests with "
    "replacement within each drawn launch); "
    "a difference is called only if the interval excludes 1 and the ratio lies outside the "
    "noise floor, [1 / (1 + noise), 1 + noise], with noise = the largest max / min - 1 of the "
    "per-repeat medians of either side, of the per-launch medians of either side, and of the "
    "A/A control (the baseline's launches at this point) (a factor, so that slower and faster are judged alike); "
    f"fewer than {MIN_SAMPLES} successful requests on a side: insufficient samples"
)
LAUNCH_BOOTSTRAP_METHOD = "hierarchical percentile bootstrap: launches with replacement, then requests within launches"

VERDICTS = ("faster", "slower", "no significant difference", "insufficient samples")

WARMUP_CRITERION = (
    "converged when the last min_windows warmup windows all have a throughput and "
    "max/min - 1 <= tolerance"
)


def percentiles(values: Sequence[float], qs: Sequence[float] = PERCENTILES) -> dict[str, float]:
    """``{"p50": ..., ...}`` by numpy's ``linear`` method (Hyndman-Fan type 7)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("percentiles of an empty sample")
    got = np.percentile(arr, list(qs), method=PERCENTILE_METHOD)
    return {f"p{q:g}": float(v) for q, v in zip(qs, got)}


def distribution(values: Sequence[float], unit: str) -> dict[str, Any]:
    """n, mean, min, max and p50/p90/p99 of ``values`` with the unit and method named."""
    arr = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"unit": unit, "n": int(arr.size)}
    out.update(percentiles(arr))
    out.update(mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()))
    out["percentile_method"] = PERCENTILE_METHOD_NAME
    return out


def _bootstrap_medians(values: np.ndarray, rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    idx = rng.integers(0, values.size, size=(n_resamples, values.size))
    return np.median(values[idx], axis=1)


def bootstrap_median_ci(
    values: Sequence[float], seed: int, n_resamples: int = BOOTSTRAP_RESAMPLES, level: float = CI_LEVEL
) -> dict[str, Any]:
    """Percentile-bootstrap confidence interval of the median of ``values``.

    ``n_resamples`` resamples with replacement of the same size, drawn from
    ``numpy.random.default_rng(seed)``; the interval is the ``(1-level)/2`` and
    ``(1+level)/2`` quantiles (type 7) of the resampled medians.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("bootstrap of an empty sample")
    meds = _bootstrap_medians(arr, np.random.default_rng(seed), n_resamples)
    lo, hi = np.percentile(meds, [50 * (1 - level), 50 * (1 + level)], method=PERCENTILE_METHOD)
    return {
        "low": float(lo),
        "high": float(hi),
        "level": level,
        "method": CI_METHOD,
        "n_resamples": n_resamples,
        "seed": seed,
    }


def hierarchical_bootstrap_medians(
    values: Sequence[float], groups: Sequence[Any], rng: np.random.Generator, n_resamples: int
) -> np.ndarray:
    """Medians of two-stage resamples: draw as many groups (launches) as there are, with
    replacement, then within each drawn group as many values as it has, with replacement,
    and take the median of the pooled draw. One group: the ordinary bootstrap."""
    arr = np.asarray(values, dtype=float)
    labels = list(dict.fromkeys(groups))
    if len(labels) < 2:
        return _bootstrap_medians(arr, rng, n_resamples)
    index = {label: i for i, label in enumerate(labels)}
    codes = np.array([index[g] for g in groups])
    parts = [arr[codes == i] for i in range(len(labels))]
    sizes = np.array([p.size for p in parts])
    k = len(parts)
    pick = rng.integers(0, k, size=(n_resamples, k))
    drawn_sizes = sizes[pick]
    offsets = np.concatenate([np.zeros((n_resamples, 1), dtype=int), np.cumsum(drawn_sizes, axis=1)[:, :-1]], axis=1)
    out = np.full((n_resamples, int(drawn_sizes.sum(axis=1).max())), np.nan)
    for slot in range(k):
        for i, part in enumerate(parts):
            rows = np.nonzero(pick[:, slot] == i)[0]
            if rows.size == 0:
                continue
            draw = part[rng.integers(0, part.size, size=(rows.size, part.size))]
            out[rows[:, None], offsets[rows, slot][:, None] + np.arange(part.size)] = draw
    return np.nanmedian(out, axis=1)


def group_medians(values: Sequence[float], groups: Sequence[Any]) -> dict[Any, float]:
    """Median of ``values`` within each group (e.g. launch), in first-seen order."""
    by: dict[Any, list[float]] = {}
    for v, g in zip(values, groups):
        by.setdefault(g, []).append(float(v))
    return {g: float(np.median(v)) for g, v in by.items()}


def per_repeat_medians(values: Sequence[float], repeats: Sequence[int]) -> list[float]:
    """Median of ``values`` within each repeat index, in repeat order."""
    by: dict[int, list[float]] = {}
    for v, r in zip(values, repeats):
        by.setdefault(int(r), []).append(float(v))
    return [float(np.median(by[r])) for r in sorted(by)]


def repeat_noise(values: Sequence[float]) -> float | None:
    """max / min - 1 of per-repeat medians: how far repeats of one run disagree, as a factor.

    ``None`` for fewer than 2 values or a non-positive one (noise unknown).
    A factor rather than a difference over the median, so that a 2x slowdown
    and a 2x speed-up stand equally far from the noise.
    """
    if len(values) < 2 or min(values) <= 0:
        return None
    return max(values) / min(values) - 1


def compare_to_baseline(
    samples: Sequence[float],
    baseline_samples: Sequence[float],
    repeat_medians: Sequence[float],
    baseline_repeat_medians: Sequence[float],
    seed: int,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = CI_LEVEL,
    min_samples: int = MIN_SAMPLES,
    launches: Sequence[Any] | None = None,
    baseline_launches: Sequence[Any] | None = None,
    aa_noise: float | None = None,
) -> dict[str, Any]:
    """Verdict of a configuration's per-request throughput against the baseline's (or any other side's).

    Method: ``VERDICT_METHOD``. Returns ``{"verdict", "ratio", "ratio_ci",
    "noise", "noise_sources", "launch_effect", "method", "n", "n_baseline"}``;
    ``ratio`` is median / baseline median (>1 = faster). ``launches`` and
    ``baseline_launches`` label each sample with its launch (None: one
    launch); ``aa_noise`` is the A/A control's spread at this point (None:
    no control).
    """
    a, b = np.asarray(samples, float), np.asarray(baseline_samples, float)
    out: dict[str, Any] = {
        "method": VERDICT_METHOD,
        "n": int(a.size),
        "n_baseline": int(b.size),
        "min_samples": min_samples,
    }
    if a.size < min_samples or b.size < min_samples:
        out["verdict"] = "insufficient samples"
        return out
    med_b = float(np.median(b))
    if med_b <= 0:
        out["verdict"] = "insufficient samples"
        out["note"] = "baseline median is not positive"
        return out
    ratio = float(np.median(a)) / med_b
    rng = np.random.default_rng(seed)
    la = list(launches) if launches is not None else [None] * a.size
    lb = list(baseline_launches) if baseline_launches is not None else [None] * b.size
    ra = hierarchical_bootstrap_medians(a, la, rng, n_resamples)
    rb = hierarchical_bootstrap_medians(b, lb, rng, n_resamples)
    ratios = ra / rb
    lo, hi = np.percentile(ratios, [50 * (1 - level), 50 * (1 + level)], method=PERCENTILE_METHOD)
    launch_a = repeat_noise(list(group_medians(a, la).values()))
    launch_b = repeat_noise(list(group_medians(b, lb).values()))
    sources = {
        "repeats": _max_or_none(repeat_noise(repeat_medians), repeat_noise(baseline_repeat_medians)),
        "launches": _max_or_none(launch_a, launch_b),
        "aa_control": aa_noise,
    }
    known = [v for v in sources.values() if v is not None]
    noise = max(known) if known else None
    n_launches = (len(set(la)), len(set(lb)))
    if min(n_launches) >= 2:
        effect = f"measured: {n_launches[0]} and {n_launches[1]} launches"
    elif aa_noise is not None:
        effect = f"unknown for a side of one launch; the A/A control found {aa_noise:.1%}"
    else:
        effect = "unknown: one launch per side and no A/A control"
    out.update(ratio=ratio, ratio_ci=[float(lo), float(hi)], noise=noise, noise_sources=sources,
               launch_effect=effect, launches=list(n_launches), level=level, n_resamples=n_resamples, seed=seed)
    beyond_noise = noise is None or ratio > 1 + noise or ratio < 1 / (1 + noise)
    if lo > 1 and beyond_noise:
        out["verdict"] = "faster"
    elif hi < 1 and beyond_noise:
        out["verdict"] = "slower"
    else:
        out["verdict"] = "no significant difference"
    if noise is None:
        out["note"] = "fewer than 2 repeats on both sides: no repeat-noise floor applied"
    return out


def _max_or_none(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def windows_converged(windows_tok_s: Sequence[float | None], tolerance: float, min_windows: int) -> bool:
    """True when the last ``min_windows`` windows agree: see ``WARMUP_CRITERION``."""
    if min_windows < 1 or len(windows_tok_s) < min_windows:
        return False
    last = windows_tok_s[-min_windows:]
    if any(v is None or not math.isfinite(v) or v <= 0 for v in last):
        return False
    return max(last) / min(last) - 1 <= tolerance  # type: ignore[type-var]
