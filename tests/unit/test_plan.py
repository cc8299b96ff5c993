"""The typed plan (``contracts.plan.Plan``): every plan the shipped configs resolve to reads and writes back to
the same bytes as before the record existed, and a mapping that is no plan of this format is refused by name."""

from __future__ import annotations

import dataclasses
import io
import json
import os

import pytest

from specsweep.contracts.plan import PLAN_FORMAT_VERSION, Plan, PlanError, Point
from specsweep.files import canonical_json
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_sweep
from specsweep.records import DEFAULT_POINT
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO
from specsweep.workflow.jobs import write_plan

#: Plans with every optional key between them: points and profile (sweep, profile), url (external),
#: rdma present as null (the Kimi matrix), docker volumes.
CONFIGS = ["config.yaml", "config/sweep-cpu.yaml", "config/profile-cpu.yaml", "config/external.yaml",
           "config/kimi-k25-8gpu.yaml"]


@pytest.fixture(scope="module")
def shipped_plans() -> dict[str, dict]:
    here = os.getcwd()
    os.chdir(REPO)  # dataset and model paths are relative to the workflow
    try:
        plans: dict[str, dict] = {}
        for path in CONFIGS:
            found, _ = resolve_sweep(load_configs([REPO / path]), path, write_prompts=False)
            plans.update({f"{path}:{name}": plan for name, plan in found.items()})
        return plans
    finally:
        os.chdir(here)


def test_every_shipped_plan_reads_and_writes_back_unchanged(shipped_plans, tmp_path):
    keys = set()
    for where, plan in shipped_plans.items():
        typed = Plan.from_dict(plan)
        assert typed.to_dict() == plan, where
        assert canonical_json(Plan.from_json(canonical_json(plan)).to_dict()) == canonical_json(plan), where
        keys |= set(plan)
        # resolve_plan's file: the bytes it wrote before the typed record.
        out = tmp_path / "plan.json"
        write_plan(canonical_json(plan), str(out), io.StringIO())
        assert out.read_text() == json.dumps(plan, indent=2, sort_keys=True) + "\n", where
        assert Plan.load(out) == typed
    assert {"points", "profile", "url", "rdma", "volumes"} <= keys, "the configs no longer cover every optional key"


def test_a_mapping_that_is_no_plan_is_refused_by_name():
    with pytest.raises(PlanError, match=r"missing keys \['argv'\]"):
        Plan.from_dict({k: v for k, v in plan_dict().items() if k != "argv"})
    with pytest.raises(PlanError, match=r"unknown keys \['variant'\]"):
        Plan.from_dict(plan_dict(variant=["shm"]))  # a label, not part of the plan since format 3
    with pytest.raises(PlanError, match=f"format 3.*reads format {PLAN_FORMAT_VERSION}"):
        Plan.from_dict(plan_dict(format_version=3))


def test_a_plan_is_frozen_and_hands_out_copies():
    plan = Plan.from_dict(plan_dict(env={"A": "1"}, volumes=["a:/b"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.name = "other"  # type: ignore[misc]
    out = plan.to_dict()
    out["env"]["A"] = "2"
    out["volumes"].append("c:/d")
    assert plan.env == {"A": "1"} and plan.volumes == ["a:/b"]
    given = plan_dict(env={"A": "1"}, volumes=["a:/b"], workload={"concurrency": 1, "nested": {"k": [1]}})
    typed = Plan.from_dict(given)  # the mapping it was read from, changed after, changes nothing of it
    given["env"]["A"], given["volumes"][0], given["workload"]["nested"]["k"][0] = "2", "x:/y", 2
    assert (typed.env, typed.volumes, typed.workload["nested"]) == ({"A": "1"}, ["a:/b"], {"k": [1]})
    changed = plan.replace(env={"A": "3"}, volumes=["e:/f"])
    assert (changed.env, changed.volumes, plan.env, plan.volumes) == ({"A": "3"}, ["e:/f"], {"A": "1"}, ["a:/b"])


def test_the_measured_points_are_the_plans_or_its_one_workload():
    plan = Plan.from_dict(plan_dict(workload={"concurrency": 1}, prompts={"sha256": "x"}))
    assert plan.points is None and "points" not in plan.to_dict()
    assert plan.measured_points(DEFAULT_POINT) == (Point(DEFAULT_POINT, {"concurrency": 1}, {"sha256": "x"}),)
    with_points = Plan.from_dict(plan_dict(points=[{"name": "c2", "workload": {"concurrency": 2}, "prompts": None}]))
    assert [p.name for p in with_points.measured_points(DEFAULT_POINT)] == ["c2"]
    assert with_points.to_dict()["points"] == [{"name": "c2", "workload": {"concurrency": 2}, "prompts": None}]
