"""Per-backend answer: own baselines, the 'deploy X' line, the cost model and budget in the report."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from specsweep.analysis.answer import own_baselines
from specsweep.analysis.summary import build_summary
from specsweep.contracts.summary import SUMMARY_FORMAT_VERSION, ConfigSummary
from specsweep.plan.resolve import own_baseline_problems
from specsweep.report.figures import PLOT_FILES
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records

# A synthetic host where the model is exact: 20 all-reduces per forward, shm 50 us and gloo 500 us a call
# (1 ms and 10 ms a forward) in the engine as in the micro-benchmark; decode compute 9 ms; a cycle's draft 3 ms
# and verify compute 10 ms; 2 tokens a cycle (33 tokens in 16 verifies: accept 33/16).
N_AR, LAT = 20, {"shm": 50.0, "gloo": 500.0}
DRAFT, VERIFY_COMPUTE, DECODE_COMPUTE = 3.0, 10.0, 9.0


def _comm_ms(backend: str) -> float:
    return N_AR * LAT[backend] / 1e3


def _records(run: str, backend: str, spec: bool, seed: int) -> list[dict]:
    comm = _comm_ms(backend)
    step = (DRAFT + VERIFY_COMPUTE + comm) if spec else (DECODE_COMPUTE + comm)
    recs = sequential_records(run, step, 2 if spec else 1, spec, seed, jitter=0.02)
    for r in recs:
        steps = len(r["chunk_ns"]) - 1
        r["timing"] = {"draft_s": DRAFT / 1e3 * steps if spec else 0.0,
                       "verify_s": ((VERIFY_COMPUTE if spec else DECODE_COMPUTE) + comm) / 1e3 * steps,
                       "verify_comm_s": comm / 1e3 * steps, "allreduce_ct": N_AR * steps, "forward_ct": steps}
    return recs


def _plan(name: str, backend: str, spec: bool) -> dict:
    args = {"tp-size": 2, "all-reduce-backend": backend, "random-seed": 0}
    env = {"OMP_NUM_THREADS": "1"}
    if spec:
        args |= {"speculative-algorithm": "EAGLE3", "speculative-num-draft-tokens": 4}
        env |= {"SGLANG_SIMULATE_ACC_LEN": "2.0"}
    return {"name": name, "engine": "reference", "runtime": "local", "image": None, "gpus": 0, "server_args": args,
            "env": env, "workload": WORKLOAD, "facts": engine_facts("reference", args, env)}


def _summary(name: str, backend: str, spec: bool, seed: int) -> dict:
    s = build_summary(_plan(name, backend, spec), None, OK, [], _records(name, backend, spec, seed), None)
    tokens = 4 if spec else 1
    s["profile"] = {"enabled": True, "status": "ok",
                    "bench": {"backend": backend, "timing": "back_to_back", "median_us": LAT[backend], "tokens": tokens,
                              "bytes": 1024 * tokens},
                    "comm": {"draft_tokens": tokens}}
    return s


@pytest.fixture()
def summaries() -> list[dict]:
    return [_summary("nospec-shm", "shm", False, 1), _summary("nospec-gloo", "gloo", False, 2),
            _summary("eagle3-shm", "shm", True, 3), _summary("eagle3-gloo", "gloo", True, 4)]


def test_own_baselines_found_by_plan_and_named():
    plans = {n: _plan(n, b, s) for n, b, s in [("nospec-shm", "shm", False), ("nospec-gloo", "gloo", False),
                                               ("eagle3-shm", "shm", True), ("eagle3-gloo", "gloo", True)]}
    pairs = own_baselines(plans)
    assert pairs["eagle3-shm"] == {"name": "nospec-shm", "how": "found"}
    assert pairs["eagle3-gloo"] == {"name": "nospec-gloo", "how": "found"}
    assert "nospec-shm" not in pairs  # only speculative configurations have one
    assert own_baselines(plans, {"eagle3-gloo": "nospec-shm"})["eagle3-gloo"] == {"name": "nospec-shm", "how": "named"}
    plans["nospec-shm-copy"] = plans["nospec-shm"]
    assert "several" in own_baselines(plans)["eagle3-shm"]["why"]
    del plans["nospec-gloo"]
    assert "no configuration" in own_baselines(plans)["eagle3-gloo"]["why"]


def test_own_baseline_plan_time_errors():
    plans = {"nospec": _plan("nospec", "shm", False), "eagle3": _plan("eagle3", "shm", True),
             "eagle3-b": _plan("eagle3-b", "gloo", True)}
    labels = {"nospec": {}, "eagle3": {"own_baseline": "nospec"}, "eagle3-b": {"own_baseline": "eagle3"}}
    assert own_baseline_problems(plans, labels) == [
        "configurations.eagle3-b.own_baseline: 'eagle3' runs speculation (EAGLE3); name one without speculation: "
        "['nospec']"]
    labels["eagle3-b"]["own_baseline"] = "nospec-typo"
    assert "'nospec-typo' is not a configuration; allowed (no speculation): ['nospec']" in own_baseline_problems(
        plans, labels)[0]
    labels["eagle3-b"]["own_baseline"] = "eagle3-b"
    assert "is this configuration itself" in own_baseline_problems(plans, labels)[0]


def test_report_answers_per_backend(summaries, tmp_path: Path):
    csv_path, md_path, plots = tmp_path / "summary.csv", tmp_path / "report.md", tmp_path / "plots"
    render_summaries(summaries, "nospec-shm", csv_path, md_path, plots)
    md = md_path.read_text()
    # The opening line: eagle3-shm (14 ms a cycle, 2 tokens) is the fastest and faster than the baseline.
    first = md.split("\n\n")[1]
    assert first.startswith("**On this host, deploy `eagle3-shm`** (with speculation): +")
    assert ("Against the baseline it sets server flags `--speculative-algorithm EAGLE3` "
            "`--speculative-num-draft-tokens 4`. Measured with `SGLANG_SIMULATE_ACC_LEN=2.0`: a simulated") in first
    rows = {r["config"]: r for r in csv.DictReader(csv_path.open())}
    # gloo: speculation pays against its own baseline (nospec-gloo) yet loses to the global one.
    assert rows["eagle3-gloo"]["own_baseline"] == "nospec-gloo" and rows["eagle3-gloo"]["own_verdict"] == "faster"
    assert rows["eagle3-gloo"]["verdict"] == "slower" and rows["eagle3-shm"]["own_verdict"] == "faster"
    assert "| eagle3-gloo | nospec-gloo (found) | pays: faster (x" in md
    # The model: predicted = the parts (exact here), measured within the 2 % jitter.
    assert float(rows["eagle3-gloo"]["model_predicted_ms"]) == pytest.approx(DRAFT + VERIFY_COMPUTE + 10.0)
    assert float(rows["nospec-shm"]["model_predicted_ms"]) == pytest.approx(DECODE_COMPUTE + 1.0)
    for name in rows:
        assert abs(float(rows[name]["model_residual_share"])) < 0.03
    # The budget against the baseline tok/s B (the report's one: its decode rate): (accept / B - draft - compute) / 20.
    b = float(rows["eagle3-shm"]["baseline_tok_s"])
    assert b == pytest.approx(float(rows["nospec-shm"]["decode_rate"]))
    accept = float(rows["eagle3-shm"]["accept_length"])
    expected = (accept / b * 1e3 - DRAFT - VERIFY_COMPUTE) / N_AR * 1e3
    assert float(rows["eagle3-shm"]["latency_budget_us"]) == pytest.approx(expected)
    assert expected == pytest.approx((33 / 16 / 100 * 1e3 - 13) / 20 * 1e3, rel=0.05)  # ~381 us at B ~ 100 tok/s
    assert "speculation pays here when an all-reduce of the verify's size takes less than" in md
    assert "## Cost model against the measurement" in md and "within the model" in md
    assert "pays at any latency" in md  # against its own baseline (both sides pay the link): always, here
    assert (plots / PLOT_FILES["budget"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_several_points_give_one_deploy_block(summaries, tmp_path: Path):
    # Two workload points per configuration (summary format 6 and later: a section per point).
    files = [ConfigSummary.from_dict({
        "format_version": SUMMARY_FORMAT_VERSION, "config": s["config"], "status": s["status"], "plan": s["plan"],
        "launches": [], "points": [{**s, "point": "c1", "workload": WORKLOAD, "launches": []},
                                   {**s, "point": "c2", "workload": {**WORKLOAD, "concurrency": 2}, "profile": None,
                                    "launches": []}]})
             for s in summaries]
    md_path = tmp_path / "report.md"
    render_summaries(files, "nospec-shm", tmp_path / "s.csv", md_path, tmp_path / "plots")
    block = md_path.read_text().split("\n\n")[1]
    assert block.startswith("**On this host, by workload point:**\n- **at c1, deploy `eagle3-shm`**")
    assert "\n- **at c2, deploy `eagle3-shm`**" in block


def test_tp1_says_communication_is_absent(tmp_path: Path):
    def tp1(s: dict) -> dict:
        s["plan"]["server_args"]["tp-size"] = 1
        s["plan"]["facts"] = engine_facts("reference", s["plan"]["server_args"], s["plan"]["env"])
        s["profile"] = None
        return s
    summaries = [tp1(_summary("nospec-shm", "shm", False, 1)), tp1(_summary("eagle3-shm", "shm", True, 3))]
    md_path = tmp_path / "report.md"
    render_summaries(summaries, "nospec-shm", tmp_path / "s.csv", md_path, tmp_path / "plots")
    md = md_path.read_text()
    assert "Communication is absent here (TP=1: no all-reduce)" in md
    assert "none (TP=1: communication absent)" in md
    rows = {r["config"]: r for r in csv.DictReader((tmp_path / "s.csv").open())}
    # No micro-benchmark needed: the prediction is draft + verify compute (+ the engine-timed comm it lacks).
    assert float(rows["eagle3-shm"]["model_predicted_ms"]) == pytest.approx(DRAFT + VERIFY_COMPUTE)
    assert rows["eagle3-shm"]["latency_budget_us"] == ""


def test_budget_table_says_when_a_row_has_no_budget():
    """A modelled row with no budget (no baseline decode rate of its own) is a cell that says so,
    not a TypeError that fails the whole report (seen on a profiled run with a Kimi-shaped row)."""
    from specsweep.analysis.answer import budget_records
    from specsweep.analysis.costmodel import StepParts
    from specsweep.report.answer import budget_section

    parts = StepParts(fixed_ms=9.6, allreduces=122.0, latency_us=9.4, tokens=2.67)
    row = {"label": "eagle3-shm-kimi", "backend": "shm", "parts": parts, "comm_absent": False, "accept": 2.67,
           "budget_us": None, "own": None, "in_server_us": None, "residual": None}
    text = budget_section(budget_records([{"point": "default", "baseline": "nospec", "baseline_tok_s": 92.3,
                                           "rows": [row]}]))
    assert "| eagle3-shm-kimi | 2.67 | n/a (no baseline decode rate for this row) |" in text
