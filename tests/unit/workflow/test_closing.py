"""The closing summary onsuccess prints: a view of results/report.json, only after a run that wrote the report.

The fixture is a report this checkout renders from synthetic runs of known speed (specsweep.testing.reports):
``fast`` (2 tokens per 12 ms chunk) beats ``base`` (1 per 12 ms) and ``slow`` (2 per 30 ms); ``broken`` failed."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.analysis.summary import build_summary
from specsweep.engines.reference import STEP_SLOWDOWN_ENV
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records
from specsweep.workflow.closing import closing_lines, print_closing


def _summary(name: str, gap_ms: float, per_chunk: int, seed: int, outcome: dict = OK, env: dict | None = None
             ) -> dict:
    spec = per_chunk > 1
    args = {"speculative-algorithm": "EAGLE3"} if spec else {}
    plan = {"name": name, "engine": "reference", "image": None, "workload": WORKLOAD, "server_args": args,
            "facts": engine_facts("reference", args), "env": env or {}}
    recs = sequential_records(name, gap_ms, per_chunk, spec, seed, jitter=0.02) if outcome is OK else []
    return build_summary(plan, None, outcome, [], recs, None)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results")
    failed = {"status": "failed", "stage": "launch", "reason": "server_exited", "detail": "exit 1", "log_tail": "x"}
    summaries = [_summary("base", 12.0, 1, 1), _summary("fast", 12.0, 2, 2), _summary("slow", 30.0, 2, 3),
                 _summary("broken", 12.0, 2, 4, failed)]
    render_summaries(summaries, "base", out / "summary.csv", out / "report.md", out / "plots",
                  sweep={"aa_control": True})
    return out


def _deploy_lines(report_md: str) -> list[str]:
    return [x.removeprefix("- ").replace("**", "") for x in report_md.splitlines()
            if "deploy `" in x or x.startswith("**On this host") or "keep `" in x]


def test_the_lines_say_what_the_report_found(results):
    rows = list(csv.DictReader((results / "summary.csv").open(newline="")))
    lines = closing_lines(results)
    assert lines[0] == "4 configuration(s) at 1 point(s), baseline base."
    report = (results / "report.md").read_text().replace("**", "")
    controls = [x for x in lines if x.startswith(("A/A control", "Positive control"))]
    assert [x.split(":")[0] for x in controls] == ["A/A control", "Positive control"], lines
    assert all(x in report for x in controls)  # the report's own sentences
    # What to deploy: report.md's own line (report.json's deploy), right after the count
    [deploy] = _deploy_lines((results / "report.md").read_text())
    assert lines[1] == deploy and deploy.startswith("On this host, deploy `fast` (with speculation): "), lines
    counted = {r["verdict"] for r in rows if r["verdict"] != "baseline"}
    [verdicts] = [x for x in lines if x.startswith("Verdicts against the baseline: ")]
    assert all(v in verdicts for v in counted), (counted, verdicts)
    assert "  failed: broken" in lines
    assert lines[-1].startswith(f"Report: {results / 'report.md'} ") and "snakemake --report" in lines[-1]


def test_each_grid_winner_from_report_json(results, tmp_path):
    shutil.copytree(results, tmp_path / "results")
    path = tmp_path / "results" / "report.json"
    report = json.loads(path.read_text())
    report["grids"] = [
        {"grid": "eagle3", "winner": {"config": "eagle3-shm"}, "why_none": None, "compared_at": {},
         "values": {"server_args.all-reduce-backend": "shm"}},
        {"grid": "other", "winner": None, "why_none": "no member ended ok", "compared_at": {}, "values": {}}]
    path.write_text(json.dumps(report))
    lines = closing_lines(tmp_path / "results", [tmp_path / "eagle3.env", tmp_path / "eagle3.json"])
    assert f"Best of grid eagle3: eagle3-shm (all-reduce-backend=shm): {tmp_path / 'eagle3.env'}" in lines
    assert "Best of grid other: none (no member ended ok)" in lines


def test_printed_only_when_this_run_wrote_the_report(results, tmp_path):
    out = io.StringIO()
    mtime = (results / "report.md").stat().st_mtime
    assert not print_closing(results, mtime + 10, [], out) and out.getvalue() == ""  # an older report: silence
    assert print_closing(results, mtime - 10, [], out)
    assert out.getvalue().startswith("\nspecsweep summary:\n  4 configuration(s) at 1 point(s), baseline base.\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "report.md").write_text("# specsweep report\n")  # no report.json: nothing to say
    assert closing_lines(empty) == [] and not print_closing(empty, 0.0, [], io.StringIO())
    assert not print_closing(tmp_path / "none", 0.0, [], io.StringIO())


def test_a_control_faster_than_everything_is_never_named(tmp_path):
    """A positive control (a test-only slowdown in its environment) measured fastest by noise, here made
    fastest outright: the closing summary names report.md's deploy answer, not the control, at every point."""
    slowed = {STEP_SLOWDOWN_ENV: "0.1"}
    summaries = [_summary("base", 12.0, 1, 1), _summary("fast", 12.0, 2, 2),
                 _summary("fast-slow10", 8.0, 2, 5, env=slowed)]
    render_summaries(summaries, "base", tmp_path / "summary.csv", tmp_path / "report.md", tmp_path / "plots",
                     sweep={"aa_control": True})
    rows = {r["config"]: r for r in csv.DictReader((tmp_path / "summary.csv").open(newline=""))}
    assert float(rows["fast-slow10"][BASELINE_TOK_S]) > float(rows["fast"][BASELINE_TOK_S])  # fastest measured
    lines = closing_lines(tmp_path)
    assert not any("fast-slow10" in x and ("Fastest" in x or "deploy" in x) for x in lines), lines
    deploy = _deploy_lines((tmp_path / "report.md").read_text())
    assert deploy and all(x in lines for x in deploy), (deploy, lines)
    assert "deploy `fast`" in deploy[0]


def test_a_report_json_that_analyze_sweep_did_not_write_says_nothing(tmp_path):
    """An empty object (what a ``snakemake --touch`` timing leaves: benchmarks/bench_dag.py) is no report."""
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "report.md").write_text("")
    assert closing_lines(tmp_path) == []
    out = io.StringIO()
    assert not print_closing(tmp_path, 0.0, [], out) and out.getvalue() == ""
