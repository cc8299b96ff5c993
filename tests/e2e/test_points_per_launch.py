"""One server job measures several workload points after one readiness wait (the real reference engine)."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from specsweep.files import read_jsonl
from specsweep.plan.config import check_config
from specsweep.plan.resolve import resolve_plans
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.lock import LockSettings
from specsweep.testing.workflow import REPO

pytestmark = pytest.mark.slow

SMALL = {"num_prompts": 3, "output_len": 12, "repeats": 2,
         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 2}}


def _plan(points: list[dict]) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["defaults"]["workload"].update(SMALL)
    config["configurations"]["nospec"]["points"] = points
    plan = resolve_plans(check_config(config, "config.yaml"))["nospec"]
    return plan


def _paths(tmp_path) -> JobPaths:
    return JobPaths(*(tmp_path / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl",
                                              "outcome.json")))


def _host(tmp_path) -> JobHost:
    """This test's own lock directory (other checkouts' tests may hold the default one)."""
    return JobHost(lock=LockSettings(tmp_path / "locks", wait_s=600), workdir=tmp_path, guard_interval_s=0.5)


def test_points_share_one_launch_and_one_readiness_wait(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the model path in the plan is relative to the repository
    plan = _plan([{"concurrency": 1}, {"concurrency": 2}])
    paths, log = _paths(tmp_path), io.StringIO()
    outcome = run_config(plan, paths, None, log, host=_host(tmp_path), launch_id="2")
    assert outcome["status"] == "ok", (outcome, paths.server_log.read_text()[-2000:])
    assert outcome["launch"] == "2" and list(outcome["points"]) == ["c1", "c2"]
    assert all(p["status"] == "ok" and p["warmup"]["requests"] >= 1 for p in outcome["points"].values())
    text = log.getvalue()
    assert text.count("ready after") == 1 and text.count("launching nospec") == 1
    assert paths.server_log.read_text().count("starting 2 rank(s)") == 1, "one server process for both points"
    launch = json.loads(paths.launch.read_text())
    assert launch["points"] == ["c1", "c2"] and launch["launch"] == "2"
    assert launch["provenance"]["env"]["SPECSWEEP_LAUNCH"] == "2"  # the server knows its launch
    measured = read_jsonl(paths.requests)
    by_point = {p: [r for r in measured if r["point"] == p] for p in ("c1", "c2")}
    assert [len(v) for v in by_point.values()] == [6, 6]
    assert {r["run_id"] for r in measured} == {outcome["run_id"]} == {launch["run_id"]}, "one run id per launch"
    assert len({r["request_id"] for r in measured}) == len(measured), "request ids stay unique across points"
    assert max(r["end_ns"] for r in by_point["c1"]) < min(r["send_ns"] for r in by_point["c2"]), "points run in order"
    assert {r["point"] for r in read_jsonl(paths.warmup)} == {"c1", "c2"}
    assert not (tmp_path / ".points").exists(), "the per-point files are joined and removed"


def test_a_failed_point_is_a_result_and_the_next_point_still_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    plan = _plan([{"name": "hopeless", "concurrency": 1, "request_timeout_s": 0.001}, {"concurrency": 2}])
    paths = _paths(tmp_path)
    outcome = run_config(plan, paths, None, io.StringIO(), host=_host(tmp_path))
    assert outcome["points"]["hopeless"]["status"] == "failed"
    assert outcome["points"]["hopeless"]["stage"] == "warmup"
    assert outcome["points"]["c2"]["status"] == "ok"
    assert outcome["status"] == "failed" and outcome["detail"].startswith("1 of 2 points failed")
    assert {r["point"] for r in read_jsonl(paths.requests)} == {"c2"}
