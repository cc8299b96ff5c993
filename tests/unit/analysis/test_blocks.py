"""The verdicts' model with the round as a block (``analysis.blocks``): small tables worked by hand, then its
error rates measured on synthetic sweeps against the design it replaces.

A synthetic sweep (``simulate``): each request's decode rate is log-normal: the configuration's true rate x
the machine's state when its launch ran x a launch effect (SD 1.5 %) x request noise (SD 3 %, 12 requests a
launch). The machine's state: a cold start (the first 1 or 2 launches of the sweep 7-14 % slow) and a linear
drift over start time (a slope per sweep, SD 0.3 % per minute); a launch takes 60-80 s. Each sweep has 4-6
configurations: the baseline ``base``, identical copies ``copy1``, ``copy2``, ... and ``slow``, truly 5 %
slower, in 2-4 rounds, and the baseline's A/A control. The same kind of records is run in two designs:

* blocked: a random order in every round (a seeded permutation), the A/A control at a random place in the
  last round; judged by ``blocks.fit_point`` / ``blocks.contrast``;
* old: the baseline first in every round, the others by name, the A/A control last; judged by the one-way
  model (``stats.pooled_noise`` / ``stats.compare``), the A/A control against the baseline's first launch
  (as ``launches.aa_control`` judges it without rounds).

Monte Carlo error: a rate p over N sweeps has the binomial SD sqrt(p (1 - p) / N); a rate promised to be at
most 5 % is checked against 5 % + 2.33 SD (one-sided 99 %).
"""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import numpy as np
import pytest

from specsweep.analysis import blocks as B
from specsweep.analysis import stats as S
from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.rows import config_rows, explode_points
from specsweep.contracts.summary import ConfigSummary
from specsweep.testing.reports import launches_summary, render_summaries
from specsweep.workflow.closing import closing_lines

NOMINAL = 0.05
SWEEPS = 1000
#: A rate promised to stay at or under NOMINAL, with its Monte Carlo error (one-sided 99 %).
AT_MOST = NOMINAL + 2.33 * math.sqrt(NOMINAL * (1 - NOMINAL) / SWEEPS)
SLOW = math.log(0.95)  # the known true difference of ``slow``: 5 % slower
N_REQUESTS = 12


def _sample(values_by_launch: dict[str, float], n: int = N_REQUESTS) -> S.Sample:
    """A sample whose launch ``lid`` has ``n`` requests of exactly ``value`` (its median)."""
    return S.Sample([v for v in values_by_launch.values() for _ in range(n)],
                    [lid for lid in values_by_launch for _ in range(n)])


def _entries(*launches: str) -> list[dict]:
    return [{"launch": lid} for lid in launches]


# ------------------------------------------------------------------ small tables


def test_rounds_come_from_the_entry_else_from_the_launch_id_and_the_control_joins_the_last_round():
    assert B.launch_rounds(_entries("1", "2", "3", "aa")) == {"1": 1, "2": 2, "3": 3, "aa": 3}
    given = [{"launch": "1", "round": 2}, {"launch": "2", "round": 1}, {"launch": "aa", "round": 1}]
    assert B.launch_rounds(given) == {"1": 2, "2": 1, "aa": 1}
    assert B.launch_rounds([{"launch": "1", "round": 4}, {"launch": "aa"}]) == {"1": 4, "aa": 4}
    assert B.launch_rounds(_entries("aa")) == {}, "a control without regular launches has no round"


def test_a_balanced_two_by_two_is_the_mean_of_the_within_round_differences():
    a = {"1": 100.0, "2": 110.0}
    b = {"1": 90.0, "2": 104.0}
    fit = B.fit_point({"a": _sample(a), "b": _sample(b)}, {"a": _entries("1", "2"), "b": _entries("1", "2")})
    assert fit.model == B.BLOCKED and fit.df == 1 and fit.rank == 3
    la, lb = {k: math.log(v) for k, v in a.items()}, {k: math.log(v) for k, v in b.items()}
    d = ((la["1"] - lb["1"]) + (la["2"] - lb["2"])) / 2
    interaction = la["1"] - la["2"] - lb["1"] + lb["2"]
    s2 = interaction ** 2 / 4  # residual sum of squares / 1 df; each residual is +-interaction / 4
    assert fit.var == pytest.approx(s2)
    v = B.contrast(fit, "a", "b", min_samples=1)
    assert v["ratio"] == pytest.approx(math.exp(d)) and v["se"] == pytest.approx(math.sqrt(s2))  # var(d) = s^2
    t = S._t(1, 0.975)
    assert v["ratio_ci"] == pytest.approx([math.exp(d - t * math.sqrt(s2)), math.exp(d + t * math.sqrt(s2))])
    assert v["df"] == 1 and v["units"] == [2, 2] and v["model"] == B.BLOCKED and v["method"] == B.BLOCKED_METHOD
    assert v["estimate"] / v["estimate_baseline"] == pytest.approx(v["ratio"])
    assert v["estimate"] == pytest.approx(math.exp((la["1"] + la["2"]) / 2)), "a full row: its own mean"
    assert set(S.compare(_sample(a), _sample(b), S.pooled_noise([_sample(a)]), min_samples=1)) <= set(v)
    # balanced: var(d) = 2 s^2 / launches, the relation launches_needed solves
    assert B.launches_needed(fit, 0.05) == S.launches_needed(fit.noise, 0.05) and fit.noise.var == fit.var


def test_a_missing_cell_and_a_round_effect_removed_exactly():
    """a, b, c in rounds 1-3, c missing in round 3: a shift of a whole round moves no contrast; b - c is
    then judged on the rounds they share, and the degrees of freedom are n - (1 + 2 + 2)."""
    rng = np.random.default_rng(7)
    table = {name: {str(r): float(np.exp(rng.normal(5, 0.02))) for r in (1, 2, 3)} for name in "abc"}
    del table["c"]["3"]
    entries = {name: _entries(*cells) for name, cells in table.items()}
    fit = B.fit_point({n: _sample(c) for n, c in table.items()}, entries)
    assert fit.model == B.BLOCKED and fit.df == 8 - 5
    shifted = {n: {r: v * (1.3 if r == "2" else 1.0) for r, v in c.items()} for n, c in table.items()}
    moved = B.fit_point({n: _sample(c) for n, c in shifted.items()}, entries)
    for x, y in (("a", "b"), ("b", "c"), ("c", "a")):
        assert B.contrast(moved, x, y)["ratio"] == pytest.approx(B.contrast(fit, x, y)["ratio"])
        assert B.contrast(moved, x, y)["se"] == pytest.approx(B.contrast(fit, x, y)["se"])
    assert moved.var == pytest.approx(fit.var)
    # the SE from the design: a pair that misses a cell is less precise than a full pair
    assert B.contrast(fit, "b", "c")["se"] > B.contrast(fit, "a", "b")["se"]
    # against the full-rank least squares of the same design written out by hand
    x = np.array([[1, a, c, r2, r3] for name, cells in table.items() for r in cells
                  for a, c, r2, r3 in [(name == "b", name == "c", r == "2", r == "3")]], dtype=float)
    y = np.log([v for cells in table.values() for v in cells.values()])
    beta = np.linalg.solve(x.T @ x, x.T @ y)
    assert B.contrast(fit, "b", "c")["ratio"] == pytest.approx(math.exp(beta[1] - beta[2]))
    cov = np.linalg.inv(x.T @ x) * fit.var
    assert B.contrast(fit, "b", "c")["se"] == pytest.approx(math.sqrt(cov[1, 1] + cov[2, 2] - 2 * cov[1, 2]))


def test_the_aa_control_is_a_level_of_its_own_in_its_round():
    base = {"1": 100.0, "2": 104.0, "aa": 101.0}
    other = {"1": 120.0, "2": 123.0}
    sides = {"base": _sample(base), "x": _sample(other)}
    entries = {"base": _entries("1", "2", "aa"), "x": _entries("1", "2")}
    fit = B.fit_point(sides, entries)
    assert fit.levels == ("base", "base@aa", "x") and fit.rounds == (1, 2) and fit.df == 1
    without = B.fit_point({"base": _sample({"1": 100.0, "2": 104.0}), "x": _sample(other)},
                          {"base": _entries("1", "2"), "x": _entries("1", "2")})
    v, w = B.contrast(fit, "x", "base"), B.contrast(without, "x", "base")
    assert v["ratio"] == pytest.approx(w["ratio"]) and v["se"] == pytest.approx(w["se"]), \
        "the control enters neither the baseline's estimate nor the residual variance"
    assert v["launches"] == [2, 2]
    aa = B.contrast(fit, B.control_level("base"), "base")
    # the control against the baseline's fitted value in round 2 (the 2 x 2 table's additive fit)
    lb, lx = {k: math.log(v) for k, v in base.items()}, {k: math.log(v) for k, v in other.items()}
    fitted = (lb["1"] + lb["2"]) / 2 + (lb["2"] + lx["2"]) / 2 - (lb["1"] + lb["2"] + lx["1"] + lx["2"]) / 4
    assert aa["ratio"] == pytest.approx(math.exp(lb["aa"] - fitted))
    assert aa["model"] == B.BLOCKED and aa["units"] == [1, 2]
    assert fit.as_dict()["levels"] == ["base", "base@aa", "x"] and fit.as_dict()["df"] == 1
    one_way = B.contrast(B.fit_point(sides, {}), B.control_level("base"), "base", min_samples=1)
    assert one_way["model"] == B.ONE_WAY and one_way["ratio"] == pytest.approx(101 / math.sqrt(100 * 104)), \
        "without rounds: the control against the baseline's regular launches"


def test_one_round_falls_back_to_the_one_way_model_and_says_so():
    sides = {"base": _sample({"1": 100.0, "aa": 103.0}), "x": _sample({"1": 110.0})}
    fit = B.fit_point(sides, {"base": _entries("1", "aa"), "x": _entries("1")})
    assert fit.model == B.ONE_WAY and fit.why.startswith("one round only")
    v = B.contrast(fit, "x", "base")
    assert v["model"] == B.ONE_WAY and v["model_note"] == fit.why
    expected = S.compare(sides["x"], sides["base"], S.pooled_noise(list(sides.values())))
    assert {k: v[k] for k in expected} == expected, "exactly today's verdict"
    assert fit.noise == S.pooled_noise(list(sides.values()))


def test_no_degrees_of_freedom_left_or_no_round_falls_back():
    """The baseline once with its control, ``again`` twice, two configurations once: 6 launches, 6 parameters."""
    sides = {"nospec": _sample({"1": 100.0, "aa": 96.0}), "again": _sample({"1": 100.0, "2": 101.0}),
             "d0": _sample({"1": 100.0}), "d1": _sample({"1": 99.0})}
    entries = {"nospec": _entries("1", "aa"), "again": _entries("1", "2"), "d0": _entries("1"), "d1": _entries("1")}
    fit = B.fit_point(sides, entries)
    assert fit.model == B.ONE_WAY and fit.why.startswith("no degrees of freedom left") and fit.noise.df == 2
    unknown = B.fit_point({"a": S.Sample([1.0] * 12), "b": S.Sample([2.0] * 12)}, {})
    assert unknown.model == B.ONE_WAY and unknown.why == "the round of a launch is unknown"


def test_a_pair_without_shared_rounds_is_judged_by_the_one_way_model():
    sides = {"c": _sample({"3": 100.0, "4": 102.0}), "d": _sample({"3": 90.0, "4": 93.0}),
             "a": _sample({"1": 100.0}), "b": _sample({"2": 100.0})}
    entries = {name: _entries(*sorted({lid for lid in s.launches})) for name, s in sides.items()}
    fit = B.fit_point(sides, entries)
    assert fit.model == B.BLOCKED
    assert B.contrast(fit, "c", "d")["model"] == B.BLOCKED
    v = B.contrast(fit, "a", "c")
    assert v["model"] == B.ONE_WAY and "not estimable" in v["model_note"]
    assert B.contrast(fit, "a", "nowhere")["verdict"] == "insufficient samples"


def test_the_trend_recovers_a_drift_within_rounds():
    rng = np.random.default_rng(3)
    slope = 0.004  # per minute
    entries: dict[str, list[dict]] = {}
    t = 0.0
    names = ["a", "b", "c", "d"]
    values: dict[str, dict[str, float]] = {n: {} for n in names}
    for r in (1, 2, 3):
        for n in rng.permutation(names):
            values[n][str(r)] = 100.0 * math.exp(slope * t / 60 + rng.normal(0, 0.001))
            entries.setdefault(n, []).append({"launch": str(r), "started_at": 1.7e9 + t})
            t += 70.0
    sides = {n: _sample(v) for n, v in values.items()}
    got = B.trend(B.fit_point(sides, entries))
    assert got["named"] and got["slope_per_min"] == pytest.approx(math.expm1(slope), rel=0.1)
    assert got["text"].startswith("the residuals drift +0.4")
    assert "% per minute of start time within rounds" in got["text"]
    assert B.trend(B.fit_point(sides, {n: _entries("1", "2", "3") for n in names}))["absent"] == \
        "a launch has no start time"


# ------------------------------------------------------------------ synthetic sweeps


def simulate(rng: np.random.Generator, configs: int, rounds: int, randomized: bool, drift: float,
             cold: int, slow: float = SLOW) -> tuple[dict[str, S.Sample], dict[str, list[dict]]]:
    """One sweep (module docstring): each configuration's sample and launch entries. ``drift``: log rate per
    minute of start time; ``cold``: how many launches at the start are 7-14 % slow."""
    names = ["base", *(f"copy{k}" for k in range(1, configs - 1)), "slow"]
    truth = {n: (slow if n == "slow" else 0.0) for n in names}
    order: list[tuple[str, str]] = []
    for r in range(1, rounds + 1):
        order += [(str(n), str(r)) for n in (rng.permutation(names) if randomized else names)]
    place = len(order) - (int(rng.integers(0, configs + 1)) if randomized else 0)
    order.insert(place, ("base", "aa"))
    values: dict[str, list[float]] = {n: [] for n in names}
    launches: dict[str, list[str]] = {n: [] for n in names}
    entries: dict[str, list[dict]] = {n: [] for n in names}
    t = 0.0
    for k, (name, lid) in enumerate(order):
        level = math.log(200.0) + truth[name] + drift * t / 60 + rng.normal(0, 0.015)
        if k < cold:
            level += math.log1p(-rng.uniform(0.07, 0.14))
        values[name] += list(np.exp(level + rng.normal(0, 0.03, N_REQUESTS)))
        launches[name] += [lid] * N_REQUESTS
        entries[name].append({"launch": lid, "started_at": 1.7e9 + t})
        t += rng.uniform(60, 80)
    return {n: S.Sample(values[n], launches[n]) for n in names}, entries


def _called(v: dict) -> bool:
    return v["verdict"] in ("faster", "slower")


@functools.cache
def main_sweeps() -> dict[str, np.ndarray]:
    """SWEEPS sweeps with a cold start and a drift, each in both designs (same draws of the sweep's shape,
    drift and cold start; the order differs)."""
    out: dict[str, list[float]] = {}

    def keep(key: str, value: float) -> None:
        out.setdefault(key, []).append(value)

    for i in range(SWEEPS):
        shape = np.random.default_rng(20_000 + i)
        configs, rounds = int(shape.integers(4, 7)), int(shape.integers(2, 5))
        drift, cold = shape.normal(0, 0.003), int(shape.integers(1, 3))
        for design in ("blocked", "old"):
            sides, entries = simulate(np.random.default_rng([i, int(design == "old")]), configs, rounds,
                                      design == "blocked", drift, cold)
            if design == "blocked":
                fit = B.fit_point(sides, entries)
                same, slow = B.contrast(fit, "copy2", "base"), B.contrast(fit, "slow", "base")
                aa = B.contrast(fit, B.control_level("base"), "base")
                keep("blocked_model", fit.model == B.BLOCKED)
                same_levels = [n for n in sides if n != "slow"]
                family = S.holm_family([B.contrast(fit, x, y) for k, x in enumerate(same_levels)
                                        for y in same_levels[k + 1:]])
                keep("blocked_family_called", any(_called(v) for v in family))
                keep("blocked_power", B.power_of(slow, math.expm1(SLOW)))
            else:
                noise = S.pooled_noise(list(sides.values()))
                same = S.compare(sides["copy2"], sides["base"], noise)
                slow = S.compare(sides["slow"], sides["base"], noise)
                aa = S.compare(sides["base"].select("aa"), sides["base"].select("1"), noise)
                keep("old_power", B.power_of(slow, math.expm1(SLOW)))
            keep(f"{design}_same_called", _called(same))
            keep(f"{design}_same_log_ratio", math.log(same["ratio"]))
            keep(f"{design}_slow_called", slow["verdict"] == "slower")
            keep(f"{design}_slow_wrong_sign", slow["verdict"] == "faster")
            keep(f"{design}_slow_log_ratio", math.log(slow["ratio"]))
            keep(f"{design}_aa_called", _called(aa))
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def _mc(p: float, n: int = SWEEPS) -> float:
    return math.sqrt(max(p * (1 - p), 1e-4) / n)


def test_blocked_identical_configurations_are_called_at_most_at_the_nominal_rate():
    """(a) on sweeps with a cold start and a drift: copy2 against the baseline, and the A/A control."""
    got = main_sweeps()
    assert got["blocked_model"].all(), "2-4 rounds: the blocked model judges every sweep"
    assert got["blocked_same_called"].mean() <= AT_MOST, got["blocked_same_called"].mean()
    assert got["blocked_aa_called"].mean() <= AT_MOST, got["blocked_aa_called"].mean()
    assert abs(got["blocked_same_log_ratio"].mean()) < 0.003, "no bias: the cold start lands on no one in particular"
    # the pairwise table of the identical configurations, Holm-corrected: family-wise
    assert got["blocked_family_called"].mean() <= AT_MOST, got["blocked_family_called"].mean()


def test_blocked_power_is_what_its_own_power_calculation_predicts():
    """(b) ``slow`` (5 % slower) called slower as often as ``power_of`` the design predicted, sweep by sweep."""
    got = main_sweeps()
    observed, predicted = got["blocked_slow_called"].mean(), got["blocked_power"].mean()
    assert abs(observed - predicted) <= 3 * _mc(observed), (observed, predicted)
    assert got["blocked_slow_wrong_sign"].sum() == 0
    assert got["blocked_slow_log_ratio"].mean() == pytest.approx(SLOW, abs=0.003)


def test_the_old_design_fails_on_the_same_kind_of_records():
    """(c) the baseline first in every round (it carries the cold start), the one-way model."""
    got = main_sweeps()
    # the A/A control against the baseline's first launch: called in about a quarter of the sweeps, 5 promised
    old_aa = got["old_aa_called"].mean()
    assert old_aa >= 0.15 and old_aa > 3 * got["blocked_aa_called"].mean() + 0.1, old_aa
    # every identical configuration looks faster than the baseline by the cold start / rounds
    bias = got["old_same_log_ratio"].mean()
    assert bias > 0.015 and bias > 10 * abs(got["blocked_same_log_ratio"].mean()), bias
    # the 5 % slowdown: the bias hides it; called far less often than its own power calculation promises
    old, promised = got["old_slow_called"].mean(), got["old_power"].mean()
    assert old < promised - 0.15 and old < got["blocked_slow_called"].mean() / 2, (old, promised)
    assert got["old_slow_log_ratio"].mean() - SLOW > 0.015, "the estimate is biased toward no difference"


@functools.cache
def quiet_sweeps(drift: float, cold: int, sweeps: int) -> dict[str, np.ndarray]:
    """Blocked-design sweeps with a fixed drift (random sign) and cold start: verdicts, trend, cold start."""
    out: dict[str, list[float]] = {}
    for i in range(sweeps):
        shape = np.random.default_rng(40_000 + i)
        configs, rounds, sign = int(shape.integers(4, 7)), int(shape.integers(2, 5)), shape.choice([-1, 1])
        sides, entries = simulate(shape, configs, rounds, True, sign * drift, cold)
        fit = B.fit_point(sides, entries)
        slow = B.contrast(fit, "slow", "base")
        drifted, first = B.trend(fit), B.cold_start(fit)
        for key, value in (("same_called", _called(B.contrast(fit, "copy2", "base"))),
                           ("aa_called", _called(B.contrast(fit, B.control_level("base"), "base"))),
                           ("slow_called", slow["verdict"] == "slower"),
                           ("power", B.power_of(slow, math.expm1(SLOW))),
                           ("trend", drifted["named"]), ("slope", sign * math.log1p(drifted["slope_per_min"])),
                           ("cold", first["named"])):
            out.setdefault(key, []).append(value)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def test_without_drift_or_cold_start_the_rates_are_nominal():
    got = quiet_sweeps(0.0, 0, SWEEPS)
    lo, hi = NOMINAL - 2.33 * _mc(NOMINAL), AT_MOST
    for key in ("same_called", "aa_called", "trend", "cold"):
        assert lo <= got[key].mean() <= hi, (key, got[key].mean())
    observed, predicted = got["slow_called"].mean(), got["power"].mean()
    assert observed > 0.6 and abs(observed - predicted) <= 3 * _mc(observed), (observed, predicted)


def test_a_linear_drift_is_flagged_by_the_trend_check():
    """(d) 2 % per minute (up or down): the slope within rounds is found, and named in most sweeps."""
    got = quiet_sweeps(0.02, 0, 600)
    assert got["trend"].mean() >= 0.8, got["trend"].mean()
    assert got["slope"].mean() == pytest.approx(0.02, rel=0.1)
    assert got["same_called"].mean() <= NOMINAL + 2.33 * _mc(NOMINAL, 600), "randomized order: still honest"


def test_a_cold_start_is_flagged_by_the_cold_start_check():
    got = quiet_sweeps(0.0, 1, 600)
    assert got["cold"].mean() >= 0.6, got["cold"].mean()
    assert got["same_called"].mean() <= NOMINAL + 2.33 * _mc(NOMINAL, 600)


# ------------------------------------------------------------------ into the report


def test_the_report_judges_by_blocks_and_names_a_trend_in_its_first_lines(tmp_path: Path):
    """Four identical configurations in 3 rounds, in a random order each, on a machine that slows 3 % a minute."""
    rng = np.random.default_rng(11)
    names = ["nospec", "a", "b", "c"]
    starts: dict[str, dict[str, float]] = {n: {} for n in names}
    minute = 0
    for r in (1, 2, 3):
        for n in rng.permutation(names):
            starts[n][str(r)] = minute
            minute += 1
            if r == 3 and n == "b":
                starts["nospec"]["aa"] = minute
                minute += 1
    summaries = [launches_summary(n, 12.0, {lid: (m, math.exp(0.03 * m + rng.normal(0, 0.003)))
                                            for lid, m in s.items()}, 100 + len(n))
                 for n, s in starts.items()]
    rows, _ = config_rows(explode_points(summaries), "nospec")
    base = next(r for r in rows if r["config"] == "nospec")
    assert base["blocks"][PRIMARY_VERDICT].model == B.BLOCKED and base["trend"]["named"]
    assert base["trend"]["slope_per_min"] == pytest.approx(-0.03, abs=0.006)  # decode time up 3 %: rate down
    assert all(r["comparison"]["model"] == B.BLOCKED for r in rows if r is not base)
    render_summaries(summaries, "nospec", tmp_path / "summary.csv", tmp_path / "report.md", tmp_path / "plots",
                  sweep={"aa_control": True})
    head = (tmp_path / "report.md").read_text().split("## Results")[0]
    assert "- Trend: the residuals drift -2.9" in head or "- Trend: the residuals drift -3.0" in head, head
    assert "per minute of start time within rounds" in head
    closing = [line for line in closing_lines(tmp_path) if "Trend" in line or "drift over start" in line.lower()]
    assert len(closing) == 1 and closing[0].startswith("Trend: the residuals drift"), closing


def _extra_round_sweep() -> tuple[list[ConfigSummary], list[list[tuple[str, str]]]]:
    """nospec and a in 2 planned rounds (the A/A control in round 2) and an extra round 3; a is 20 % slower."""
    rounds = [[("a", "1"), ("nospec", "1")], [("nospec", "aa"), ("a", "2"), ("nospec", "2")],
              [("nospec", "3"), ("a", "3")]]
    rng = np.random.default_rng(5)
    starts: dict[str, dict[str, tuple[float, float]]] = {"nospec": {}, "a": {}}
    for minute, (config, lid) in enumerate(m for members in rounds for m in members):
        starts[config][lid] = (minute, math.exp(rng.normal(0, 0.01)))
    return [launches_summary("nospec", 12.0, starts["nospec"], 100 + len("nospec")),
            launches_summary("a", 14.4, starts["a"], 100 + len("a"))], rounds


def test_the_rounds_plans_place_the_aa_control_in_its_planned_round():
    summaries, rounds = _extra_round_sweep()
    planned = B.rounds_of_plans([{"round": k, "order": [list(m) for m in members]}
                                 for k, members in enumerate(rounds, 1)])
    assert planned[("nospec", "aa")] == 2
    for given, expected in ((planned, 2), (None, 3)):  # without the plans: the last round of nospec's launches
        rows, _ = config_rows(explode_points(summaries), "nospec", rounds=given)
        fit = rows[0]["blocks"][PRIMARY_VERDICT]
        assert next(u.round for u in fit.units if u.launch == "aa") == expected


def test_a_rounds_judgement_judges_by_the_reports_verdicts(monkeypatch, tmp_path: Path):
    """judge_round builds each summary from its launch files (replaced here by the summaries those files
    give) and must judge them as the report does: a configuration 20 % slower is called after round 3."""
    from specsweep.plan.rounds import RoundSettings
    from specsweep.workflow import jobs
    from specsweep.workflow.rounds import judge_round

    summaries, rounds = _extra_round_sweep()
    by_name = {s.config: s for s in summaries}
    monkeypatch.setattr(jobs, "summary_of_files", lambda inputs, *_: by_name[inputs["plan"][0].split("/")[1]])
    params = {"rounds": RoundSettings(max_launches=6).as_dict(), "smallest_effect": 0.05, "baseline": "nospec",
              "positive_control": None, "launches": {"nospec": 2, "a": 2}, "aa_control": True,
              "plans": {"nospec": "0" * 12, "a": "1" * 12}}  # each configuration's current plan key
    got = judge_round(3, rounds, params, str(tmp_path / "judgement.json"), io.StringIO())
    (a,) = got["comparisons"]
    assert a["verdict"] == "slower" and a["ratio"] == pytest.approx(1 / 1.2, rel=0.02), a
    assert got["ended_by"] == "resolved", got
