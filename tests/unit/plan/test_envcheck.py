"""``NCCL_*`` / ``SGLANG_*`` in a config's env: names and values checked as NCCL 2.30.7 and SGLang 0.5.23 read
them, at the key path the user wrote (plain env, defaults, grid axes), before anything runs."""

from __future__ import annotations

import json

import pytest
import yaml

from specsweep.contracts import acceptance
from specsweep.engines import nccl
from specsweep.engines.sglang import environ
from specsweep.plan.checks import acceptance_problems
from specsweep.plan.config import ConfigError, check_config, load_configs
from specsweep.plan.envcheck import env_problems
from specsweep.testing.workflow import REPO, plain_default_config

SHIPPED = [[REPO / "config.yaml"]] + [[p] for p in sorted((REPO / "config").glob("*.yaml"))]


def _config(env: dict | None = None, axes: list | None = None) -> dict:
    entry: dict = {"env": env or {}}
    if axes:
        entry["axes"] = axes
    return {"configurations": {"c": entry}}


@pytest.mark.parametrize("paths", SHIPPED, ids=lambda p: p[0].name)
def test_every_shipped_config_names_only_variables_their_software_reads(paths):
    """NCCL and GLOO settings the shipped configs use (NCCL_DEBUG_SUBSYS INIT,ENV, NCCL_P2P_LEVEL SYS, ...) pass."""
    config = yaml.safe_load(paths[0].read_text())
    assert env_problems(config) == []


@pytest.mark.parametrize("name, value, words", [
    # The names and values a new user mistyped, each with the key path and what is allowed.
    ("NCCL_ALOG", "Ring", ["configurations.c.env.NCCL_ALOG: NCCL_ALOG is not a variable NCCL 2.30.7 reads",
                           "did you mean NCCL_ALGO?"]),
    ("NCCL_ALGO", "Rnig", ["configurations.c.env.NCCL_ALGO: unknown element 'Rnig'", "src/graph/tuning.cc:55-130",
                           "allowed: [<collective>:][^]<algo>", "'Tree', 'Ring'"]),
    ("NCCL_PROTO", "LL129", ["configurations.c.env.NCCL_PROTO: unknown element 'LL129'", "['LL', 'LL128', 'Simple']"]),
    ("NCCL_ALGO", "allreduce:tree;ring", ["every entry but the first must name a collective ('ring')"]),
    ("NCCL_ALGO", "allreduse:tree", ["unknown collective 'allreduse'", "'AllReduce'"]),
    ("NCCL_BUFFSIZE", "16M", ["'16M' is read as 16 by NCCL 2.30.7 (strtoll stops at 'M'", "a decimal integer"]),
    ("NCCL_NVLS_ENABLE", "true", ["'true' is read as 0 by NCCL 2.30.7"]),
    ("NCCL_MAX_NCHANNELS", "010", ["'010' is read as 8"]),
    ("NCCL_P2P_LEVEL", "sys", ["'sys' is not a level", "['LOC', 'NVL'", "'SYS'] or a number"]),
    ("NCCL_P2P_DISABLE", "yes", ["disables P2P only for 1"]),
    ("NCCL_DEBUG", "INF", ["NCCL 2.30.7's parser refuses it and uses the default instead, silently",
                           "['VERSION', 'WARN', 'INFO', 'ABORT', 'TRACE']"]),
    ("NCCL_DEBUG_SUBSYS", "INIT,ENVV", ["a comma list of ['INIT', 'COLL'"]),
    ("SGLANG_SIMULAT_ACC_LEN", "2.0", ["is not a variable SGLang 0.5.23 reads",
                                       "did you mean SGLANG_SIMULATE_ACC_LEN"]),
    ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "on", [('"on" is not a valid boolean value: SGLang 0.5.23 warns and uses '
                                                "the default False instead"), "true, 1, yes, y (on)"]),
    ("SGLANG_SIMULATE_ACC_LEN", "2,0", [('"2,0" is not a valid float value: SGLang 0.5.23 warns and uses the '
                                         "default -1 instead")]),
    ("SGLANG_ENABLE_CP_V2", "1", ["SGLANG_ENABLE_CP_V2 is deprecated in SGLang 0.5.23"]),
])
def test_a_mistake_is_one_line_with_the_key_path_and_the_allowed_values(name, value, words):
    problems = env_problems(_config({name: value}))
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0], (word, problems[0])


@pytest.mark.parametrize("name, value", [
    ("NCCL_ALGO", "allreduce:tree"), ("NCCL_ALGO", "^Tree"), ("NCCL_ALGO", "ring;allreduce:tree,ring"),
    ("NCCL_ALGO", "RING"), ("NCCL_PROTO", "LL,Simple;allreduce:^LL"), ("NCCL_PROTO", "^LL128"),
    ("NCCL_BUFFSIZE", 16777216), ("NCCL_NTHREADS", "512"), ("NCCL_P2P_LEVEL", "PHB"), ("NCCL_P2P_LEVEL", "5"),
    ("NCCL_DEBUG", "info"), ("NCCL_DEBUG_SUBSYS", "^COLL"), ("NCCL_DEBUG_FILE", "nccl.%h.%p.log"),
    ("NCCL_TUNER_CONFIG_FILE", "tuner.conf"),  # read by NCCL's example tuner plugin (report/export.py)
    ("NCCL_BLOCKING_WAIT", "1"),  # torch's own spelling
    ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "Y"), ("SGLANG_SIMULATE_ACC_LEN", "2.5"),
    ("SGLANG_HEALTH_CHECK_TIMEOUT", "20"),  # read directly (http_server.py), not an environ.py field
    ("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_ALGO", None),  # not checked; null removes the key
])
def test_what_the_software_reads_passes(name, value):
    assert env_problems(_config({name: value})) == []


def test_grid_axes_and_defaults_are_checked_at_their_own_key_paths():
    config = {"defaults": {"env": {"NCCL_PROTO": "LL128x"}},
              "configurations": {"g": {"axes": [{"env.NCCL_ALGO": [None, "Ring", "Rnig"]},
                                                {"env.NCCL_ALOG": ["Ring"], "server_args.tp-size": [2]}]}}}
    problems = env_problems(config)
    assert [p.split(":")[0] for p in problems] == ["defaults.env.NCCL_PROTO",
                                                   "configurations.g.axes[0].env.NCCL_ALGO[2]",
                                                   "configurations.g.axes[1].env.NCCL_ALOG"]


def test_the_config_loader_refuses_them_naming_the_file(tmp_path):
    """What `snakemake -n` and `specsweep check` load (check_config): refused before any plan is made."""
    config = plain_default_config()
    config["configurations"]["eagle3-gloo"]["env"]["NCCL_ALOG"] = "Ring"
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as err:
        load_configs([path])
    assert err.value.source == str(path)
    assert err.value.problems[0].startswith("configurations.eagle3-gloo.env.NCCL_ALOG: ")
    sweep = yaml.safe_load((REPO / "config" / "sweep-cpu.yaml").read_text())
    axis = next(a for e in sweep["configurations"].values() for a in e.get("axes") or []
                if "env.SGLANG_SIMULATE_ACC_LEN" in a)
    axis["env.SGLANG_SIMULATE_ACC_LEN"][1] = "2,0"
    with pytest.raises(ConfigError) as err:
        check_config(sweep, "sweep.yaml")
    assert "env.SGLANG_SIMULATE_ACC_LEN[1]: " in err.value.problems[0] and "-1" in err.value.problems[0]


# --- the simulated accept length: one parser, SGLang's clamp refused ------------------------------


@pytest.mark.parametrize("value, steps, words", [
    ("4.5", 3, ["4.5 is outside [1, speculative-num-steps + 1 = 4]: SGLang clamps it to 4", "spec_utils.py:489-517",
                "not 4.5"]),
    ("0.5", 3, ["clamps it to 1"]),
    ("0.5", None, ["is below 1: SGLang clamps it to 1"]),
    ("nan", 3, ["never simulates"]),
    ("2,0", 3, ["SGLang warns and uses the default -1 (simulation off)"]),
])
def test_an_accept_length_that_would_not_run_as_written_is_refused(value, steps, words):
    why = acceptance.acc_len_problem(value, steps)
    assert why is not None
    for word in words:
        assert word in why, (word, why)


@pytest.mark.parametrize("value, steps", [("2.5", 3), ("4", 3), ("1", 3), ("-1", 3), ("0", None), ("7", None)])
def test_an_accept_length_that_runs_as_written_passes(value, steps):
    assert acceptance.acc_len_problem(value, steps) is None


def test_a_clamped_accept_length_is_refused_at_plan_time_with_the_value_that_would_run():
    plans = {"e": {"env": {"SGLANG_SIMULATE_ACC_LEN": "5"}, "server_args": {"speculative-num-steps": 3}},
             "ok": {"env": {"SGLANG_SIMULATE_ACC_LEN": "3.6"}, "server_args": {"speculative-num-steps": 3}}}
    problems = acceptance_problems(plans)
    assert len(problems) == 1 and problems[0].startswith("configurations.e.env.SGLANG_SIMULATE_ACC_LEN: 5 is outside")
    assert "clamps it to 4" in problems[0] and problems[0].endswith("allowed: a number in [1, 4], or <= 0 (off)")


def test_the_accept_length_has_one_home():
    """The engines read the variable and its value through contracts.acceptance into the plan's facts; the
    summary, the grids' curves and the answer read the facts (and the variable's name from the facts)."""
    from specsweep.analysis import grids, summary
    from specsweep.engines.argv import SIMULATE_ACC_LEN_SETTING, simulated_accept_length
    from specsweep.testing.doubles import engine_facts

    spec = {"speculative-algorithm": "EAGLE3"}
    assert SIMULATE_ACC_LEN_SETTING == f"env.{acceptance.SIMULATE_ACC_LEN}"
    assert simulated_accept_length(spec, {"SGLANG_SIMULATE_ACC_LEN": "2,0"}) is None  # SGLang: off
    assert simulated_accept_length(spec, {"SGLANG_SIMULATE_ACC_LEN": "2.8"}) == 2.8
    for engine in ("reference", "sglang"):
        facts = engine_facts(engine, spec, {"SGLANG_SIMULATE_ACC_LEN": "2.8"})
        assert grids._acc_value({"plan": {"facts": facts}}) == 2.8
        assert summary._simulated({"facts": facts}, {"SGLANG_SIMULATE_ACC_LEN": "-1"}) is None
        assert summary._simulated({"facts": facts}, {"SGLANG_SIMULATE_ACC_LEN": "2,0"}) is None
        assert summary._simulated({"facts": facts}, {"SGLANG_SIMULATE_ACC_LEN": "2.8"}) == "SGLANG_SIMULATE_ACC_LEN=2.8"
    assert environ.table()["SGLANG_SIMULATE_ACC_LEN"]["type"] == "EnvFloat"


def test_the_variable_lists_say_where_they_come_from():
    nccl_data = json.loads(nccl.DATA.read_text())
    assert nccl_data["source"].startswith("NVIDIA/nccl v2.30.7-1 (commit 73cf112295c33aee2b895f329f592f2a9b4b0f97)")
    assert nccl.table()["NCCL_ALGO"]["at"] == "src/enqueue.cc:2055"
    sglang_data = json.loads(environ.DATA.read_text())
    assert sglang_data["source"].startswith("sglang 0.5.23 wheel")
    assert environ.table()["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == {
        "type": "EnvBool", "default": False, "at": "sglang/srt/environ.py:1539"}
