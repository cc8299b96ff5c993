"""The resolved plan: what is measured, canonical, and nothing else."""

import copy
import json

import yaml

from specsweep import HARNESS_VERSION
from specsweep.files import canonical_json
from specsweep.plan.config import check_config, load_config, load_configs
from specsweep.plan.resolve import builtin_defaults, label_findings, merged_entry, resolve_labels, resolve_plans
from specsweep.testing.workflow import REPO
from specsweep.workflow import inputs


def _config():
    return check_config(yaml.safe_load((REPO / "config.yaml").read_text()), "config.yaml")


def test_builtin_defaults_come_from_the_schema():
    d = builtin_defaults()
    assert d["engine"] == "reference" and d["runtime"] == "local" and d["host"] == "127.0.0.1"
    assert d["port"] is None and d["workload"]["concurrency"] == 1
    assert set(d["workload"]["warmup"]) == {"window", "tolerance", "min_windows", "max_requests"}


def test_extends_deep_merges_and_child_wins():
    cfg = _config()
    entry = merged_entry(cfg, "eagle3-shm")
    assert entry["server_args"]["speculative-algorithm"] == "EAGLE3"  # from eagle3-gloo
    assert entry["server_args"]["all-reduce-backend"] == "shm"  # own
    assert entry["server_args"]["tp-size"] == 2  # from defaults
    assert entry["env"]["SGLANG_SIMULATE_ACC_LEN"] == "2.5"


def test_golden_reference_argv():
    plan = resolve_plans(_config())["eagle3-shm"]
    assert plan["argv"] == [
        "python3", "-m", "specsweep.refengine",
        "--all-reduce-backend", "shm", "--device", "cpu", "--load-format", "dummy",
        "--model-path", "specsweep/refengine/configs/tiny", "--random-seed", "0",
        "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--speculative-num-steps", "3", "--tp-size", "2",
    ]
    assert plan["harness_version"] == HARNESS_VERSION
    assert plan["image"] is None and plan["runtime"] == "local"


def test_reordering_keys_changes_no_plan():
    cfg = _config()
    reordered = copy.deepcopy(cfg)
    reordered["configurations"] = dict(reversed(list(cfg["configurations"].items())))
    for entry in reordered["configurations"].values():
        if "server_args" in entry:
            entry["server_args"] = dict(reversed(list(entry["server_args"].items())))
    a, b = resolve_plans(cfg), resolve_plans(reordered)
    assert {k: canonical_json(v) for k, v in a.items()} == {k: canonical_json(v) for k, v in b.items()}


def test_editing_one_configuration_changes_only_its_plan_and_its_children():
    cfg = _config()
    before = {k: canonical_json(v) for k, v in resolve_plans(cfg).items()}
    cfg["configurations"]["eagle3-shm"]["server_args"]["tp-size"] = 1
    after = {k: canonical_json(v) for k, v in resolve_plans(cfg).items()}
    assert [k for k in before if before[k] != after[k]] == ["eagle3-shm", "eagle3-shm-slow10"]  # + its control


def test_description_is_not_part_of_the_plan():
    cfg = _config()
    before = canonical_json(resolve_plans(cfg)["nospec"])
    cfg["configurations"]["nospec"]["description"] = "something else"
    assert canonical_json(resolve_plans(cfg)["nospec"]) == before


def test_env_values_are_strings_and_null_removes():
    cfg = _config()
    cfg["defaults"]["env"]["NCCL_BUFFSIZE"] = 16777216
    cfg["configurations"]["nospec"]["env"] = {"OMP_NUM_THREADS": None}
    plans = resolve_plans(cfg)
    assert plans["nospec"]["env"] == {"NCCL_BUFFSIZE": "16777216"}
    assert plans["eagle3-gloo"]["env"]["NCCL_BUFFSIZE"] == "16777216"


def test_default_config_plans_are_byte_identical_to_the_pinned_ones():
    """A results/ made by earlier code must report 'Nothing to be done': its params are these plans."""
    pinned = json.loads((REPO / "tests/fixtures/plans/config.yaml.json").read_text())
    plans = resolve_plans(load_config(REPO / "config.yaml"))
    assert sorted(plans) == sorted(pinned)
    for name, plan in plans.items():
        assert canonical_json(plan) == canonical_json(pinned[name]), name


def test_labels_are_not_part_of_the_plan():
    """Relabelling a result (variant, expect, description) must never rerun its server."""
    cfg = _config()
    before = {k: canonical_json(v) for k, v in resolve_plans(cfg).items()}
    cfg["configurations"]["eagle3-shm"].update(variant=["all-reduce:gloo"], expect="failure", description="x",
                                               own_baseline="nospec")
    assert {k: canonical_json(v) for k, v in resolve_plans(cfg).items()} == before
    labels = resolve_labels(cfg)
    assert labels["eagle3-shm"] == {"description": "x", "expect": "failure", "expect_signature": [],
                                    "variant": ["all-reduce:gloo"], "own_baseline": "nospec"}
    # own_baseline is the configuration's own, not inherited (a child on another backend has another one)
    cfg["configurations"]["eagle3-gloo"]["own_baseline"] = "nospec"
    del cfg["configurations"]["eagle3-shm"]["own_baseline"]
    assert resolve_labels(cfg)["eagle3-shm"]["own_baseline"] is None
    assert labels["nospec"]["expect"] == "ok" and labels["nospec"]["variant"] == []


def test_labels_travel_to_the_summary_and_the_report_only():
    cfg = _config()
    labels = resolve_labels(cfg)
    names = sorted(cfg["configurations"])
    summary_before = inputs.summary_labels(labels, "eagle3-shm")
    report_before = inputs.report_params(cfg, labels, names)
    cfg["configurations"]["eagle3-shm"]["expect"] = "failure"
    relabelled = resolve_labels(cfg)
    # expect judges the summary's verdict (expected_failure), so it reruns the summary and the report
    assert inputs.summary_labels(relabelled, "eagle3-shm") != summary_before
    assert inputs.report_params(cfg, relabelled, names) != report_before
    cfg["configurations"]["eagle3-shm"]["own_baseline"] = "nospec"
    # own_baseline is read by the report only
    assert inputs.summary_labels(resolve_labels(cfg), "eagle3-shm") == inputs.summary_labels(relabelled, "eagle3-shm")
    assert "own_baselines" in inputs.report_params(cfg, resolve_labels(cfg), names)
    assert json.loads(inputs.report_params(cfg, relabelled, names))["expects"]["eagle3-shm"] == "failure"
    cfg["configurations"]["eagle3-shm"]["variant"] = ["all-reduce:gloo"]
    assert json.loads(inputs.summary_labels(resolve_labels(cfg), "eagle3-shm")) == {
        "expect": "failure", "expect_signature": [], "variant": ["all-reduce:gloo"]}


def test_label_checks_run_without_a_parser_and_name_the_configuration():
    cfg = load_configs([REPO / "config" / "kimi-k25-8gpu.yaml"])
    plans, labels = resolve_plans(cfg), resolve_labels(cfg)
    errors, _ = label_findings(plans, labels, cfg.get("images"))
    assert errors == []
    labels["mscclpp"] = dict(labels["mscclpp"], variant=["msccl-pp"])
    errors, _ = label_findings(plans, labels, cfg.get("images"))
    assert len(errors) == 1 and "configurations.mscclpp.variant: unknown variant 'msccl-pp'" in errors[0]
