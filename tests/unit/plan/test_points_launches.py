"""Workload points of one launch, and launches as the unit of replication (their order)."""

from __future__ import annotations

import pytest
import yaml

from specsweep.contracts.layout import CONTROL
from specsweep.files import canonical_json
from specsweep.plan.config import ConfigError, check_config, check_sweep
from specsweep.plan.points import plan_points, point_name
from specsweep.plan.resolve import resolve_labels, resolve_plans, resolve_sweep
from specsweep.plan.rounds import planned_order, priority_in_round, round_order
from specsweep.testing.datasets import write_sharegpt
from specsweep.testing.workflow import REPO
from specsweep.workflow import inputs, round_inputs


def _config() -> dict:
    """The default config without its positive control and its launch count: the tests below count
    configurations and launches of their own (tests/unit/plan/test_controls.py has the control's)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.pop("positive_control")
    config["defaults"].pop("launches")
    return config


def test_points_resolve_into_the_plan_with_names_and_merged_workloads():
    config = _config()
    config["defaults"]["points"] = [{"concurrency": 1}, {"concurrency": 4, "input_len": 64},
                                    {"name": "warm", "warmup": {"window": 4}}]
    plans = resolve_plans(check_config(config, "x"))
    points = plans["eagle3-shm"]["points"]
    assert [p["name"] for p in points] == ["c1", "c4-in64", "warm"]
    assert points[1]["workload"]["concurrency"] == 4 and points[1]["workload"]["input_len"] == 64
    assert points[1]["workload"]["num_prompts"] == 8  # the rest from the configuration's workload
    assert points[2]["workload"]["warmup"] == {"window": 4, "tolerance": 0.15, "min_windows": 2, "max_requests": 8}
    assert plans["eagle3-shm"]["workload"]["concurrency"] == 1  # the base workload stays


def test_a_configuration_without_points_has_one_default_point_and_no_points_key():
    plan = resolve_plans(check_config(_config(), "x"))["nospec"]
    assert "points" not in plan, "plans without points keep their bytes (pinned plans)"
    assert plan_points(plan) == [{"name": "default", "workload": plan["workload"]}]


def test_changing_one_point_changes_the_plan_of_its_configuration_only():
    config = _config()
    config["configurations"]["eagle3-shm"]["points"] = [{"concurrency": 1}, {"concurrency": 2}]
    before = {k: canonical_json(v) for k, v in resolve_plans(check_config(config, "x")).items()}
    config["configurations"]["eagle3-shm"]["points"][1] = {"concurrency": 3}
    after = {k: canonical_json(v) for k, v in resolve_plans(check_config(config, "x")).items()}
    assert [k for k in before if before[k] != after[k]] == ["eagle3-shm"]


def test_point_names_must_be_distinct_and_not_default():
    config = _config()
    config["configurations"]["nospec"]["points"] = [{"concurrency": 2}, {"concurrency": 2, "seed": 1, "name": "c2"}]
    with pytest.raises(ValueError) as info:
        resolve_sweep(check_config(config, "x"))
    assert "configurations.nospec.points[1]: point name 'c2' is also points[0]" in str(info.value)
    config["configurations"]["nospec"]["points"] = [{"concurrency": 2, "name": "default"}]
    with pytest.raises(ValueError, match="reserved"):
        resolve_sweep(check_config(config, "x"))


def test_unknown_point_key_is_a_schema_error_with_the_allowed_keys():
    config = _config()
    config["configurations"]["nospec"]["points"] = [{"concurency": 2}]
    with pytest.raises(ConfigError) as info:
        check_config(config, "x.yaml")
    assert "configurations.nospec.points[0]" in str(info.value) and "'concurrency'" in str(info.value)


def test_point_name_tokens():
    assert point_name({"concurrency": 8}) == "c8"
    assert point_name({"request_rate": 2.5, "output_len": 256}) == "out256-r2p5"


def test_launches_are_not_in_the_plan():
    config = _config()
    config["configurations"]["eagle3-shm"]["launches"] = 3
    plans, launches = resolve_sweep(check_config(config, "x"))
    assert launches == {"eagle3-gloo": 1, "eagle3-shm": 3, "nospec": 1}
    assert canonical_json(plans) == canonical_json(resolve_plans(check_config(_config(), "x")))


def test_launch_order_runs_round_by_round_with_the_control_in_the_last_planned_round():
    order = planned_order({"a": 2, "b": 2, "base": 2, "c": 1}, "base", aa_control=True, seed=0)
    assert set(order[:5]) == {("base", "1"), ("a", "1"), ("b", "1"), ("c", "1"), ("base", CONTROL)}
    assert set(order[5:]) == {("base", "2"), ("a", "2"), ("b", "2")}
    assert planned_order({"a": 1}, None, aa_control=True, seed=0) == [("a", "1")], "no baseline, no control"
    assert ("base", CONTROL) not in planned_order({"base": 1}, "base", aa_control=False, seed=0)
    assert inputs.schedule_of(planned_order({"a": 2, "base": 1}, "base", True, 0), ["a", "base"]) == \
        {"a": ["1", "2"], "base": ["1", CONTROL]}


def test_priorities_follow_the_round_order_strictly_and_stay_below_preflight():
    members = [(f"c{i:03d}", "1") for i in range(500)]
    order = round_order(members, 0, 1)
    values = [priority_in_round(order, c, lid) for c, lid in order]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert 0 < min(values) and max(values) < 100  # preflight_config and resolve_plan have priority 100


def test_workflow_inputs_for_launches():
    config = {"baseline": "base", "rounds": {"seed": 1}}
    rounds = [[("a", "1"), ("base", "1")], [("a", "2"), ("base", CONTROL)]]
    order = round_order(rounds[1], 1, 2)
    first, second = (round_inputs.launch_priority_in(rounds, config, c, lid, 2) for c, lid in order)
    assert first > second
    # every launch of round 1 before any of round 2 (the planned rounds' launch jobs exist at once)
    assert min(round_inputs.launch_priority_in(rounds, config, c, lid, 1) for c, lid in rounds[0]) > first
    with pytest.raises(SystemExit, match=r"^specsweep: configuration `a` has no launch-3: the loaded config plans "
                                         r"launch-1, launch-2 \("):
        round_inputs.launch_priority_in(rounds, config, "a", "3", 2)
    files = inputs.summary_inputs(inputs.schedule_of_rounds(rounds, ["a", "base"]), "base", {"base": "k1"})
    assert files["plan"] == ["results/base/plan.json"]
    assert files["requests"] == ["results/base/plans/k1/launch-1/requests.jsonl",
                                 "results/base/plans/k1/launch-aa/requests.jsonl"]


def test_empty_points_undo_the_points_set_under_defaults():
    config = _config()
    config["defaults"]["points"] = [{"concurrency": 1}, {"concurrency": 2}]
    config["configurations"]["eagle3-gloo"]["points"] = []  # eagle3-shm extends eagle3-gloo
    plans = resolve_plans(check_config(config, "x"))
    assert [p["name"] for p in plans["nospec"]["points"]] == ["c1", "c2"]
    plain = resolve_plans(check_config(_config(), "x"))
    for name in ("eagle3-gloo", "eagle3-shm"):  # [] is inherited through extends, like any list
        assert "points" not in plans[name], "points: [] is one default point, as without points"
        assert canonical_json(plans[name]) == canonical_json(plain[name])


# ------------------------------------------------------------ points x datasets


def _dataset_config(path: str) -> dict:
    config = _config()
    config["defaults"]["workload"]["dataset"] = {"format": "sharegpt", "path": path}
    return config


def test_each_point_selects_its_own_prompts_and_the_benchmark_reads_every_selection(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    data = write_sharegpt(tmp_path / "s.json", 40)
    config = _dataset_config(str(data))
    config["configurations"]["nospec"]["points"] = [{"concurrency": 1}, {"concurrency": 2},
                                                    {"input_len": 64, "name": "long"}]
    plan = resolve_plans(check_config(config, "x"))["nospec"]
    by = {p["name"]: p for p in plan["points"]}
    assert by["c1"]["prompts"] == by["c2"]["prompts"] == plan["prompts"], "the same selection settings: same prompts"
    assert by["long"]["prompts"]["sha256"] != plan["prompts"]["sha256"], "a point with other lengths selects anew"
    assert by["long"]["workload"]["dataset"]["format"] == "sharegpt"
    assert inputs.prompts_input({"nospec": plan}, "nospec") == sorted({plan["prompts"]["file"],
                                                                      by["long"]["prompts"]["file"]})


def test_random_points_keep_only_the_dataset_format(tmp_path):
    config = _config()
    config["configurations"]["nospec"]["points"] = [{"name": "p", "dataset": {"min_input_len": 9}}]
    [point] = resolve_plans(check_config(config, "x"))["nospec"]["points"]
    assert point["prompts"] is None and point["workload"]["dataset"] == {"format": "random"}
    assert inputs.prompts_input({"nospec": {"points": [point], "prompts": None}}, "nospec") == []


def test_a_point_whose_dataset_cannot_be_used_is_a_config_error_naming_the_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = _config()
    config["configurations"]["nospec"]["points"] = [{"concurrency": 1},
                                                    {"name": "missing", "dataset": {"format": "jsonl",
                                                                                    "path": str(tmp_path / "no")}}]
    with pytest.raises(ConfigError) as info:
        resolve_sweep(check_config(config, "x.yaml"), "x.yaml")
    assert "x.yaml" in str(info.value) and "configurations.nospec.workload.dataset" in str(info.value)
    assert "no such file" in str(info.value)


# ------------------------------------------------------------ launches


def test_launches_under_defaults_are_inherited_and_overridden():
    config = _config()
    config["defaults"]["launches"] = 2
    config["configurations"]["eagle3-gloo"]["launches"] = 3  # eagle3-shm extends eagle3-gloo
    _, launches = resolve_sweep(check_config(config, "x"))
    assert launches == {"nospec": 2, "eagle3-gloo": 3, "eagle3-shm": 3}
    order = inputs.launch_order(config, launches)
    assert set(order[:4]) == {("nospec", "1"), ("eagle3-gloo", "1"), ("eagle3-shm", "1"), ("nospec", CONTROL)}
    assert ("nospec", CONTROL) in order[:4] and order.count(("eagle3-shm", "3")) == 1
    assert ("nospec", "3") not in order


def test_zero_launches_is_a_schema_error():
    config = _config()
    config["configurations"]["nospec"]["launches"] = 0
    with pytest.raises(ConfigError, match=r"configurations\.nospec\.launches"):
        check_config(config, "x.yaml")


def test_aa_control_off_or_without_a_baseline_adds_no_launch():
    config = _config()
    config["aa_control"] = False
    _, launches = resolve_sweep(check_config(config, "x"))
    assert (config["baseline"], CONTROL) not in inputs.launch_order(config, launches)
    config = _config()
    config["baseline"] = None
    _, launches = resolve_sweep(check_config(config, "x"))
    assert all(lid != CONTROL for _, lid in inputs.launch_order(config, launches))


def test_summary_inputs_name_every_file_of_every_launch_the_nccl_directories_included():
    config = _config()
    config["configurations"]["eagle3-shm"]["launches"] = 2
    plans, launches = resolve_sweep(check_config(config, "x"))
    keys = inputs.plan_keys(plans)
    assert keys["nospec"] == inputs.plan_key(plans["nospec"]) != keys["eagle3-shm"]
    nospec, shm_dir = (f"results/{n}/plans/{keys[n]}" for n in ("nospec", "eagle3-shm"))
    order = inputs.launch_order(config, launches)
    files = inputs.summary_inputs(inputs.schedule_of(order, sorted(launches)), "nospec", keys)
    assert files["plan"] == ["results/nospec/plan.json"]  # the current plan: a copy of the stored one
    assert files["outcome"] == [f"{nospec}/launch-1/outcome.json", f"{nospec}/launch-aa/outcome.json"]
    assert files["nccl_logs"] == [f"{nospec}/launch-1/nccl", f"{nospec}/launch-aa/nccl"]
    shm = inputs.summary_inputs(inputs.schedule_of(order, sorted(launches)), "eagle3-shm", keys)
    assert shm["requests"] == [f"{shm_dir}/launch-1/requests.jsonl", f"{shm_dir}/launch-2/requests.jsonl"]
    assert set(shm) == {"plan", *inputs.LAUNCH_FILES}
    # The agreement check compares with the baseline's first launch (none for the baseline itself).
    assert inputs.baseline_inputs(config, "eagle3-shm", keys) == {
        "baseline_plan": "results/nospec/plan.json", "baseline_requests": f"{nospec}/launch-1/requests.jsonl"}
    assert inputs.baseline_inputs(config, "nospec", keys) == {}


def test_a_summary_declares_each_launchs_outcome_and_reads_every_file_of_it():
    """summarize_config declares the plan and each launch's outcome.json (written last by the launch), and reads
    back from them exactly the files summary_inputs names, the baseline's plan and requests included."""
    config = _config()
    config["configurations"]["eagle3-shm"]["launches"] = 2
    plans, launches = resolve_sweep(check_config(config, "x"))
    keys = inputs.plan_keys(plans)
    schedule = inputs.schedule_of(inputs.launch_order(config, launches), sorted(launches))
    shm_dir = f"results/eagle3-shm/plans/{keys['eagle3-shm']}"
    declared = inputs.summary_edges(schedule, "eagle3-shm", keys) | inputs.baseline_edges(config, "eagle3-shm", keys)
    assert declared == {"plan": ["results/eagle3-shm/plan.json"],
                        "outcome": [f"{shm_dir}/launch-1/outcome.json", f"{shm_dir}/launch-2/outcome.json"],
                        "baseline_plan": "results/nospec/plan.json",
                        "baseline_outcome": f"results/nospec/plans/{keys['nospec']}/launch-1/outcome.json"}
    for name in sorted(plans):
        declared = inputs.summary_edges(schedule, name, keys) | inputs.baseline_edges(config, name, keys)
        read = inputs.summary_inputs(schedule, name, keys) | inputs.baseline_inputs(config, name, keys)
        assert inputs.launch_read_set(declared) == read
    # one launch: Snakemake passes a str, not a list of one
    one = inputs.launch_read_set({"plan": "results/x/plan.json", "outcome": "results/x/plans/k/launch-1/outcome.json"})
    assert one["requests"] == ["results/x/plans/k/launch-1/requests.jsonl"] and one["plan"] == ["results/x/plan.json"]


def test_labels_and_launches_stay_out_of_the_plan_of_a_grid_member():
    config = _config()
    config["configurations"]["eagle3-shm"].update(launches=2, expect="failure", description="d",
                                                  axes=[{"env.SGLANG_SIMULATE_ACC_LEN": ["1.5", "2.5"]}])
    sweep = check_sweep(config, "x")
    plans, launches = resolve_sweep(sweep.config)
    labels = resolve_labels(sweep.config)
    members = sorted(n for n in plans if n.startswith("eagle3-shm-"))
    assert len(members) == 2 and all(launches[n] == 2 for n in members)
    for name in members:
        assert not {"launches", "expect", "description", "axes", "points"} & set(plans[name])
        assert labels[name]["expect"] == "failure"


def test_a_rounds_judgement_reads_the_burn_in_as_one_path():
    """Round 1's judgement reads the burn-in's record: one path, so that the script gets a str (a list of
    one made ``snakemake.input.burn_in`` a Namedlist, which the judgement could not open)."""
    rounds = [[("a", "1"), ("base", "1")]]
    keys = {"a": "k1", "base": "k2"}
    assert round_inputs.judge_inputs(rounds, 1, True, keys)["burn_in"] == round_inputs.BURN_IN_RECORD_PATH
    assert "burn_in" not in round_inputs.judge_inputs(rounds, 1, False, keys)
    # and the current plans' launches, each by its outcome.json (written last: it stands for the launch's files)
    declared = round_inputs.judge_inputs(rounds, 1, False, keys)
    assert declared["outcome"] == [
        "results/a/plans/k1/launch-1/outcome.json", "results/base/plans/k2/launch-1/outcome.json"]
    assert set(declared) == {"plans", "outcome"}
