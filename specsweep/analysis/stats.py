"""Statistics with named methods: percentiles, bootstrap intervals, verdicts.

* Percentiles: numpy ``method="linear"`` = Hyndman & Fan (1996) type 7, the
  default of numpy, R and Excel's PERCENTILE.INC.
* Confidence interval of a median: percentile bootstrap, seeded, with the
  number of resamples stated in the output.
* Verdicts (``pooled_noise``, ``compare``, ``holm``): a random-effects model
  with the launch as the random effect. The unit of replication is the
  server launch: each launch of a side is reduced to the median of its
  per-request values (on a log scale, so that ratios are symmetric), a
  side's estimate is the mean of its launch medians (``launch_estimate``: the
  geometric mean of the launch medians), and the variance of one launch's
  median (launch effect + the request noise of that median) is pooled over
  every configuration measured at the point, the A/A control's launches
  included (``pooled_noise``: the within-configuration variance of launch
  medians, a one-way ANOVA mean square). So a side measured in one launch
  still carries the launch variance that the sweep's replicated launches
  showed. The difference of two sides is judged by Student's t with the
  pooled degrees of freedom; a difference is called when its two-sided
  95 % interval excludes 1; a family of comparisons (the pairwise table) is
  corrected by Holm's step-down method. Without any replicated launch, the
  measured rounds (repeats) within launches stand in, and the verdict says
  that the launch effect is unknown.
* Power (``detectable``, ``launches_needed``): the smallest difference the
  design sees with 80 % power, ``(t_{1-a/2,df} + t_{0.80,df}) x SE`` (the
  normal-theory approximation with Student quantiles), and the launches per
  side that would bring it down to a wanted effect.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import special as _special

from specsweep.contracts.vocabulary import Verdict
from specsweep.warmup import WARMUP_CRITERION, windows_converged  # noqa: F401 - analysis' callers import them here

PERCENTILE_METHOD = "linear"
PERCENTILE_METHOD_NAME = "numpy method='linear' (Hyndman & Fan 1996 type 7)"
PERCENTILES = (50, 90, 99)

BOOTSTRAP_RESAMPLES = 10_000
CI_LEVEL = 0.95
CI_METHOD = "percentile bootstrap of the median"

#: Fewer successful requests than this on either side: no verdict.
MIN_SAMPLES = 10
#: Verdicts are judged at this two-sided level (the interval shown is the ``VERDICT_LEVEL`` interval).
VERDICT_LEVEL = 0.95
#: The power at which the smallest detectable difference is stated.
POWER = 0.80
#: The robust within-launch spread: MAD x 1.4826 (a normal's standard deviation); the variance of a
#: launch's median is then pi/2 x spread^2 / n (the asymptotic variance of a normal sample's median).
MAD_SCALE = 1.4826
VERDICT_METHOD = (
    "random-effects model with the launch as the random effect: each launch reduced to the median of its "
    "per-request values (log scale), a side's estimate = the mean of its launch medians (their geometric mean), "
    "the variance of one launch's median pooled over every configuration at the point, the A/A control's "
    "launches included (within-configuration mean square of launch medians; a side of one launch carries it "
    "too); the difference judged by Student's t with the pooled degrees of freedom, called when the two-sided "
    f"{VERDICT_LEVEL:.0%} interval of the ratio excludes 1 (the row's threshold = that interval's half-width); "
    "pairwise tables Holm-corrected; without any replicated launch the rounds within launches stand in "
    f"(launch effect unknown); fewer than {MIN_SAMPLES} successful requests on a side: insufficient samples"
)
POWER_METHOD = (
    f"smallest detectable difference at {POWER:.0%} power = (t(1 - a/2, df) + t({POWER:.2f}, df)) x SE of the "
    "log ratio (normal-theory approximation with Student quantiles); launches needed per side for an effect E: "
    "2 x var x ((t(1 - a/2, df) + t(power, df)) / log(1 + E))^2, at the current requests per launch"
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


def per_repeat_medians(values: Sequence[float], repeats: Sequence[int]) -> list[float]:
    """Median of ``values`` within each repeat index, in repeat order."""
    by: dict[int, list[float]] = {}
    for v, r in zip(values, repeats):
        by.setdefault(int(r), []).append(float(v))
    return [float(np.median(by[r])) for r in sorted(by)]


# ------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Sample:
    """One side of a comparison: per-request values (> 0), and the launch and round of each.

    ``launches`` None = one launch; ``repeats`` None = one round per launch.
    """

    values: Sequence[float]
    launches: Sequence[Any] | None = None
    repeats: Sequence[Any] | None = None

    def groups(self, by_repeat: bool = False) -> dict[Any, list[float]]:
        """Log values by launch (or by (launch, round)), in first-seen order; non-positive values left out."""
        n = len(self.values)
        launches = list(self.launches) if self.launches is not None else [None] * n
        keys: list[Any] = launches
        if by_repeat:
            repeats = list(self.repeats) if self.repeats is not None else [None] * n
            keys = list(zip(launches, repeats))
        out: dict[Any, list[float]] = {}
        for key, v in zip(keys, self.values):
            if v is not None and v > 0:
                out.setdefault(key, []).append(math.log(v))
        return out

    def select(self, launch: Any) -> "Sample":
        """The values of one launch only."""
        n = len(self.values)
        launches = list(self.launches) if self.launches is not None else [None] * n
        keep = [i for i, lid in enumerate(launches) if lid == launch]
        return Sample([self.values[i] for i in keep], [launches[i] for i in keep],
                      None if self.repeats is None else [list(self.repeats)[i] for i in keep])


def _median_var(logs: Sequence[float]) -> float | None:
    """Request-noise variance of one group's median (log scale): pi/2 x (MAD x 1.4826)^2 / n."""
    if len(logs) < 2:
        return None
    centre = statistics.median(logs)
    spread = MAD_SCALE * statistics.median([abs(v - centre) for v in logs])
    return math.pi / 2 * spread * spread / len(logs)


def launch_estimate(values: Sequence[float], launches: Sequence[Any] | None = None) -> float | None:
    """A side's estimate: the geometric mean over its launches of each launch's median value
    (one launch: its median); None without a positive value. The statistic every verdict compares."""
    groups = Sample(values, launches).groups()
    if not groups:
        return None
    return math.exp(statistics.fmean(statistics.median(g) for g in groups.values()))


@dataclass(frozen=True)
class Noise:
    """The variance component of one metric at one point, pooled over the sides measured there.

    ``var``: variance of one unit's log median (a launch's; ``unit == "round"``:
    a round's, when no launch was replicated), None when nothing was
    replicated; ``df``: its degrees of freedom, sum over sides of (units - 1);
    ``request_var``: the part of ``var`` that is request noise (mean over units
    of pi/2 x MAD-spread^2 / n), which more requests per launch would cut;
    the rest is the launch effect, which only more launches cut.
    """

    var: float | None
    df: int
    request_var: float | None
    unit: str  # "launch" | "round"
    sides: int
    units: int

    @property
    def sd(self) -> float | None:
        """Standard deviation of one unit's log median (~ the relative launch-to-launch spread)."""
        return None if self.var is None else math.sqrt(self.var)

    @property
    def launch_var(self) -> float | None:
        """The launch effect's own variance: ``var - request_var`` (>= 0)."""
        if self.var is None or self.request_var is None:
            return None
        return max(0.0, self.var - self.request_var)

    def as_dict(self) -> dict[str, Any]:
        return {"sd": self.sd, "var": self.var, "df": self.df, "request_var": self.request_var,
                "launch_var": self.launch_var, "unit": self.unit, "sides": self.sides, "units": self.units}


def _pooled(groups_per_side: Sequence[Mapping[Any, list[float]]]) -> tuple[float | None, int, float | None, int]:
    ss, df, within, units = 0.0, 0, [], 0
    for groups in groups_per_side:
        medians = [statistics.median(g) for g in groups.values()]
        units += len(medians)
        within += [v for v in (_median_var(g) for g in groups.values()) if v is not None]
        if len(medians) >= 2:
            mean = statistics.fmean(medians)
            ss += sum((m - mean) ** 2 for m in medians)
            df += len(medians) - 1
    return (ss / df if df else None), df, (statistics.fmean(within) if within else None), units


def pooled_noise(samples: Sequence[Sample]) -> Noise:
    """The launch variance of one metric at one point, pooled over ``samples`` (every configuration
    measured there, the baseline with its A/A control included): ``VERDICT_METHOD``.

    With no side of two or more launches, the rounds within launches stand in
    (``unit == "round"``): they miss the launch effect, which the verdicts then say.
    """
    by_launch = [s.groups() for s in samples]
    var, df, request_var, units = _pooled(by_launch)
    if df:
        return Noise(var, df, request_var, "launch", len(samples), units)
    var, df, request_var, units = _pooled([s.groups(by_repeat=True) for s in samples])
    return Noise(var, df, request_var, "round", len(samples), units)


def _t(df: int, q: float) -> float:
    return float(_special.stdtrit(df, q))


def called_beyond(noise: Noise, units_a: int, units_b: int, level: float = VERDICT_LEVEL) -> float | None:
    """The threshold of two sides of ``units_a`` and ``units_b`` launches: a ratio beyond 1 +- it is
    called (``exp(t(1 - a/2, df) x SE) - 1``, the interval's half-width). None when the noise is unknown."""
    if noise.var is None:
        return None
    return math.exp(_t(noise.df, 1 - (1 - level) / 2) * math.sqrt(noise.var * (1 / units_a + 1 / units_b))) - 1


def detectable(noise: Noise, units_a: int, units_b: int, level: float = VERDICT_LEVEL,
               power: float = POWER) -> float | None:
    """The smallest relative difference (a fraction) two sides of ``units_a`` and ``units_b``
    launches see with ``power``: ``POWER_METHOD``. None when the noise is unknown."""
    if noise.var is None:
        return None
    se = math.sqrt(noise.var * (1 / units_a + 1 / units_b))
    return math.exp((_t(noise.df, 1 - (1 - level) / 2) + _t(noise.df, power)) * se) - 1


def launches_needed(noise: Noise, effect: float, level: float = VERDICT_LEVEL, power: float = POWER) -> int | None:
    """Launches per side (both sides alike) that see a relative ``effect`` with ``power``, at the
    current requests per launch and the current degrees of freedom (``POWER_METHOD``)."""
    if noise.var is None or effect <= 0:
        return None
    return max(1, math.ceil(_launches_for(noise.var, effect, noise.df, level, power)))


def _launches_for(var: float, effect: float, df: int, level: float, power: float) -> float:
    """``POWER_METHOD``'s launches per side: 2 x var x ((t(1 - a/2, df) + t(power, df)) / log(1 + E))^2."""
    return 2 * var * ((_t(df, 1 - (1 - level) / 2) + _t(df, power)) / math.log1p(effect)) ** 2


def launches_needed_in(var: float | None, effect: float, df_of: Callable[[int], int], level: float = VERDICT_LEVEL,
                       power: float = POWER, most: int = 100_000) -> int | None:
    """Launches per side that see a relative ``effect`` with ``power`` (``POWER_METHOD``) in a design whose
    residual degrees of freedom with n launches a side are ``df_of(n)``: the smallest n with a degree of
    freedom and n >= 2 x var x ((t(1 - a/2, df(n)) + t(power, df(n))) / log(1 + E))^2. Unlike
    ``launches_needed`` (this run's degrees of freedom), the t quantiles are those of the design asked about.
    None without a variance, or beyond ``most``."""
    if var is None or effect <= 0:
        return None
    for n in range(1, most + 1):
        df = df_of(n)
        if df >= 1 and n >= _launches_for(var, effect, df, level, power):
            return n
    return None


def estimate_interval(estimate: float, units: int, noise: Noise, level: float = VERDICT_LEVEL
                      ) -> tuple[float, float] | None:
    """The interval of one side's estimate from ``units`` launches under ``noise``:
    ``exp(log estimate +- t(1 - a/2, df) x sqrt(var / units))``; None when the noise is unknown."""
    if noise.var is None or units < 1:
        return None
    half = _t(noise.df, 1 - (1 - level) / 2) * math.sqrt(noise.var / units)
    return estimate * math.exp(-half), estimate * math.exp(half)


def _words(lo: float, hi: float, lower_is_better: bool) -> str:
    if lo > 1:
        return Verdict.SLOWER if lower_is_better else Verdict.FASTER
    if hi < 1:
        return Verdict.FASTER if lower_is_better else Verdict.SLOWER
    return Verdict.NO_DIFFERENCE


def compare(
    a: Sample, b: Sample, noise: Noise, level: float = VERDICT_LEVEL, lower_is_better: bool = False,
    min_samples: int = MIN_SAMPLES,
) -> dict[str, Any]:
    """The verdict of side ``a`` against side ``b`` (``VERDICT_METHOD``).

    ``noise``: ``pooled_noise`` over every side measured at the point (``a`` and
    ``b`` among them). ``lower_is_better``: the metric is a time (TTFT), so a
    ratio below 1 is "faster". Returns ``{"verdict", "ratio" (estimate a /
    estimate b), "ratio_ci", "threshold" (the interval's half-width as a
    fraction: a ratio beyond 1 +- it is called), "p_value", "se", "df", "units"
    ([a, b], launches or rounds), "unit", "detectable" (80 % power), "estimate",
    "estimate_baseline", "launch_effect", "method", "level", "n", "n_baseline",
    "min_samples"}``; ``verdict`` is ``faster``, ``slower``, ``no significant
    difference`` or ``insufficient samples`` (with a ``note``).
    """
    va = [v for v in a.values if v is not None and v > 0]
    vb = [v for v in b.values if v is not None and v > 0]
    out: dict[str, Any] = {"method": VERDICT_METHOD, "n": len(va), "n_baseline": len(vb), "min_samples": min_samples,
                           "level": level}
    if len(va) < min_samples or len(vb) < min_samples:
        out["verdict"] = Verdict.INSUFFICIENT
        return out
    if noise.var is None:
        out.update(verdict=Verdict.INSUFFICIENT,
                   note="nothing was replicated at this point (one launch and one round per configuration): "
                        "no variance to judge a difference by")
        return out
    by_repeat = noise.unit == "round"
    ga, gb = a.groups(), b.groups()
    ua, ub = len(a.groups(by_repeat)), len(b.groups(by_repeat))
    ma = statistics.fmean(statistics.median(g) for g in ga.values())
    mb = statistics.fmean(statistics.median(g) for g in gb.values())
    d = ma - mb
    se = math.sqrt(noise.var * (1 / ua + 1 / ub))
    t_crit = _t(noise.df, 1 - (1 - level) / 2)
    p = float(2 * _special.stdtr(noise.df, -abs(d) / se)) if se > 0 else (0.0 if d else 1.0)
    lo, hi = math.exp(d - t_crit * se), math.exp(d + t_crit * se)
    if noise.unit == "launch":
        effect = (f"measured: launch variance pooled over {noise.units} launches of {noise.sides} configurations "
                  f"({noise.df} degrees of freedom)")
    else:
        effect = ("unknown: no configuration was launched twice, so the rounds within launches stand in and a "
                  "launch-to-launch difference would be called as a real one")
    out.update(verdict=_words(lo, hi, lower_is_better), ratio=math.exp(d), ratio_ci=[lo, hi],
               threshold=math.exp(t_crit * se) - 1, p_value=p, se=se, df=noise.df, units=[ua, ub], unit=noise.unit,
               launches=[len(ga), len(gb)], detectable=detectable(noise, ua, ub, level), estimate=math.exp(ma),
               estimate_baseline=math.exp(mb), launch_effect=effect)
    return out


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate), in the order given:
    ``adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` over the p-values sorted ascending."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, running, out = len(p_values), 0.0, [1.0] * len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def holm_family(comparisons: Sequence[Mapping[str, Any]], lower_is_better: bool = False) -> list[dict[str, Any]]:
    """A family of ``compare`` results judged together by Holm's method (the pairwise table).

    Each result gains ``p_holm`` and ``family`` (its size); its verdict is
    called only when ``p_holm`` < 1 - level, and its ``threshold`` and
    ``ratio_ci`` become those of its Holm step (level 1 - a / (m - rank)).
    Results without a p-value (insufficient samples) pass unchanged.
    """
    judged = [i for i, c in enumerate(comparisons) if "p_value" in c]
    adjusted = holm([comparisons[i]["p_value"] for i in judged])
    order = sorted(range(len(judged)), key=lambda k: comparisons[judged[k]]["p_value"])
    step = {judged[k]: rank for rank, k in enumerate(order)}
    out = [dict(c) for c in comparisons]
    for k, i in enumerate(judged):
        c = out[i]
        alpha = (1 - c["level"]) / (len(judged) - step[i])
        t_crit = _t(c["df"], 1 - alpha / 2)
        d = math.log(c["ratio"])
        c.update(p_holm=adjusted[k], family=len(judged), ratio_ci=[math.exp(d - t_crit * c["se"]),
                                                                    math.exp(d + t_crit * c["se"])],
                 threshold=math.exp(t_crit * c["se"]) - 1)
        if adjusted[k] >= 1 - c["level"]:
            c["verdict"] = Verdict.NO_DIFFERENCE
        else:  # then p < a / (m - rank): the step's interval excludes 1
            c["verdict"] = Verdict.FASTER if (d > 0) != lower_is_better else Verdict.SLOWER
    return out
