"""The cross-configuration report: table, verdicts, break-even, failed section, PNGs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from specsweep.analysis.rows import BREAK_EVEN_FORMULA as FORMULA
from specsweep.analysis.rows import config_rows
from specsweep.analysis.summary import BaselineRun, build_summary
from specsweep.report.figures import PLOT_FILES
from specsweep.report.plots import _label
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records


def records(run: str, gap_ms: float, tokens_per_chunk: int, spec: bool, seed: int) -> list[dict]:
    """Sequential requests of 33 tokens, chunks every ``gap_ms`` (+-2 %), with the engine's timing."""
    return sequential_records(run, gap_ms, tokens_per_chunk, spec, seed, jitter=0.02, timing=True)


def plan(name: str, spec: bool) -> dict:
    args = {"speculative-algorithm": "EAGLE3"} if spec else {}
    return {"name": name, "engine": "reference", "image": None, "server_args": args, "workload": WORKLOAD,
            "facts": engine_facts("reference", args)}


@pytest.fixture()
def summaries() -> list[dict]:
    base = build_summary(plan("base", False), None, OK, [], records("b", 12.0, 1, False, 1), None)
    fast = build_summary(plan("fast", True), None, OK, [], records("f", 12.0, 2, True, 2), None)  # 2 tok / 12 ms
    slow = build_summary(plan("slow", True), None, OK, [], records("s", 30.0, 2, True, 3), None)  # 2 tok / 30 ms
    broken = build_summary(plan("broken", True), None,
                           {"status": "failed", "stage": "launch", "reason": "server_exited",
                            "detail": "exit 1", "log_tail": "NCCL error: invalid usage"}, [], [], None)
    fb = build_summary(plan("fb", True), None, OK, [], records("x", 12.0, 2, True, 4),
                       {"fell_back": [{"variant": "all-reduce:custom", "line": "all-reduce backend: nccl"}]})
    return [slow, broken, fast, base, fb]


def test_rows_verdicts_and_break_even(summaries):
    rows, base = config_rows(summaries, "base")
    assert [r["config"] for r in rows][0] == "base" and base["config"] == "base"
    by = {r["config"]: r for r in rows}
    assert by["fast"]["verdict"] == "faster" and by["slow"]["verdict"] == "slower"
    assert by["broken"]["verdict"] == "failed"
    # base decodes at 1000/12 tok/s; slow cycles every 30 ms -> break-even 0.030 x 83.3 = 2.5 > accept 2
    assert by["base"]["decode_tok_s_median"] == pytest.approx(1000 / 12, rel=0.02)
    assert by["slow"]["break_even_accept_length"] == pytest.approx(0.030 * 1000 / 12, rel=0.03)
    assert by["slow"]["speculation_pays"] is False and by["fast"]["speculation_pays"] is True
    assert by["base"]["break_even_accept_length"] is None  # no speculation: no cycle


def test_no_baseline_gives_no_verdict(summaries):
    rows, base = config_rows(summaries, None)
    assert base is None and {r["verdict"] for r in rows} <= {"no baseline", "failed"}


def test_render_report(summaries, tmp_path: Path):
    csv_path, md_path, plots = tmp_path / "summary.csv", tmp_path / "report.md", tmp_path / "plots"
    render_summaries(summaries, "base", csv_path, md_path, plots)
    md = md_path.read_text()
    assert FORMULA in md
    assert "| fast | ok |" in md and "faster (x" in md
    assert "### broken: failed" in md and "server_exited" in md and "NCCL error: invalid usage" in md
    assert "### fb: fallback" in md and "all-reduce:custom" in md
    assert "Hyndman" in md and "bootstrap" in md
    rows = {r["config"]: r for r in csv.DictReader(csv_path.open())}
    assert rows["broken"]["tok_s_median"] == ""  # absent stays empty, never 0
    assert rows["base"]["accept_length"] == "" and float(rows["fast"]["accept_length"]) == pytest.approx(33 / 16)
    assert rows["slow"]["speculation_pays"] == "False"
    # A figure only where it has data: no accept-length axis here, so no break-even curve, and the
    # report says why instead of pointing at an empty figure.
    drawn = {p.name for p in plots.iterdir()}
    assert "break_even.png" not in drawn and "tok_s.png" in drawn
    for name in drawn:
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]" in md
    assert "![break_even.png]" not in md and "- break_even.png: no configurations that differ only in accept" in md


def test_render_report_with_nothing_to_plot(tmp_path: Path):
    broken = build_summary(plan("broken", True), None,
                           {"status": "failed", "stage": "launch", "reason": "x", "detail": "", "log_tail": None},
                           [], [], None)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "tok_s.png").write_bytes(b"an earlier render's figure")
    render_summaries([broken], "broken", tmp_path / "s.csv", tmp_path / "r.md", tmp_path / "p")
    # No placeholder figures, and none of an earlier render left standing for this one.
    assert (tmp_path / "p").is_dir() and list((tmp_path / "p").iterdir()) == []
    md = (tmp_path / "r.md").read_text()
    assert "![" not in md and all(f"- {name}: " in md for name in PLOT_FILES.values())


def test_known_failing_case_is_expected_only_with_its_own_signature(summaries, tmp_path: Path):
    """expect: failure counts as expected only when its own failure line is in the log; else a surprise."""
    failed = {"status": "failed", "stage": "launch", "reason": "server_exited", "detail": "exit 1",
              "log_tail": "NCCL WARN No algorithm/protocol available"}
    # `expect` and `expect_signature` are labels, not in the plan (plan.resolve.build_labels).
    known = {"expect": "failure", "expect_signature": ["nccl_no_algorithm"]}
    nccl_line = "h:1:1 [0] enqueue.cc:2063 (topoGetAlgoInfo) NCCL WARN No algorithm/protocol available for ..."
    tree = build_summary(plan("nccl-tree-bare", True), None, failed, [], [],
                         {"failures": [{"signature": "nccl_no_algorithm", "line": nccl_line}]}, labels=known)
    oom = build_summary(plan("tree-oom", True), None, dict(failed, log_tail="CUDA out of memory"), [], [],
                        {"failures": []}, labels=known)
    lucky = build_summary(plan("lucky", True), None, OK, [], records("l", 12.0, 2, True, 5), None,
                          labels={"expect": "failure", "expect_signature": ["nccl_no_algorithm"]})
    assert tree["expected_failure"]["expected"] is True and oom["expected_failure"]["expected"] is False
    # analyze_sweep_files passes each configuration's `expect` label from the report params.
    expects = {"nccl-tree-bare": "failure", "tree-oom": "failure", "lucky": "failure"}
    md_path, csv_path = tmp_path / "report.md", tmp_path / "summary.csv"
    render_summaries([*summaries, tree, oom, lucky], "base", csv_path, md_path, tmp_path / "plots",
                     sweep={"expects": expects})
    md = md_path.read_text()
    assert "### nccl-tree-bare: failed (expected: the known failure, nccl_no_algorithm in the log)" in md
    assert "### tree-oom: failed (SURPRISE failure: known-failing case, but its own signature (nccl_no_algorithm)" in md
    assert "### broken: failed\n" in md  # an unexpected failure is not marked expected
    assert "lucky: expected to fail (a known-failing case) but did not" in md
    rows = {r["config"]: r for r in csv.DictReader(csv_path.open())}
    assert rows["nccl-tree-bare"]["expect"] == "failure" and rows["base"]["expect"] == "ok"


def _with_outputs(recs: list[dict], outputs: list[list[int]], hist: list[int] | None = None) -> list[dict]:
    for i, r in enumerate(recs):
        r.update(prompt_key=f"p{r['repeat']}-{r['index']}", output_ids=outputs[i % len(outputs)],
                 spec_correct_drafts_histogram=hist)
    return recs


def test_agreement_and_acceptance_in_the_table_csv_and_plots(tmp_path: Path):
    """A configuration whose outputs differ is flagged and failed; a lossless one shows 100 %."""
    good = [[1] * 33, [2] * 33]
    base_recs = _with_outputs(records("b", 12.0, 1, False, 1), good)
    base_plan = plan("base", False)
    baseline = BaselineRun("base", base_plan, base_recs)
    lossless = build_summary(plan("lossless", True), None, OK, [],
                             _with_outputs(records("f", 12.0, 2, True, 2), good, [4, 4, 8]), None, baseline, 0.9)
    broken = build_summary(plan("corrupt", True), None, OK, [],
                           _with_outputs(records("c", 10.0, 2, True, 3), [[1] * 3 + [0] * 30, [9] * 33], [0, 16]),
                           None, baseline, 0.9)
    base = build_summary(base_plan, None, OK, [], base_recs, None, baseline, 0.9)
    csv_path, md_path, plots = tmp_path / "summary.csv", tmp_path / "report.md", tmp_path / "plots"
    render_summaries([base, lossless, broken], "base", csv_path, md_path, plots)
    md = md_path.read_text()
    assert "| lossless | ok |" in md and "| 100% (24/24), prefix 33.0 |" in md
    assert "| corrupt | failed |" in md and "**outputs differ from the baseline**: 0% (0/24), prefix 1.5" in md
    assert "- corrupt: **outputs differ from the baseline** 0 of 24 paired requests match (0%)" in md
    assert "### corrupt: failed" in md and "`outputs_differ`" in md
    assert "| lossless | 384 | 25%, 25%, 50% | 0.75, 0.50 |" in md  # 24 requests x (4 + 4 + 8) verify steps
    rows = {r["config"]: r for r in csv.DictReader(csv_path.open())}
    assert float(rows["lossless"]["output_match_share"]) == 1.0 and rows["base"]["output_match_share"] == ""
    assert rows["lossless"]["accept_rate_by_position"] == "0.7500 0.5000"
    assert float(rows["corrupt"]["output_common_prefix"]) == pytest.approx(1.5)
    flagged = {r["config"]: r["outputs_differ"] for r in config_rows([base, lossless, broken], "base")[0]}
    assert flagged == {"base": False, "lossless": False, "corrupt": True}
    assert _label({"config": "corrupt", "status": "failed", "outputs_differ": True}) == (
        "corrupt (outputs differ from the baseline)")
    assert (plots / "acceptance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shadowed_variant_is_said_in_summary_and_report(summaries, tmp_path: Path):
    evidence = {"requested": ["flashinfer_fusion", "pcie_ipc_allreduce"], "active": ["flashinfer_fusion"],
                "fell_back": [], "unproven": [],
                "shadowed": [{"variant": "pcie_ipc_allreduce", "by": "flashinfer_fusion", "why": "dispatch order"}]}
    both = build_summary(plan("fi-fusion-pcie-ipc", True), None, OK, [], records("c", 12.0, 2, True, 6), evidence)
    assert both["status"] == "ok"
    assert any("pcie_ipc_allreduce is shadowed by flashinfer_fusion" in w for w in both["warnings"])
    md_path = tmp_path / "report.md"
    render_summaries([*summaries, both], "base", tmp_path / "summary.csv", md_path, tmp_path / "plots")
    assert "- fi-fusion-pcie-ipc: variant pcie_ipc_allreduce is shadowed by flashinfer_fusion" in md_path.read_text()
