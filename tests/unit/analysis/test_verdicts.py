"""Verdicts: the launch as a random effect, Holm's correction, power; their error rates measured.

The rates are measured on synthetic measurements with a known launch effect
and a known true difference (log-normal per-request decode rates: a
configuration's true rate x a launch effect drawn per launch x request
noise), over many seeds, and compared with what the method promises: a false
positive rate of 5 % between identical configurations, a family-wise 5 %
over a Holm-corrected pairwise table, and the power that ``stats.detectable``
states.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import special

from specsweep.analysis import stats as S
from specsweep.testing.workflow import REPO

#: The synthetic design: like the GPU launch study (issue of the H200 run), per launch 12 requests.
LAUNCH_SD = 0.02  # the launch effect, relative
REQUEST_SD = 0.03  # request-to-request noise within a launch, relative
N_REQUESTS = 12
SEEDS = 2000


def side(rng: np.random.Generator, log_rate: float, launches: int, tag: str = "") -> S.Sample:
    """One configuration: ``launches`` launches of N_REQUESTS requests, 2 rounds each."""
    effects = rng.normal(0.0, LAUNCH_SD, launches)
    values = np.exp(log_rate + effects[:, None] + rng.normal(0.0, REQUEST_SD, (launches, N_REQUESTS)))
    labels = [f"{tag}{k}" for k in range(launches) for _ in range(N_REQUESTS)]
    rounds = [r for _ in range(launches) for r in [0] * (N_REQUESTS // 2) + [1] * (N_REQUESTS - N_REQUESTS // 2)]
    return S.Sample(list(values.ravel()), labels, rounds)


def sweep(rng: np.random.Generator, effects: list[float], launches: int) -> list[S.Sample]:
    """One sweep: a configuration per entry of ``effects`` (its true log difference from 0)."""
    return [side(rng, math.log(200.0) + e, launches) for e in effects]


def test_launch_estimate_is_the_geometric_mean_of_the_launch_medians():
    values = [10, 11, 12, 40, 41, 42, 100]
    launches = ["a", "a", "a", "b", "b", "b", "c"]
    assert S.launch_estimate(values, launches) == pytest.approx((11 * 41 * 100) ** (1 / 3))
    assert S.launch_estimate(values) == pytest.approx(40.0), "one launch: the median"
    assert S.launch_estimate([0.0, -1.0]) is None


def test_pooled_noise_is_the_within_configuration_mean_square_of_launch_medians():
    a = S.Sample([100.0] * 5 + [110.0] * 5, ["1"] * 5 + ["2"] * 5)
    b = S.Sample([50.0] * 5 + [45.0] * 5 + [55.0] * 5, ["1"] * 5 + ["2"] * 5 + ["aa"] * 5)
    single = S.Sample([70.0] * 10, ["1"] * 10)
    noise = S.pooled_noise([a, b, single])
    la, lb = np.log([100.0, 110.0]), np.log([50.0, 45.0, 55.0])
    expected = (np.sum((la - la.mean()) ** 2) + np.sum((lb - lb.mean()) ** 2)) / (1 + 2)
    assert noise.var == pytest.approx(expected) and noise.df == 3 and noise.unit == "launch"
    assert noise.units == 6 and noise.sides == 3
    assert noise.request_var == pytest.approx(0.0), "constant launches: no request noise"
    assert noise.launch_var == pytest.approx(expected)


def test_a_side_of_one_launch_carries_the_launch_variance_the_sweep_measured():
    rng = np.random.default_rng(3)
    a = S.Sample(list(rng.normal(100, 0.5, 24)), ["1"] * 24)  # 12 % apart, tight requests
    b = S.Sample(list(rng.normal(112, 0.5, 24)), ["1"] * 24)
    others = [S.Sample([100.0 * f] * 10 + [100.0 / f] * 10, ["1"] * 10 + ["2"] * 10) for f in (1.10, 1.08, 1.12)]
    loud = S.compare(a, b, S.pooled_noise([a, b, *others]))
    assert loud["verdict"] == "no significant difference", "launches 20 % apart: 12 % is within the launch effect"
    assert loud["threshold"] > 0.12 and loud["units"] == [1, 1] and loud["launch_effect"].startswith("measured")
    quiet = [S.Sample([100.0 * f] * 10 + [100.0 / f] * 10, ["1"] * 10 + ["2"] * 10) for f in (1.005, 1.004, 1.006)]
    called = S.compare(a, b, S.pooled_noise([a, b, *quiet]))
    assert called["verdict"] == "slower" and called["ratio"] == pytest.approx(100 / 112, rel=0.01)
    assert called["ratio_ci"][1] < 1 and called["threshold"] < 0.05 and called["p_value"] < 0.05


def test_without_replicated_launches_the_rounds_stand_in_and_say_so():
    rng = np.random.default_rng(4)
    a = S.Sample(list(rng.normal(100, 1, 24)), ["1"] * 24, [0] * 12 + [1] * 12)
    b = S.Sample(list(rng.normal(120, 1, 24)), ["1"] * 24, [0] * 12 + [1] * 12)
    noise = S.pooled_noise([a, b])
    assert noise.unit == "round" and noise.df == 2
    v = S.compare(b, a, noise)
    assert v["verdict"] == "faster" and v["launch_effect"].startswith("unknown") and v["units"] == [2, 2]
    once = S.Sample([100.0] * 12, ["1"] * 12)
    nothing = S.compare(once, once, S.pooled_noise([once, once]))
    assert nothing["verdict"] == "insufficient samples" and "nothing was replicated" in nothing["note"]


def test_insufficient_samples():
    few = S.Sample([1.0] * (S.MIN_SAMPLES - 1))
    many = S.Sample([1.0] * 20, ["1"] * 10 + ["2"] * 10)
    v = S.compare(few, many, S.pooled_noise([few, many]))
    assert v["verdict"] == "insufficient samples" and v["min_samples"] == S.MIN_SAMPLES and "method" in v


def test_a_time_is_faster_when_smaller():
    noise = S.Noise(var=0.01 ** 2, df=10, request_var=None, unit="launch", sides=2, units=12)
    short, long = S.Sample([50.0] * 12, ["1"] * 12), S.Sample([60.0] * 12, ["1"] * 12)
    assert S.compare(short, long, noise, lower_is_better=True)["verdict"] == "faster"
    assert S.compare(short, long, noise)["verdict"] == "slower"


def test_holm_adjusts_step_down():
    assert S.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert S.holm([0.5]) == [0.5] and S.holm([]) == []
    noise = S.Noise(var=0.01 ** 2, df=20, request_var=None, unit="launch", sides=4, units=24)
    base = S.Sample([100.0] * 12, ["1"] * 12)
    # raw p about 0.03: called alone, not within a family of three where the others are null
    near = S.compare(S.Sample([103.2] * 12, ["1"] * 12), base, noise)
    nulls = [S.compare(S.Sample([100.1] * 12, ["1"] * 12), base, noise) for _ in range(2)]
    assert near["verdict"] == "faster" and 0.01 < near["p_value"] < 0.05
    family = S.holm_family([near, *nulls])
    assert family[0]["verdict"] == "no significant difference" and family[0]["family"] == 3
    assert family[0]["threshold"] > near["threshold"], "its Holm step's interval is wider"


def _power(delta: float, se: float, df: int, level: float = 0.95) -> float:
    """The exact power of the two-sided t test (noncentral t)."""
    t = special.stdtrit(df, 1 - (1 - level) / 2)
    nc = delta / se
    return float(1 - special.nctdtr(df, nc, t) + special.nctdtr(df, nc, -t))


def _rates(effect: float, launches: int, configs: int = 6, seeds: int = SEEDS) -> tuple[float, list[dict]]:
    """Share of seeds where configuration 1 (true log difference ``effect``) is called different from 0."""
    called, results = 0, []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        sides = sweep(rng, [effect] + [0.0] * (configs - 1), launches)
        v = S.compare(sides[0], sides[1], S.pooled_noise(sides))
        called += v["verdict"] != "no significant difference"
        results.append(v)
    return called / seeds, results


def test_identical_configurations_are_called_different_at_the_promised_rate():
    rate, results = _rates(0.0, launches=2)
    # 5 % promised; 2000 seeds: binomial SD 0.5 %
    assert 0.035 <= rate <= 0.065, rate
    assert all(v["df"] == 6 for v in results)


def test_a_one_launch_design_keeps_its_false_positive_rate():
    """Configurations of one launch each, judged by the launch variance of one replicated baseline."""
    called = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        base = side(rng, math.log(200.0), 3, "b")  # launch 1, 2 and the A/A control
        a, b = side(rng, math.log(250.0), 1), side(rng, math.log(250.0), 1)
        called += S.compare(a, b, S.pooled_noise([base, a, b]))["verdict"] != "no significant difference"
    assert 0.035 <= called / SEEDS <= 0.065, called / SEEDS


def test_an_effect_three_launch_sds_large_is_found_with_the_promised_power():
    launches = 4
    rate, results = _rates(3 * LAUNCH_SD, launches=launches)
    var = LAUNCH_SD ** 2 + math.pi / 2 * REQUEST_SD ** 2 / N_REQUESTS  # one launch median's variance
    promised = _power(3 * LAUNCH_SD, math.sqrt(2 * var / launches), df=6 * (launches - 1))
    assert promised >= 0.80 and rate >= 0.80, (rate, promised)
    assert abs(rate - promised) < 0.04, (rate, promised)
    assert all(v["verdict"] in ("faster", "no significant difference") for v in results), "never the wrong sign"


def test_the_stated_detectable_effect_is_found_about_80_percent_of_the_time():
    var = LAUNCH_SD ** 2 + math.pi / 2 * REQUEST_SD ** 2 / N_REQUESTS  # the design's true variance
    stated = S.detectable(S.Noise(var=var, df=12, request_var=None, unit="launch", sides=6, units=18), 3, 3)
    rate, _ = _rates(math.log1p(stated), launches=3)
    assert 0.74 <= rate <= 0.86, (stated, rate)  # the normal approximation with Student quantiles


def test_a_holm_corrected_table_of_identical_configurations_keeps_its_family_wise_rate():
    seeds, any_called = 600, 0
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        sides = sweep(rng, [0.0] * 6, 2)
        noise = S.pooled_noise(sides)
        family = S.holm_family([S.compare(a, b, noise) for i, a in enumerate(sides) for b in sides[i + 1:]])
        any_called += any(v["verdict"] != "no significant difference" for v in family)
    assert any_called / seeds <= 0.075, any_called / seeds  # family-wise 5 % promised; SD 0.9 % at 600


def test_launches_needed_reach_the_asked_effect():
    noise = S.Noise(var=0.02 ** 2, df=10, request_var=None, unit="launch", sides=5, units=15)
    need = S.launches_needed(noise, 0.05)
    assert S.detectable(noise, need, need) <= 0.05 < S.detectable(noise, need - 1, need - 1)


H200 = REPO / "docs" / "measurements" / "2026-12-01-h200-tp1-launches"


def test_the_h200_launch_study_the_identical_setups_are_not_called_and_speculation_is():
    """The committed H200 run (TP=1, 2 launches each): the four speculative configurations are physically
    identical; the range-statistic floor called one of their six pairs different (issue of the verdicts)."""
    samples = {}
    for path in sorted(H200.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        sample = summary["points"][0]["metrics"]["samples"]["decode_tok_s"]
        samples[summary["config"]] = S.Sample(sample["values"], sample["launch"], sample["repeat"])
    assert len(samples) == 5
    noise = S.pooled_noise(list(samples.values()))
    assert noise.unit == "launch" and noise.df == 6 and 0.01 < noise.sd < 0.04
    spec = [n for n in samples if n.startswith("eagle3")]
    pairs = [(a, b) for i, a in enumerate(spec) for b in spec[i + 1:]]
    family = S.holm_family([S.compare(samples[a], samples[b], noise) for a, b in pairs])
    assert [v["verdict"] for v in family] == ["no significant difference"] * 6
    raw = [S.compare(samples[a], samples[b], noise)["verdict"] for a, b in pairs]
    assert raw == ["no significant difference"] * 6, "not even without the correction"
    for name in spec:
        v = S.compare(samples[name], samples["nospec-nccl"], noise)
        assert v["verdict"] == "faster" and 1.5 < v["ratio"] < 1.7, (name, v["ratio"])
    aa = S.compare(samples["nospec-nccl"].select("aa"), samples["nospec-nccl"].select("1"), noise)
    assert aa["verdict"] == "no significant difference"


VERDICTS_RUNS = REPO / "docs" / "measurements" / "2026-12-02-h200-tp1-verdicts"


@pytest.mark.parametrize("run", ["run1", "run2"])
def test_the_h200_verdicts_study_calls_the_five_percent_control_and_no_identical_pair(run):
    """The committed H200 record of these verdicts (TP=1, 256-token outputs, 2 launches each, a +5 % control)."""
    samples = {}
    for path in sorted((VERDICTS_RUNS / run).glob("*/summary.json")):
        summary = json.loads(path.read_text())
        sample = summary["points"][0]["metrics"]["samples"]["decode_tok_s"]
        samples[summary["config"]] = S.Sample(sample["values"], sample["launch"], sample["repeat"])
    noise = S.pooled_noise(list(samples.values()))
    assert noise.df == 7 and noise.sd < 0.02
    control = S.compare(samples["eagle3-nccl-slow5"], samples["eagle3-nccl"], noise)
    assert control["verdict"] == "slower" and 0.90 < control["ratio"] < 0.97
    same = ["eagle3-nccl", "eagle3-nccl-nop2p", "eagle3-nccl-seed", "eagle3-symm-mem"]
    family = S.holm_family([S.compare(samples[a], samples[b], noise) for i, a in enumerate(same) for b in same[i + 1:]])
    assert [v["verdict"] for v in family] == ["no significant difference"] * 6
    assert S.compare(samples["eagle3-nccl"], samples["nospec-nccl"], noise)["verdict"] == "faster"
