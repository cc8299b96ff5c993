"""The race's screen by the cost model (``plan.screen``, ``analysis.screen``): groups that differ only in the
communication setting, one micro-benchmark per distinct setting, predictions from a measured member, the margin
from the residuals measured so far, and the config key's checks."""

from __future__ import annotations

import pytest

from specsweep.analysis.screen import model_error, screen, threshold
from specsweep.plan.config import ConfigError, check_config
from specsweep.plan.screen import ScreenSettings, bench_settings, group_key, groups

SETTINGS = ["server_args.all-reduce-backend"]


def _plan(name: str, backend: str, spec: bool = False, **env: str) -> dict:
    args = {"all-reduce-backend": backend, "tp-size": 2, "speculative-algorithm": "EAGLE3" if spec else "NONE"}
    return {"name": name, "engine": "reference", "argv": ["python", "-m", "x", "--all-reduce-backend", backend],
            "server_args": args, "env": dict(env), "workload": {"concurrency": 1},
            "facts": {"all_reduce_backend": backend, "tp_size": 2}}


PLANS = {"n-gloo": _plan("n-gloo", "gloo"), "n-shm": _plan("n-shm", "shm"), "n-nccl": _plan("n-nccl", "nccl"),
         "e-gloo": _plan("e-gloo", "gloo", True), "e-shm": _plan("e-shm", "shm", True),
         "n-shm-slow": _plan("n-shm-slow", "shm", SPECSWEEP_TEST_STEP_SLOWDOWN="0.1")}


def _row(config: str, fixed_ms: float, allreduces: float, latency_us: float, tokens: float, share: float) -> dict:
    """A report.json row with its cost model (``analysis.answer.model_record``)."""
    return {"config": config, "point": "default", "point_index": 0, "status": "ok",
            "model": {"parts": {"fixed_ms": fixed_ms, "allreduces": allreduces, "latency_us": latency_us,
                                "tokens": tokens}, "residual": {"residual_share": share}}}


def test_configurations_that_differ_only_in_the_setting_are_one_group_and_each_setting_is_benchmarked_once():
    assert groups(PLANS, SETTINGS) == {"e-gloo": ["e-gloo", "e-shm"], "n-gloo": ["n-gloo", "n-nccl", "n-shm"],
                                       "n-shm-slow": ["n-shm-slow"]}
    runs = bench_settings(PLANS, SETTINGS)
    assert [(r["group"], r["setting"], r["members"]) for r in runs] == [
        ("e-gloo", {"server_args.all-reduce-backend": "gloo"}, ["e-gloo"]),
        ("e-gloo", {"server_args.all-reduce-backend": "shm"}, ["e-shm"]),
        ("n-gloo", {"server_args.all-reduce-backend": "gloo"}, ["n-gloo"]),
        ("n-gloo", {"server_args.all-reduce-backend": "nccl"}, ["n-nccl"]),
        ("n-gloo", {"server_args.all-reduce-backend": "shm"}, ["n-shm"]),
        ("n-shm-slow", {"server_args.all-reduce-backend": "shm"}, ["n-shm-slow"])]
    # a grid over two settings: members equal in both are one run
    two = {f"c{k}": _plan(f"c{k}", "gloo", NCCL_ALGO=algo, OTHER=str(k)) for k, algo in enumerate(["Ring", "Tree"])}
    two["c9"] = _plan("c9", "gloo", NCCL_ALGO="Ring", OTHER="0")
    runs = bench_settings(two, [*SETTINGS, "env.NCCL_ALGO"])
    assert sorted(len(r["members"]) for r in runs) == [1, 2], "c0 and c9 are equal in both settings: one run"
    assert group_key(two["c0"], ["env.NCCL_ALGO"]) == group_key(two["c9"], ["env.NCCL_ALGO"])


def test_a_configuration_predicted_slower_than_the_best_by_more_than_the_models_error_is_set_aside():
    # the measured n-shm: 10 ms of compute, 16 all-reduces a step; its prediction was 4 % off, e-shm's 2 %
    rows = [_row("n-shm", 10.0, 16, 50.0, 1.0, 0.04), _row("e-shm", 20.0, 16, 50.0, 2.5, -0.02)]
    lat = {"n-shm": 50.0, "n-gloo": 400.0, "n-nccl": 60.0, "e-shm": 50.0, "e-gloo": 400.0, "n-shm-slow": 50.0}
    got = screen(groups(PLANS, SETTINGS), SETTINGS, rows, lat, 0.15, benches=6)
    assert got["validated"] and got["margin"] == pytest.approx(0.04)
    assert got["threshold"] == pytest.approx(1.04 / 0.96 - 1)
    by = {p["config"]: p for p in got["predictions"]}
    assert by["n-gloo"]["predicted_ms"] == pytest.approx(10 + 16 * 0.4)
    assert by["e-gloo"]["predicted_tok_s"] == pytest.approx(2.5 / (20 + 16 * 0.4) * 1e3)
    assert got["best"] == "e-shm", "the highest predicted decode rate over every group"
    assert by["n-nccl"]["measured_from"] == "n-shm" and by["n-nccl"]["predicted_ms"] == pytest.approx(10.96)
    # n-shm-slow's group has no measured member: not predicted, never set aside
    assert by["n-shm-slow"]["predicted_ms"] is None and not by["n-shm-slow"]["set_aside"]
    assert "no configuration of its group" in by["n-shm-slow"]["why"]
    # by hand: e-shm 2.5 / 20.8 ms = 120.2 tok/s; e-gloo 2.5 / 26.4 ms = 94.7 (+26.9 %); n-shm 1 / 10.8 ms (+29.8 %),
    # n-nccl 1 / 10.96 ms (+31.8 %), n-gloo 1 / 16.4 ms (+97 %): all beyond 1.04 / 0.96 - 1 = 8.3 %
    assert got["set_aside"] == ["e-gloo", "n-gloo", "n-nccl", "n-shm"], got["set_aside"]
    assert by["e-gloo"]["slower_by"] == pytest.approx((2.5 / 20.8) / (2.5 / 26.4) - 1)
    kept = screen(groups(PLANS, SETTINGS), SETTINGS, rows, lat, 0.15, keep=["n-shm"])
    assert kept["set_aside"] == ["e-gloo", "n-gloo", "n-nccl"] and "kept: the baseline" in \
        next(p["why"] for p in kept["predictions"] if p["config"] == "n-shm")
    assert got["benches"] == 6 and got["error_from"] == [{"config": "e-shm", "residual_share": -0.02},
                                                         {"config": "n-shm", "residual_share": 0.04}]


def test_the_margin_is_the_models_shown_error_not_a_constant():
    """Two configurations 10 % apart as predicted: set aside at a shown error of 2 %, kept at 6 %."""
    lat = {"n-shm": 0.0, "n-gloo": 62.5, "n-nccl": 0.0}  # 10 ms vs 11 ms: 10 % slower
    plans = {k: PLANS[k] for k in ("n-shm", "n-gloo", "n-nccl")}
    tight = screen(groups(plans, SETTINGS), SETTINGS, [_row("n-shm", 10.0, 16, 1.0, 1.0, 0.02)], lat, 0.15)
    loose = screen(groups(plans, SETTINGS), SETTINGS, [_row("n-shm", 10.0, 16, 1.0, 1.0, -0.06)], lat, 0.15)
    assert tight["set_aside"] == ["n-gloo"] and loose["set_aside"] == []
    assert threshold(0.06) > 0.10 > threshold(0.02)
    assert model_error([_row("a", 1, 0, 0, 1, 0.02), _row("b", 1, 0, 0, 1, -0.07),
                        {"config": "c", "point_index": 0, "status": "ok", "model": {"absent": "no profile"}}]
                       )["margin"] == pytest.approx(0.07), "a row without a cost model shows no error"


def test_nothing_is_set_aside_without_a_measured_configuration_or_beyond_the_largest_error():
    lat = {"n-shm": 50.0, "n-gloo": 4000.0, "n-nccl": 60.0}
    plans = {k: PLANS[k] for k in ("n-shm", "n-gloo", "n-nccl")}
    none = screen(groups(plans, SETTINGS), SETTINGS, [], lat, 0.15)
    assert not none["validated"] and none["set_aside"] == [] and none["margin"] is None
    assert "no configuration measured yet" in none["why"]
    wide = screen(groups(plans, SETTINGS), SETTINGS, [_row("n-shm", 10.0, 16, 50.0, 1.0, 0.21)], lat, 0.15)
    assert not wide["validated"] and wide["set_aside"] == [] and "21.0 %" in wide["why"]
    assert "beyond screen.max_error (15 %)" in wide["why"]
    assert wide["predictions"][0]["predicted_ms"] is not None, "the predictions are still shown"
    failed = dict(_row("n-shm", 10.0, 16, 50.0, 1.0, 0.01), status="failed")
    assert screen(groups(plans, SETTINGS), SETTINGS, [failed], lat, 0.15)["margin"] is None


def test_a_group_measured_under_another_name_predicts_it():
    lat = {"n-shm": 50.0, "n-gloo": 4000.0, "n-nccl": 60.0}
    plans = {k: PLANS[k] for k in ("n-shm", "n-gloo", "n-nccl")}
    got = screen(groups(plans, SETTINGS), SETTINGS, [_row("earlier", 10.0, 16, 50.0, 1.0, 0.03)], lat, 0.15,
                 sources={"n-gloo": "earlier"})
    assert got["validated"] and got["set_aside"] == ["n-gloo"]
    assert {p["measured_from"] for p in got["predictions"]} == {"earlier"}


def _race_config(**screen_key) -> dict:
    return {"rounds": {"mode": "race", "max_launches": 4}, "screen": screen_key,
            "configurations": {"a": {}}}


def test_the_config_key_is_checked_naming_file_key_and_allowed_values():
    assert ScreenSettings.from_config({}) == ScreenSettings(False, (), 0.15)
    check_config(_race_config(enabled=True, settings=SETTINGS), "test.yaml")
    with pytest.raises(ConfigError) as info:
        check_config(_race_config(enabled=True, settings=["all-reduce-backend", "env."]), "test.yaml")
    msg = str(info.value)
    assert "test.yaml" in msg and "screen.settings[0]: 'all-reduce-backend' names no plan setting" in msg
    assert "screen.settings[1]" in msg and "allowed: server_args.<key> or env.<key>" in msg
    with pytest.raises(ConfigError, match=r"screen.enabled: .*rounds.mode is 'sweep'; allowed: rounds.mode: race"):
        check_config({"screen": {"enabled": True, "settings": SETTINGS}, "configurations": {"a": {}}}, "test.yaml")
    with pytest.raises(ConfigError, match=r"screen.settings: a screen needs the settings"):
        check_config(_race_config(enabled=True), "test.yaml")
    with pytest.raises(ConfigError, match=r"screen.max_error: 0.9 is greater than the maximum of 0.5"):
        check_config(_race_config(max_error=0.9), "test.yaml")
    with pytest.raises(ConfigError, match=r"screen: unknown key\(s\) \['margin'\]; allowed: \['check', 'enabled', "):
        check_config(_race_config(margin=0.1), "test.yaml")
    # the check run: set-aside configurations launched once anyway; it needs a screen
    assert ScreenSettings.from_config(_race_config(enabled=True, settings=SETTINGS, check=True)).check
    check_config(_race_config(enabled=True, settings=SETTINGS, check=True), "test.yaml")
    with pytest.raises(ConfigError, match=r"screen.check: a check run launches what the screen set aside, and no "
                                          r"screen runs \(screen.enabled is false\); allowed: screen.enabled: true"):
        check_config(_race_config(check=True), "test.yaml")


def test_a_setting_no_configuration_varies_is_refused_with_those_it_could_be():
    from specsweep.plan.screen import unvaried_settings

    config = {"screen": {"enabled": True, "settings": ["server_args.all-reduce-backend", "env.NCCL_ALGOO"]}}
    [problem] = unvaried_settings(config, PLANS)
    assert problem.startswith("screen.settings[1]: 'env.NCCL_ALGOO' takes one value in every configuration")
    assert "allowed: a setting the configurations vary: ['env.SPECSWEEP_TEST_STEP_SLOWDOWN', " \
           "'server_args.all-reduce-backend', 'server_args.speculative-algorithm']" in problem
    assert unvaried_settings({"screen": {"enabled": False, "settings": ["env.X"]}}, PLANS) == []
