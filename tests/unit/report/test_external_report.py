"""Runtime external in the report: a baseline whose server says it runs speculation is labelled and not judged
against itself; the text says what was checked (the host guard ran) and why there are no verdicts."""

from __future__ import annotations

from pathlib import Path

from specsweep.analysis.rows import config_rows
from specsweep.analysis.summary import build_summary
from specsweep.contracts.vocabulary import Status
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records

URL = "http://127.0.0.1:30000"


def _external(name: str, spec: bool, outcome: dict = OK, seed: int = 1) -> dict:
    # An external plan has no server flags: what the server runs is its own word (/server_info in launch.json).
    plan = {"name": name, "engine": "reference", "image": None, "runtime": "external", "url": URL,
            "server_args": {}, "workload": WORKLOAD}
    launch = {"server_info": {"speculative_algorithm": "EAGLE3" if spec else None, "tp_size": 1}}
    records = sequential_records(name, 12.0, 2 if spec else 1, spec, seed, jitter=0.02, timing=True)
    return build_summary(plan, launch, outcome, [], records, None)


def test_a_speculative_external_baseline_is_labelled_and_not_judged_against_itself(tmp_path: Path):
    served = _external("served", spec=True)
    assert served["speculative_algorithm"] == "EAGLE3"
    rows, _ = config_rows([served], "served")
    assert rows[0]["break_even_accept_length"] is None and rows[0]["speculation_pays"] is None
    assert rows[0]["break_even_why"] == "the baseline itself runs speculation"
    md_path = tmp_path / "report.md"
    render_summaries([served], "served", tmp_path / "summary.csv", md_path, tmp_path / "plots")
    md = md_path.read_text()
    assert "**The baseline, served (its server says EAGLE3), runs speculative decoding**" in md
    assert "n/a (the baseline itself runs speculation)" in md


def test_the_text_says_the_host_was_checked_and_why_a_contaminated_run_has_no_verdicts(tmp_path: Path):
    contaminated = {**OK, "status": Status.CONTAMINATED, "reason": "other_server", "detail": "another server ran"}
    summaries = [_external("served", spec=False, outcome=contaminated), _external("other", spec=False,
                                                                                   outcome=contaminated, seed=2)]
    md_path = tmp_path / "report.md"
    render_summaries(summaries, "served", tmp_path / "summary.csv", md_path, tmp_path / "plots")
    md = md_path.read_text()
    assert "nothing was replicated" not in md and "no configuration at this point has a result that is compared" in md
    assert "nor the check that no other server ran" not in md
    assert "still waited until no other specsweep server ran on this host" in md
