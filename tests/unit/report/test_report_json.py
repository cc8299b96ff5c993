"""results/report.json is the answer, computed once; report.md, summary.csv and the closing summary render it.

The fixture is a sweep of synthetic launches of known speed (specsweep.testing.reports): ``fast``
(2 tokens per 12 ms chunk) beats ``base`` (1 per 12 ms); ``slow`` (2 per 30 ms) is slower.
"""

from __future__ import annotations

import ast
import csv
import json
import shutil
from pathlib import Path

import pytest

from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.summary import build_summary
from specsweep.analysis.sweep import REPORT_FORMAT_VERSION, analyze_sweep, load_report, write_report
from specsweep.report.render import render_report
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, launches_summary, render_summaries, sequential_records
from specsweep.testing.workflow import REPO
from specsweep.workflow.closing import closing_lines

#: What report.json holds at its top level (docs/report-json.md describes each).
TOP_LEVEL = ("format_version", "baseline", "method", "smallest_effect", "verdicts", "controls", "external",
             "launches", "deploy", "rows", "curves", "budget", "grids", "pairwise", "failures", "warnings",
             "burn_in", "design", "race")


def _summary(name: str, gap_ms: float, per_chunk: int, seed: int) -> dict:
    spec = per_chunk > 1
    args = {"speculative-algorithm": "EAGLE3"} if spec else {}
    plan = {"name": name, "engine": "reference", "image": None, "workload": WORKLOAD, "server_args": args,
            "facts": engine_facts("reference", args)}
    recs = sequential_records(name, gap_ms, per_chunk, spec, seed, jitter=0.02)
    return build_summary(plan, None, OK, [], recs, None)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results")
    summaries = [_summary("base", 12.0, 1, 1), _summary("fast", 12.0, 2, 2), _summary("slow", 30.0, 2, 3)]
    render_summaries(summaries, "base", out / "summary.csv", out / "report.md", out / "plots",
                     sweep={"aa_control": True})
    return out


def _rerender(results: Path, out: Path, edit) -> Path:
    """A copy of ``results`` whose report.json went through ``edit``, and every view rendered again from it."""
    shutil.copytree(results, out)
    report = load_report(out / "report.json")
    edit(report)
    write_report(out / "report.json", report)
    render_report(load_report(out / "report.json"), out / "summary.csv", out / "report.md", out / "plots")
    return out


def test_report_json_is_versioned_and_holds_every_part_of_the_answer(results):
    report = json.loads((results / "report.json").read_text())
    assert tuple(report) == TOP_LEVEL
    assert report["format_version"] == REPORT_FORMAT_VERSION
    assert report["burn_in"] is None and report["design"] is None  # room for their records
    assert report["race"] is None  # no race ran
    assert report["baseline"] == {"name": "base", "row": ["base", "default"]}
    assert report["method"]["verdict"].startswith("two-way additive model")
    [rule] = report["verdicts"]
    assert rule["noise"]["unit"] in ("launch", "round")
    [fast] = [r for r in report["rows"] if r["config"] == "fast"]
    assert fast["verdict"] == "faster" and fast["base"] == ["base", "default"]
    assert report["deploy"]["points"][0]["deploy"]["config"] == "fast"


def test_a_verdict_changed_in_report_json_alone_reaches_report_md_and_the_closing_summary(results, tmp_path):
    before_md = (results / "report.md").read_text()
    assert "| fast | ok |" in before_md and "  faster: fast" in closing_lines(results)

    def slower(report: dict) -> None:
        [fast] = [r for r in report["rows"] if r["config"] == "fast"]
        fast["verdict"] = "slower"
        fast["comparisons"][PRIMARY_VERDICT]["verdict"] = "slower"

    out = _rerender(results, tmp_path / "results", slower)
    md = (out / "report.md").read_text()
    lines = [x for x in md.splitlines() if x.startswith("| fast | ok |")]
    assert len(lines) == 2  # the Verdicts table and the Results table
    for line in lines:
        decode_verdict = line.split(" | ")[3]  # config, status, decode tok/s, its verdict
        assert decode_verdict.startswith("slower (x"), line
    lines = closing_lines(out)
    assert "  faster: fast" not in lines
    [deploy] = [x for x in lines if x.startswith("On this host, ")]  # report.json's deploy, report.md's words
    assert deploy in md.replace("**", ""), (deploy, lines)
    assert any(x.startswith("Verdicts against the baseline: ") and "2 slower" in x for x in lines), lines
    [row] = [r for r in csv.DictReader((out / "summary.csv").open(newline="")) if r["config"] == "fast"]
    assert row["verdict"] == "slower"
    # Nothing else moved: the views differ from the first render only where the verdict is written.
    changed = {a for a, b in zip(before_md.splitlines(), md.splitlines()) if a != b}
    assert changed and all("fast" in a for a in changed)


def test_the_control_sentences_of_report_md_and_the_closing_summary_are_one_text(results, tmp_path):
    def called(report: dict) -> None:
        [point] = report["controls"]["aa"]["points"]
        point["result"] = {"first": "1", "control": "aa", "launch_medians": {"1": 100.0, "aa": 90.0},
                           "drift": -0.1, "comparison": {"verdict": "slower", "ratio": 0.9,
                                                         "ratio_ci": [0.85, 0.95], "threshold": 0.05}}
        point.update(called=True, launch_sd=0.02, drift_beyond_sd=True)

    out = _rerender(results, tmp_path / "results", called)
    [aa] = [x for x in closing_lines(out) if x.startswith("A/A control")]
    assert "CALLED slower" in aa and aa in (out / "report.md").read_text().replace("**", "")


def test_another_format_is_refused_with_the_file_named(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"format_version": REPORT_FORMAT_VERSION + 1}))
    with pytest.raises(ValueError, match=f"{path}: format_version {REPORT_FORMAT_VERSION + 1}"):
        load_report(path)


def test_a_report_of_an_older_format_is_refused_and_3_has_what_came_beside_it(results, tmp_path):
    """Format 2 had no launch host_wait_s, its launches.server_s counted the waits and its rows had no
    simulated_accept: those came without a version of their own in 3. Format 3's race counted the full design
    at the race's own degrees of freedom: 4 at the design's; a report of 2 or 3 is refused."""
    path = tmp_path / "report.json"
    write_report(path, analyze_sweep([launches_summary("nospec", 12.0, {"1": (0, 1.0), "2": (1, 1.0)}, 101)],
                                     "nospec"))
    report = load_report(path)
    assert report["format_version"] == REPORT_FORMAT_VERSION == 4  # 4: a race's full design at its own df
    assert {"host_wait_s", "median_server_s"} <= set(report["launches"])
    entries = report["launches"]["entries"]
    assert len(entries) == 2 and all({"host_wait_s", "server_s"} <= set(e) for e in entries)
    assert [r["simulated_accept"] for r in load_report(results / "report.json")["rows"]] == [None] * 3
    for version in (2, 3):
        old = tmp_path / f"report-{version}.json"
        old.write_text(json.dumps({**report, "format_version": version}))
        with pytest.raises(ValueError, match=f"format_version {version}, this specsweep reads 4; rerun"):
            load_report(old)


#: What a view must not do: judge, pool, test or model (analysis/ does, once, for report.json).
COMPUTING = {"compare", "pooled_noise", "holm_family", "holm", "launches_needed", "called_beyond", "detectable",
             "estimate_interval", "crossing", "crossing_interval", "config_rows", "compare_rows", "annotate",
             "own_crossover", "predicted_tok_s", "latency_budget_us", "missed_part", "aa_control", "analyze_sweep",
             "best_of_grids", "break_even_groups", "budget_points", "deploy", "break_even_accept_length"}


@pytest.mark.parametrize("path", sorted((REPO / "specsweep" / "report").glob("*.py")) +
                         [REPO / "specsweep" / "workflow" / "closing.py"], ids=lambda p: p.name)
def test_views_import_no_computation(path):
    found = [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specsweep.analysis")
             for alias in node.names if alias.name in COMPUTING]
    assert not found, f"{path.name} computes what report.json holds: {found}"


def test_the_html_captions_are_written_from_the_figure_registry_and_the_method():
    from specsweep.analysis.blocks import BLOCKED_METHOD
    from specsweep.report.captions import CAPTIONS, stale
    from specsweep.report.figures import FIGURES

    assert stale(REPO) == [], "run: python -m specsweep.report.captions"
    plots = (REPO / "report" / "plots.rst").read_text()
    for figure in FIGURES:
        assert f'snakemake.wildcards.figure == "{figure.key}"' in plots
    assert "geometric mean" in plots and "Student-t" in plots and "bootstrap confidence interval" not in plots
    summary = " ".join((REPO / "report" / "summary.rst").read_text().split())
    assert " ".join(BLOCKED_METHOD.split()) in summary and "bootstrap of the ratio" not in summary
    rule = (REPO / "rules" / "report.smk").read_text()
    assert all(f'caption="../report/{name}"' in rule for name in CAPTIONS if name != "workflow.rst")
    assert 'report: "report/workflow.rst"' in (REPO / "Snakefile").read_text()  # the first screen
