"""Verdicts with the round as a block: a two-way additive model on the log launch medians.

Launches run in rounds (round 1: every configuration once, round 2, ...). The
machine's speed moves over time (a slow start, a drift, a neighbour), and the
launches of one round lie closer in time than those of different rounds. The
model (``BLOCKED_METHOD``)::

    y[level, round] = mu + level effect + round effect + e,   e independent, variance s^2

* y: one launch's median of its per-request values, log scale (``stats.Sample.groups``):
  the launch is the unit, as in ``stats.pooled_noise``.
* levels: every configuration measured at the point. A configuration's A/A
  control launch (``CONTROL``) is a level of its own (``control_level``,
  ``<config>@aa``), present in one round only: it does not enter its
  configuration's estimate, and its contrast with its configuration says
  whether two launches of one configuration within one round differ (it must
  not be called).
* rounds: from the launch entries (``launch_rounds``): an entry's ``round``
  (the report and the rounds' judgement fill it from the rounds' plans,
  ``rounds_of_plans``); else its launch id (``"1"`` is round 1); the control
  in the last round of its configuration's regular launches. The baseline's
  further launches of round 1 (``"1b"``, ``"1c"``, ...: ``rounds.first_round_baseline``)
  are launches of its own level in round 1: replicates within a round, they
  give the model degrees of freedom before there is a second round (then the
  one-way model judges round 1 alone, its variance pooled from them).
* Unbalanced data are allowed (missing cells, a configuration launched in some
  rounds only). Least squares by ``numpy.linalg.lstsq`` (SVD) on a dummy-coded
  design (intercept, the levels and the rounds but the first of each);
  rank = the design's numerical rank (SVD); s^2 = residual sum of squares /
  (n - rank). A contrast L (level a - level b) is estimable when L lies in the
  row space of the design; its SE = s sqrt(L (X'X)^+ L'), judged by Student's t
  with n - rank degrees of freedom. A pair that is not estimable (no chain of
  shared rounds between them) is judged by the one-way model.
* The one-way model (``stats.pooled_noise`` / ``stats.compare``) judges the
  whole point instead when round effects cannot be estimated: one round only,
  a launch without a round, or no degrees of freedom left (``BlockFit.why``).
  Every result names the model that judged it (``model``).

The trend check (``trend``, ``TREND_METHOD``): the launch's start time added
to the model as a covariate; by Frisch-Waugh-Lovell its slope is the
regression of the model's residuals on the start time's own residual from the
design, tested by Student's t with n - rank - 1 degrees of freedom. A slope
with p < ``TREND_LEVEL`` is named. Under round blocks this is the drift
within rounds, which the blocks do not absorb. ``cold_start``: the same test
for an indicator of the sweep's first launch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special as _special

from specsweep.analysis import stats as S
from specsweep.analysis.stats import MIN_SAMPLES, POWER, VERDICT_LEVEL, Noise, Sample
from specsweep.contracts.layout import CONTROL, launch_round
from specsweep.contracts.vocabulary import Verdict

#: The model that judged a result (``model`` of every contrast).
BLOCKED = "blocked"
ONE_WAY = "one-way"
#: A trend or a cold start is named below this p-value.
TREND_LEVEL = 0.05

BLOCKED_METHOD = (
    "two-way additive model on the log launch medians with the round as a block: y[configuration, round] = "
    "mu + configuration effect + round effect + e, the launch the unit (each launch reduced to the median of its "
    "per-request values, log scale), the A/A control a level of its own in its round; unbalanced rounds allowed; "
    "least squares (numpy lstsq, SVD), residual variance with n - rank degrees of freedom; a difference of two "
    "configurations = the difference of their effects, its SE from the design (s^2 (X'X)^+), judged by Student's "
    f"t with the residual degrees of freedom, called when the two-sided {VERDICT_LEVEL:.0%} interval of the ratio "
    "excludes 1 (the row's threshold = that interval's half-width); pairwise tables Holm-corrected; with one "
    "round, a launch without a round or no degrees of freedom left, the one-way model judges instead ("
    + S.VERDICT_METHOD + ")"
)
TREND_METHOD = (
    "the launch's start time (minutes) added to the verdicts' model as a covariate: its slope is the regression "
    "of the model's residuals on the start time's own residual from the design (Frisch-Waugh-Lovell), judged by "
    f"Student's t with n - rank - 1 degrees of freedom; named when p < {TREND_LEVEL}; the cold-start check tests "
    "an indicator of the sweep's first launch the same way"
)


def control_level(config: str) -> str:
    """The model's level of ``config``'s A/A control launch."""
    return f"{config}@{CONTROL}"


def rounds_of_plans(plans: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """(configuration, launch id) -> round, from the rounds' plans (``plan.rounds``:
    results/rounds/round-<r>/plan.json, its ``round`` and ``order``)."""
    return {(str(c), str(lid)): int(plan["round"]) for plan in plans for c, lid in plan["order"]}


def launch_rounds(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The round of each launch id of one configuration: the entry's ``round``, else the round its launch id
    names (``contracts.layout.launch_round``: ``r``, or 1 for the baseline's ``1b``, ``1c``, ...); the control
    (``CONTROL``) in the last round of the regular launches. A launch with neither is left out."""
    out: dict[str, int] = {}
    for e in entries:
        lid = str(e["launch"])
        if e.get("round") is not None:
            out[lid] = int(e["round"])
        elif lid != CONTROL and launch_round(lid) is not None:
            out[lid] = launch_round(lid)
    regular = [r for lid, r in out.items() if lid != CONTROL]
    if regular and CONTROL not in out and any(str(e["launch"]) == CONTROL for e in entries):
        out[CONTROL] = max(regular)
    return out


@dataclass(frozen=True)
class Unit:
    """One launch at one point: the model's level, its configuration, round, log median and start time."""

    level: str
    config: str
    launch: str | None
    round: int | None
    y: float
    started_at: float | None = None
    n: int = 1
    request_var: float | None = None


def launch_units(config: str, sample: Sample, entries: Sequence[Mapping[str, Any]]) -> list[Unit]:
    """The launches of one configuration's ``sample`` as units, rounds and start times from its launch entries
    (``launch``, ``round`` or not, ``started_at``; summary.json's ``launches``)."""
    rounds = launch_rounds(entries)
    started = {str(e["launch"]): e.get("started_at") for e in entries}
    out = []
    for launch, logs in sample.groups().items():
        lid = None if launch is None else str(launch)
        out.append(Unit(control_level(config) if lid == CONTROL else config, config, lid, rounds.get(lid),
                        statistics.median(logs), started.get(lid), len(logs), S._median_var(logs)))
    return out


def _split(sample: Sample) -> tuple[Sample, Sample]:
    """A configuration's sample without and with only its control launch."""
    n = len(sample.values)
    launches = list(sample.launches) if sample.launches is not None else [None] * n
    repeats = list(sample.repeats) if sample.repeats is not None else [None] * n
    parts: tuple[list[int], list[int]] = ([], [])
    for i, lid in enumerate(launches):
        parts[str(lid) == CONTROL].append(i)
    return tuple(Sample([sample.values[i] for i in keep], [launches[i] for i in keep],  # type: ignore[return-value]
                        [repeats[i] for i in keep]) for keep in parts)


@dataclass(frozen=True, eq=False)
class BlockFit:
    """The verdicts' model at one point for one metric (module docstring).

    ``model``: ``BLOCKED`` or ``ONE_WAY`` (``why``: the reason the one-way model judges); ``levels``:
    the model's levels (the blocked model's include ``control_level``s, the one-way model's are the
    configurations); ``noise``: the variance that judges, as ``stats.Noise`` (blocked: the residual
    variance; one-way: ``stats.pooled_noise``), for the report's rule and power lines.
    """

    units: tuple[Unit, ...]
    model: str
    why: str | None
    levels: tuple[str, ...]
    rounds: tuple[int, ...]
    x: np.ndarray
    coef: np.ndarray
    resid: np.ndarray
    xtx_pinv: np.ndarray
    rank: int
    df: int
    var: float | None
    noise: Noise
    sides: Mapping[str, Sample] = field(default_factory=dict)
    samples: Mapping[str, Sample] = field(default_factory=dict)

    @property
    def blocked(self) -> bool:
        return self.model == BLOCKED

    def launches_of(self, level: str) -> int:
        """Launches of ``level`` in the model."""
        return sum(u.level == level for u in self.units) if self.blocked else sum(u.config == level for u in self.units)

    def describe(self) -> str:
        """Which model judges, in words."""
        if self.blocked:
            return (f"configuration + round, {len(self.units)} launches of {len(self.levels)} levels in "
                    f"{len(self.rounds)} rounds")
        return f"one-way ({self.why})"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "why": self.why, "levels": list(self.levels), "rounds": list(self.rounds),
                "launches": len(self.units), "rank": self.rank, "df": self.df, "var": self.var,
                "sd": None if self.var is None else math.sqrt(self.var)}


def _design(units: Sequence[Unit], levels: Sequence[str], rounds: Sequence[int], blocked: bool) -> np.ndarray:
    li = {name: k for k, name in enumerate(levels)}
    ri = {r: k for k, r in enumerate(rounds)}
    x = np.zeros((len(units), len(levels) + (len(rounds) - 1 if blocked else 0)))
    x[:, 0] = 1.0
    for i, u in enumerate(units):
        key = u.level if blocked else u.config
        if li[key]:
            x[i, li[key]] = 1.0
        if blocked and ri[u.round]:
            x[i, len(levels) - 1 + ri[u.round]] = 1.0
    return x


def fit(units: Sequence[Unit], sides: Mapping[str, Sample] | None = None,
        samples: Mapping[str, Sample] | None = None) -> BlockFit:
    """The model over ``units`` (every launch at the point). ``sides``: each configuration's whole sample, for
    the one-way model (``stats.pooled_noise``); ``samples``: each level's own (a configuration without its
    control launch, the control alone), for the sample counts of a contrast."""
    units = tuple(units)
    rounds = tuple(sorted({u.round for u in units if u.round is not None}))
    why = None
    if not units:
        why = "no launch"
    elif any(u.round is None for u in units):
        why = "the round of a launch is unknown"
    elif len(rounds) < 2:
        why = "one round only: no round effect to estimate"
    blocked = why is None
    levels = tuple(dict.fromkeys(u.level if blocked else u.config for u in units))
    x = _design(units, levels, rounds, blocked) if units else np.zeros((0, 1))
    rank = int(np.linalg.matrix_rank(x)) if units else 0
    if blocked and len(units) - rank < 1:
        why = f"no degrees of freedom left for a blocked model ({len(units)} launches, rank {rank})"
        blocked = False
        levels = tuple(dict.fromkeys(u.config for u in units))
        x = _design(units, levels, rounds, False)
        rank = int(np.linalg.matrix_rank(x))
    y = np.array([u.y for u in units])
    coef = np.linalg.lstsq(x, y, rcond=None)[0] if units else np.zeros(1)
    resid = y - x @ coef if units else y
    df = len(units) - rank
    var = float(resid @ resid / df) if df > 0 else None
    request = [u.request_var for u in units if u.request_var is not None]
    request_var = statistics.fmean(request) if request else None
    if not blocked and sides is not None:
        noise = S.pooled_noise(list(sides.values()))
    else:
        noise = Noise(var, df, request_var, "launch", len(levels), len(units))
    return BlockFit(units, BLOCKED if blocked else ONE_WAY, why, levels, rounds, x, coef, resid,
                    np.linalg.pinv(x.T @ x), rank, df, var, noise, dict(sides or {}), dict(samples or {}))


def fit_point(sides: Mapping[str, Sample], entries: Mapping[str, Sequence[Mapping[str, Any]]]) -> BlockFit:
    """The model at one point over every configuration in ``sides`` (name: its sample of one metric, its
    control launch included), the rounds and start times from ``entries`` (name: its launch entries)."""
    units = [u for name, sample in sides.items() for u in launch_units(name, sample, entries.get(name) or [])]
    samples: dict[str, Sample] = {}
    for name, sample in sides.items():
        regular, control = _split(sample)
        samples[name] = regular
        if control.values:
            samples[control_level(name)] = control
    return fit(units, sides, samples)


def _vector(fit_: BlockFit, level: str) -> np.ndarray:
    v = np.zeros(fit_.x.shape[1])
    k = fit_.levels.index(level)
    if k:
        v[k] = 1.0
    return v


def _estimable(fit_: BlockFit, vector: np.ndarray) -> bool:
    return int(np.linalg.matrix_rank(np.vstack([fit_.x, vector]))) == fit_.rank


def _sample(fit_: BlockFit, level: str, whole: bool) -> Sample | None:
    return (fit_.sides.get(level) if whole else None) or fit_.samples.get(level)


def _one_way(fit_: BlockFit, a: str, b: str, level: float, lower_is_better: bool, min_samples: int,
             note: str | None) -> dict[str, Any]:
    whole = a in fit_.sides and b in fit_.sides  # two configurations; with a control level, the levels' own samples
    sa, sb = _sample(fit_, a, whole), _sample(fit_, b, whole)
    if sa is None or sb is None:
        return {"verdict": Verdict.INSUFFICIENT, "method": S.VERDICT_METHOD, "model": ONE_WAY,
                "note": f"{a if sa is None else b} has no samples at this point"}
    out = S.compare(sa, sb, fit_.noise if fit_.model == ONE_WAY else S.pooled_noise(list(fit_.sides.values())),
                    level, lower_is_better, min_samples)
    out["model"] = ONE_WAY
    out["model_note"] = note or fit_.why
    return out


def contrast(fit_: BlockFit, a: str, b: str, level: float = VERDICT_LEVEL, lower_is_better: bool = False,
             min_samples: int = MIN_SAMPLES) -> dict[str, Any]:
    """The verdict of level ``a`` against level ``b`` under ``fit_``: the dict of ``stats.compare`` (``verdict``,
    ``ratio`` = exp(effect a - effect b), ``ratio_ci``, ``threshold``, ``p_value``, ``se``, ``df``, ``units``,
    ``unit``, ``launches``, ``detectable``, ``estimate`` and ``estimate_baseline`` (each level's least-squares
    mean over the rounds, exp), ``launch_effect``, ``method``, ``level``, ``n``, ``n_baseline``,
    ``min_samples``) plus ``model`` (``BLOCKED`` or ``ONE_WAY``, then with ``model_note``: why)."""
    if not fit_.blocked:
        return _one_way(fit_, a, b, level, lower_is_better, min_samples, None)
    missing = [name for name in (a, b) if name not in fit_.levels]
    if missing:
        return {"verdict": Verdict.INSUFFICIENT, "method": BLOCKED_METHOD, "model": BLOCKED,
                "note": f"{missing[0]} has no launch in this point's model"}
    vector = _vector(fit_, a) - _vector(fit_, b)
    if not _estimable(fit_, vector):
        return _one_way(fit_, a, b, level, lower_is_better, min_samples,
                        f"{a} and {b} share no chain of rounds: their difference is not estimable with round effects")
    sa, sb = fit_.samples.get(a), fit_.samples.get(b)
    na = sum(1 for v in (sa.values if sa else []) if v is not None and v > 0)
    nb = sum(1 for v in (sb.values if sb else []) if v is not None and v > 0)
    out: dict[str, Any] = {"method": BLOCKED_METHOD, "model": BLOCKED, "n": na, "n_baseline": nb,
                           "min_samples": min_samples, "level": level}
    if na < min_samples or nb < min_samples:
        out["verdict"] = Verdict.INSUFFICIENT
        return out
    d = float(vector @ fit_.coef)
    se = math.sqrt(max(0.0, fit_.var * float(vector @ fit_.xtx_pinv @ vector)))
    t_crit = S._t(fit_.df, 1 - (1 - level) / 2)
    p = float(2 * _special.stdtr(fit_.df, -abs(d) / se)) if se > 0 else (0.0 if d else 1.0)
    lo, hi = math.exp(d - t_crit * se), math.exp(d + t_crit * se)
    mean_round = np.zeros(fit_.x.shape[1])
    mean_round[0] = 1.0
    mean_round[len(fit_.levels):] = 1.0 / len(fit_.rounds)
    ua, ub = fit_.launches_of(a), fit_.launches_of(b)
    out.update(verdict=S._words(lo, hi, lower_is_better), ratio=math.exp(d), ratio_ci=[lo, hi],
               threshold=math.exp(t_crit * se) - 1, p_value=p, se=se, df=fit_.df, units=[ua, ub], unit="launch",
               launches=[ua, ub], detectable=math.exp((t_crit + S._t(fit_.df, POWER)) * se) - 1,
               estimate=math.exp(float((mean_round + _vector(fit_, a)) @ fit_.coef)),
               estimate_baseline=math.exp(float((mean_round + _vector(fit_, b)) @ fit_.coef)),
               launch_effect=(f"measured: residual variance of the blocked model over {len(fit_.units)} launches of "
                              f"{len(fit_.levels)} levels in {len(fit_.rounds)} rounds ({fit_.df} degrees of "
                              "freedom), round effects removed"))
    return out


def power_of(result: Mapping[str, Any], effect: float) -> float | None:
    """The power with which ``result``'s design calls a true relative ``effect`` (``stats.POWER_METHOD``
    solved for the power: t(power, df) = log(1 + effect) / SE - t(1 - a/2, df)); None without an SE."""
    if result.get("se") is None or not result["se"] > 0:
        return None
    t_crit = S._t(result["df"], 1 - (1 - result["level"]) / 2)
    return float(_special.stdtr(result["df"], math.log1p(abs(effect)) / result["se"] - t_crit))


def launches_needed(fit_: BlockFit, effect: float, level: float = VERDICT_LEVEL, power: float = POWER) -> int | None:
    """Launches per configuration (one a round, every configuration in every round) that see a relative
    ``effect`` with ``power``: ``stats.launches_needed`` under the model's variance (a balanced blocked
    design's contrast has variance 2 s^2 / launches, as the one-way model's)."""
    return S.launches_needed(fit_.noise, effect, level, power)


# ------------------------------------------------------------------ trend and cold start


def _added_variable(fit_: BlockFit, covariate: np.ndarray) -> dict[str, float] | None:
    """Coefficient, SE, df and p of ``covariate`` added to the model; None when the model leaves no degree
    of freedom for it or the covariate lies in the design's span."""
    if fit_.df < 2 or fit_.var is None:
        return None
    r = covariate - fit_.x @ np.linalg.lstsq(fit_.x, covariate, rcond=None)[0]
    rr = float(r @ r)
    centred = covariate - covariate.mean()
    if rr <= 1e-9 * max(float(centred @ centred), 1e-300):
        return None
    b = float(r @ fit_.resid) / rr
    df = fit_.df - 1
    rss = max(0.0, float(fit_.resid @ fit_.resid) - b * b * rr)
    se = math.sqrt(rss / df / rr)
    p = float(2 * _special.stdtr(df, -abs(b) / se)) if se > 0 else (0.0 if b else 1.0)
    return {"coef": b, "se": se, "df": df, "p_value": p}


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _starts(fit_: BlockFit) -> np.ndarray | None:
    starts = [u.started_at for u in fit_.units]
    if not starts or any(s is None for s in starts):
        return None
    return np.asarray(starts, dtype=float)


def trend(fit_: BlockFit, level: float = TREND_LEVEL) -> dict[str, Any]:
    """The drift of the residuals over start time (``TREND_METHOD``): ``slope_per_min`` (relative, per
    minute), ``p_value``, ``df``, ``named`` (p < ``level``) and ``text`` (a sentence when named), or
    ``named`` False with ``absent`` saying why it could not be computed."""
    starts = _starts(fit_)
    out: dict[str, Any] = {"method": TREND_METHOD, "model": fit_.model, "launches": len(fit_.units), "named": False}
    if starts is None:
        return {**out, "absent": "a launch has no start time"}
    got = _added_variable(fit_, (starts - starts.min()) / 60.0)
    if got is None:
        return {**out, "absent": f"too few launches beside the model's {fit_.rank} parameters, or the start "
                                 "times lie in the design's span"}
    slope = math.expm1(got["coef"])
    named = got["p_value"] < level
    out.update(slope_per_min=slope, p_value=got["p_value"], df=got["df"], named=named,
               span_min=float(starts.max() - starts.min()) / 60.0)
    if named:
        within = " within rounds, which the round blocks do not absorb" if fit_.blocked else ""
        out["text"] = (f"the residuals drift {slope * 100:+.2f} % per minute of start time{within} "
                       f"({_p(got['p_value'])}, {len(fit_.units)} launches over {out['span_min']:.0f} min)")
    return out


def cold_start(fit_: BlockFit, level: float = TREND_LEVEL) -> dict[str, Any]:
    """The sweep's first launch (earliest start) against the model's fit of the others: ``excess`` (relative:
    its value / what the model expects from the other launches - 1), ``p_value``, ``named`` (p < ``level``),
    ``launch`` ("config launch id") and ``text`` when named; ``absent`` when it cannot be told apart."""
    starts = _starts(fit_)
    out: dict[str, Any] = {"method": TREND_METHOD, "model": fit_.model, "named": False}
    if starts is None:
        return {**out, "absent": "a launch has no start time"}
    first = int(np.argmin(starts))
    unit = fit_.units[first]
    out["launch"] = f"{unit.config} launch {unit.launch}"
    indicator = np.zeros(len(fit_.units))
    indicator[first] = 1.0
    got = _added_variable(fit_, indicator)
    if got is None:
        return {**out, "absent": "the first launch is the only launch of its level or round, or too few launches"}
    excess = math.expm1(got["coef"])
    out.update(excess=excess, p_value=got["p_value"], df=got["df"], named=got["p_value"] < level)
    if out["named"]:
        out["text"] = (f"the sweep's first launch ({out['launch']}) lay {abs(excess) * 100:.1f} % "
                       f"{'below' if excess < 0 else 'above'} what the model expects from the other launches "
                       f"({_p(got['p_value'])})")
    return out
