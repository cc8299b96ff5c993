"""A sweep through the whole DAG on the real reference engine: launches, the A/A control, grids, points.

One pipeline run (module fixture) serves every test. Its baseline's A/A
control launch is slowed by the reference engine's test-only fault
(``SPECSWEEP_TEST_STEP_DELAY_S``: a fixed sleep per engine step in that launch
only), so that the same configuration launched twice differs a lot; two
other configurations differ by a smaller, also fixed, delay. The verdict must
not call their difference: the launch variance pooled over the sweep, the
A/A control's included, is larger than it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.rows import compare_rows, config_rows, explode_points
from specsweep.analysis.stats import compare, pooled_noise
from specsweep.contracts.summary import ConfigSummary
from specsweep.testing.workflow import beside_rounds, copy_workflow, plain_default_config, planned_jobs, run_pipeline

pytestmark = pytest.mark.slow

# per step, A/A control launch only: over twice the pair's, a launch effect ~20x slower than an undelayed step
# (~6 ms here); its 24 measured requests of 16 tokens are most of the pipeline's time.
CONTROL_DELAY_S = "0.12"
PAIR_DELAY_S = "0.05"  # per step, one of the pair, every launch: large against load noise


def sweep_config() -> dict:
    config = plain_default_config()
    config["defaults"]["workload"].update(
        num_prompts=6, output_len=16, repeats=2,
        warmup={"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 2})
    config["defaults"]["points"] = [{"concurrency": 1}, {"concurrency": 2}]
    nospec = config["configurations"]["nospec"]
    nospec["env"] = {"SPECSWEEP_TEST_STEP_DELAY_S": f"aa={CONTROL_DELAY_S}"}
    config["configurations"] = {
        "nospec": nospec,
        "again": {"description": "the baseline's settings, launched twice", "extends": "nospec", "launches": 2,
                  "env": {"SPECSWEEP_TEST_STEP_DELAY_S": None}},
        "same": {"description": "the baseline's settings, with and without a fixed delay", "extends": "nospec",
                 "axes": [{"env.SPECSWEEP_TEST_STEP_DELAY_S": ["0", PAIR_DELAY_S], "labels": ["d0", "d1"]}]},
    }
    return config


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return run_pipeline(copy_workflow(tmp_path_factory.mktemp("sweep")), sweep_config())


def _summaries(work: Path) -> list[ConfigSummary]:
    """Every summary.json, read as the stages read it (explode_points takes the typed records)."""
    return [ConfigSummary.load(p) for p in sorted((work / "results").glob("*/summary.json"))]


def test_launches_ran_round_by_round_in_each_rounds_seeded_order(sweep):
    launches = [json.loads(p.read_text()) for p in (sweep / "results").glob("*/plans/*/launch-*/launch.json")]
    ran = [(rec["plan_name"], rec["launch"]) for rec in sorted(launches, key=lambda r: r["started_at"])]
    plans = sorted((sweep / "results/rounds").glob("round-*/plan.json"), key=lambda p: int(p.parent.name[6:]))
    planned = [tuple(x) for p in plans for x in json.loads(p.read_text())["order"]]
    assert ran == planned
    assert set(ran[:5]) == {("nospec", "1"), ("again", "1"), ("same-d0", "1"), ("same-d1", "1"), ("nospec", "aa")}
    assert ran[5:] == [("again", "2")]
    report = (sweep / "results" / "report.md").read_text()
    assert "ran in the planned interleaved order" in report
    assert "Launches: 6 server launches of 4 configurations" in report


def test_each_launch_measures_every_point_after_one_readiness_wait(sweep):
    outcomes = sorted((sweep / "results").glob("*/plans/*/launch-*/outcome.json"))
    assert len(outcomes) == 6, outcomes  # every launch of the sweep
    for outcome_path in outcomes:
        outcome = json.loads(outcome_path.read_text())
        assert outcome["status"] == "ok" and list(outcome["points"]) == ["c1", "c2"], outcome_path
        log = (outcome_path.parent / "logs" / "benchmark_server.log").read_text()
        assert log.count("ready after") == 1
        points = {json.loads(line)["point"] for line in (outcome_path.parent / "requests.jsonl").open()}
        assert points == {"c1", "c2"}
    summary = json.loads((sweep / "results" / "again" / "summary.json").read_text())
    assert [p["point"] for p in summary["points"]] == ["c1", "c2"]
    assert [e["launch"] for e in summary["points"][0]["launches"]] == ["1", "2"]
    assert summary["points"][0]["metrics"]["counts"]["ok"] == 24  # 2 launches x 2 repeats x 6 prompts


def test_the_aa_control_is_reported_first_and_holds_back_a_smaller_difference(sweep):
    report = (sweep / "results" / "report.md").read_text()
    assert report.split("\n\n")[1].startswith("**On this host, ")  # what to deploy (or keep) comes first
    first = report.split("\n\n")[2]
    assert first.startswith("**Verdicts are on the decode rate, called when the 95 % interval of the ratio "
                            "excludes 1.**")
    rule = report.split("\n\n")[3]
    assert "- At point c1: the launch-to-launch variance pooled over 6 launches of 4 configurations" in rule
    rows, _ = config_rows(explode_points(_summaries(sweep)), "nospec")
    for point in ("c1", "c2"):
        by = {r["config"]: r for r in rows if r["point"] == point}
        aa = by["nospec"]["aa"]
        assert aa["control"] == "aa" and aa["drift"] < -0.25, aa  # the slowed control: a large launch effect
        assert f"A/A control at point {point}: nospec launched again at a random place of round 1" in report
        d0, d1 = by["same-d0"], by["same-d1"]
        assert d1["decode_rate"] < d0["decode_rate"]  # the delay is real
        held = compare_rows(d1, d0)
        assert held["verdict"] == "no significant difference", held  # within the launch effect the A/A showed
        assert held["units"] == [1, 1] and held["df"] == 2  # one launch each, judged by nospec's and again's
        # the slowed A/A control's launch effect is part of the variance the pair is judged by: without it
        # (the launches of `again` alone) the variance is smaller and the threshold narrower
        quiet = pooled_noise([by[n]["verdict_samples"][PRIMARY_VERDICT] for n in ("again", "same-d0", "same-d1")])
        assert quiet.var < d0["noise"][PRIMARY_VERDICT].var
        alone = compare(d1["verdict_samples"][PRIMARY_VERDICT], d0["verdict_samples"][PRIMARY_VERDICT], quiet)
        assert alone["units"] == [1, 1] and alone["ratio"] == pytest.approx(held["ratio"])
    assert "same-d0 @ c1 vs same-d1 @ c1: no significant difference" in report


def test_nothing_reruns_when_nothing_changed(sweep):
    assert planned_jobs(sweep) == []


def _edited(work: Path, mutate) -> None:
    config = yaml.safe_load((work / "config.yaml").read_text())
    mutate(config)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_editing_one_axis_value_reruns_only_its_configuration(sweep):
    original = (sweep / "config.yaml").read_text()
    try:
        _edited(sweep, lambda c: c["configurations"]["same"]["axes"][0]["env.SPECSWEEP_TEST_STEP_DELAY_S"]
                .__setitem__(1, "0.06"))
        assert beside_rounds(planned_jobs(sweep)) == sorted([
            ("resolve_plan", "same-d1", ""), ("preflight_config", "same-d1", ""), ("select_plan", "same-d1", ""),
            ("benchmark_server", "same-d1", "1"), ("summarize_config", "same-d1", ""),
            ("analyze_sweep", "", ""), ("render_report", "", "")])
        _edited(sweep, lambda c: c["configurations"]["same"]["axes"][0].update(
            {"env.SPECSWEEP_TEST_STEP_DELAY_S": ["0", PAIR_DELAY_S, "0.01"], "labels": ["d0", "d1", "d05"]}))
        assert beside_rounds(planned_jobs(sweep)) == sorted([
            ("resolve_plan", "same-d05", ""), ("preflight_config", "same-d05", ""), ("select_plan", "same-d05", ""),
            ("benchmark_server", "same-d05", "1"), ("summarize_config", "same-d05", ""),
            ("analyze_sweep", "", ""), ("render_report", "", "")])
    finally:
        (sweep / "config.yaml").write_text(original)


def test_one_more_launch_keeps_the_launches_already_measured(sweep):
    original = (sweep / "config.yaml").read_text()
    try:
        _edited(sweep, lambda c: c["configurations"]["again"].update(launches=3))
        assert beside_rounds(planned_jobs(sweep)) == sorted([
            ("benchmark_server", "again", "3"), ("summarize_config", "again", ""),
            ("analyze_sweep", "", ""), ("render_report", "", "")])
    finally:
        (sweep / "config.yaml").write_text(original)
