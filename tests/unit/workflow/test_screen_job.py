"""screen_grid (``workflow.screen``) on a real record: the four configurations of config/screen-cpu.yaml measured
on this project's CPU (docs/measurements/2026-12-06-cpu-forward-bench/run1: their summaries, and each launch's
micro-benchmark file standing for the screen's own run of that setting), screened as the checkpoint screens."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from specsweep.plan.config import load_config
from specsweep.plan.resolve import resolve_sweep
from specsweep.testing.doubles import engine_facts
from specsweep.testing.workflow import REPO
from specsweep.workflow import inputs, round_inputs
from specsweep.workflow.screen import latency_of, measured_rows, screen_grid

RECORD = REPO / "docs/measurements/2026-12-06-cpu-forward-bench/run1"


def _results(root: Path, names: list[str], keys: dict[str, str], measured: list[str]) -> None:
    """``measured``'s summaries under ``root/results`` and every configuration's micro-benchmark file. The record's
    plans are of format 4, before plans carried the engine's facts (what the cost model reads the TP size from):
    added here as the engine resolves them; today's plans of these configurations differ in nothing else."""
    for name in names:
        bench = root / round_inputs.bench_path(name, keys[name])
        bench.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RECORD / name / "allreduce_bench.json", bench)
    for name in measured:
        summary = json.loads((RECORD / name / "summary.json").read_text())
        for plan in [summary["plan"], *(p["plan"] for p in summary["points"])]:
            plan["facts"] = engine_facts("reference", plan["server_args"], plan["env"])
        # and its launch sections predate the host-wait split (format 8 gained host_wait_s and server_s later)
        for launch in summary["launches"]:
            launch.setdefault("host_wait_s", None)
            launch.setdefault("server_s", None)
        (root / "results" / name / "summary.json").write_text(json.dumps(summary))


@pytest.fixture(scope="module")
def grid() -> tuple[dict, dict, dict]:
    config = load_config(REPO / "config/screen-cpu.yaml")
    plans, _ = resolve_sweep(config, "config/screen-cpu.yaml")
    return config, plans, inputs.plan_keys(plans)


def test_the_measured_residuals_decide_and_the_slow_backend_is_set_aside(tmp_path, monkeypatch, grid):
    config, plans, keys = grid
    _results(tmp_path, sorted(plans), keys, ["eagle3-shm", "nospec-gloo", "nospec-shm"])
    monkeypatch.chdir(tmp_path)
    log = io.StringIO()
    got = screen_grid(round_inputs.screen_params(config, plans, keys), round_inputs.SCREEN_PATH, log)
    assert json.loads((tmp_path / round_inputs.SCREEN_PATH).read_text()) == got
    # the record's residuals (report.md of run1: +0.5 %, +8.2 %, +2.1 %): the largest is the margin
    assert got["validated"] and got["margin"] == pytest.approx(0.082, abs=0.002), got["error_from"]
    assert [e["config"] for e in got["error_from"]] == ["eagle3-shm", "nospec-gloo", "nospec-shm"]
    by = {p["config"]: p for p in got["predictions"]}
    # eagle3-gloo was not measured: its group's fixed part is eagle3-shm's, its latency its own (gloo, 1017 us)
    assert by["eagle3-gloo"]["measured_from"] == "eagle3-shm" and by["eagle3-gloo"]["latency_us"] == pytest.approx(
        latency_of(json.loads((RECORD / "eagle3-gloo" / "allreduce_bench.json").read_text())))
    assert got["best"] == "eagle3-shm"
    # predicted x3 slower (measured 58.7 against 194.6 tok/s in the record); nospec-gloo x6: both set aside;
    # nospec-shm (predicted 13 % slower, within (1 + m) / (1 - m) - 1 = 17.9 %) is kept, and it is the baseline
    assert got["set_aside"] == ["eagle3-gloo", "nospec-gloo"], got["predictions"]
    assert got["benches"] == 4 and "set aside eagle3-gloo, nospec-gloo; 4 micro-benchmark runs" in log.getvalue()


def test_with_nothing_measured_nothing_is_set_aside(tmp_path, monkeypatch, grid):
    config, plans, keys = grid
    _results(tmp_path, sorted(plans), keys, [])
    monkeypatch.chdir(tmp_path)
    got = screen_grid(round_inputs.screen_params(config, plans, keys), round_inputs.SCREEN_PATH, io.StringIO())
    assert not got["validated"] and got["set_aside"] == [] and "no configuration measured yet" in got["why"]
    assert all(p["latency_us"] for p in got["predictions"]), "the micro-benchmarks are read all the same"


def test_a_group_measured_under_another_name_counts(tmp_path, monkeypatch, grid):
    """A summary named ``earlier`` whose plan is eagle3-shm's (another config file's name for the same server)
    stands for the eagle3 group; one of a member's name but of another plan stands for none."""
    config, plans, keys = grid
    _results(tmp_path, sorted(plans), keys, ["eagle3-shm"])
    path = tmp_path / "results" / "eagle3-shm" / "summary.json"
    summary = json.loads(path.read_text())
    settings = ["server_args.all-reduce-backend"]
    group_keys = json.loads(round_inputs.screen_params(config, plans, keys))["group_keys"]
    assert measured_rows(tmp_path / "results", settings, group_keys)[1] == {"eagle3-gloo": "eagle3-shm"}
    stale = json.loads(path.read_text())
    stale["plan"]["workload"] = dict(stale["plan"]["workload"], output_len=32)
    path.write_text(json.dumps(stale))
    monkeypatch.chdir(tmp_path)
    got = screen_grid(round_inputs.screen_params(config, plans, keys), round_inputs.SCREEN_PATH, io.StringIO())
    assert got["margin"] is not None and not any(p["measured_from"] for p in got["predictions"]), \
        "its residual counts for the error on this host; its parts predict no group of other plans"
    summary["config"] = "earlier"
    for point in summary["points"]:
        point["config"] = "earlier"
    summary["plan"] = dict(plans["eagle3-shm"], name="earlier")
    (tmp_path / "results" / "earlier").mkdir()
    (tmp_path / "results" / "earlier" / "summary.json").write_text(json.dumps(summary))
    path.unlink()
    rows, sources = measured_rows(tmp_path / "results", settings, group_keys)
    assert sources == {"eagle3-gloo": "earlier"} and [r["config"] for r in rows] == ["earlier"]
    got = screen_grid(round_inputs.screen_params(config, plans, keys), round_inputs.SCREEN_PATH, io.StringIO())
    by = {p["config"]: p for p in got["predictions"]}
    assert by["eagle3-gloo"]["measured_from"] == by["eagle3-shm"]["measured_from"] == "earlier"
    assert by["nospec-shm"]["measured_from"] is None and got["set_aside"] == ["eagle3-gloo"]
