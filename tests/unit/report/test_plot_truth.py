"""Figures say what they show: a value label at the end of its bar, the decode rate on the Pareto plot and a
title true for one workload point, no profiler trace named when profiling was off, overlapping acceptance
series visible and simulated acceptance said; report.md without an empty residual line."""

from __future__ import annotations

import pytest

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.report import plots, plots_parts
from specsweep.report.answer import model_section
from specsweep.report.plots import RATE_CI


def test_tok_s_labels_the_end_of_the_bar_not_of_the_interval(drawn, tmp_path):
    row = {"config": "a", "point": "default", "status": "ok", BASELINE_TOK_S: 50.0, "verdict": "baseline",
           "absent": {}, RATE_CI[0]: 40.0, RATE_CI[1]: 65.0}
    plots.plot_tok_s([row], None, tmp_path / "unused.png")
    [fig] = drawn
    [label] = [t for t in fig.axes[0].texts if t.get_text().strip() == "50.0"]
    assert label.get_position()[0] == pytest.approx(50.0) and label.get_horizontalalignment() == "right"


def test_pareto_is_drawn_on_the_decode_rate_and_says_one_point(drawn, tmp_path):
    rows = [{"config": c, "point": "default", "point_index": 0, "tok_s_median": e2e, BASELINE_TOK_S: dec,
             "tok_s_per_gpu": g, "device_kind": "gpu"} for c, e2e, dec, g in (("a", 10.0, 12.0, 10.0),
                                                                                ("b", 20.0, 25.0, 30.0))]
    plots.plot_pareto(rows, "a", tmp_path / "unused.png")
    [fig] = drawn
    ax = fig.axes[0]
    xs = sorted(x for line in ax.get_lines() for x in line.get_xdata())
    assert xs == [12.0, 25.0], "the verdicts' decode rate, not end-to-end tok/s"
    assert "decode rate" in ax.get_xlabel()
    assert "across" not in ax.get_title() and "one workload point" in ax.get_title()


def _engine_split() -> dict:
    return {"config": "eagle3", "point": "default", "status": "ok", "label": "eagle3", "verify_comm_ms": 20.0,
            "verify_compute_ms": 10.0, "comm_share": 0.66, "profile": None}


def test_comm_split_names_no_profiler_trace_when_profiling_was_off(drawn, tmp_path):
    plots_parts.plot_comm_split([_engine_split()], tmp_path / "unused.png")
    traced = dict(_engine_split(), trace_verify_ms=31.0, trace_verify_compute_ms=9.0, trace_verify_comm_ms=19.0,
                  trace_verify_idle_ms=3.0, trace_comm_share=0.61)
    plots_parts.plot_comm_split([traced], tmp_path / "unused.png")
    off, on = (fig.axes[0].get_title() for fig in drawn)
    assert "profiler trace (" not in off and "engine timing" in off and "profiling off" in off, off
    assert "engine timing and profiler trace" in on, on


def test_acceptance_series_that_coincide_stay_visible_and_simulated_acceptance_is_said(drawn, tmp_path):
    rows = [{"config": c, "point": "default", "point_index": 0, "status": "ok", "label": c,
             "accept_histogram": [2, 3, 4, 1], "accept_rates": [0.8, 0.5, 0.1],
             "simulated_accept": "SGLANG_SIMULATE_ACC_LEN=2.5"} for c in ("eagle3-gloo", "eagle3-shm")]
    plots_parts.plot_acceptance(rows, tmp_path / "unused.png")
    [fig] = drawn
    bottom = fig.axes[1]
    lines = bottom.get_lines()
    assert len(lines) == 2
    assert list(lines[0].get_xdata()) != list(lines[1].get_xdata()), "equal rates drawn on top of one another"
    assert lines[0].get_marker() != lines[1].get_marker()
    assert "simulated: SGLANG_SIMULATE_ACC_LEN=2.5" in fig._suptitle.get_text()


def test_the_simulated_accept_setting_of_a_row_is_read_from_its_plan_facts():
    from specsweep.analysis.sweep import simulated_accept

    facts = {"simulated_accept_length": 2.5, "simulated_accept_length_setting": "env.SGLANG_SIMULATE_ACC_LEN"}
    assert simulated_accept({"env": {"SGLANG_SIMULATE_ACC_LEN": "2.5"}, "facts": facts}) == \
        "SGLANG_SIMULATE_ACC_LEN=2.5"
    assert simulated_accept({"env": {}, "facts": dict(facts, simulated_accept_length=None)}) is None


def test_no_empty_residual_line_when_no_row_was_modelled():
    rows = [{"config": "eagle3", "point": "default", "label": "eagle3", "model": {"absent": "no engine timing"}}]
    text = model_section(rows)
    assert "| eagle3 | n/a (no engine timing) |" in text
    assert "Residual parts" not in text


def test_race_draws_intervals_only_for_rounds_that_drop(drawn, tmp_path):
    """Round 1 of two planned rounds drops nothing and its intervals (one launch a configuration) are wide: the
    figure draws its points without them, and round 2's with them."""
    from types import SimpleNamespace

    from specsweep.report.race import plot_race

    def against(ratio, ci):
        return {"config": "b", "ratio": ratio, "ratio_ci": ci}

    rounds = [{"round": 1, "best": "a", "dropping": False, "against": [against(1.1, [0.5, 3.0])]},
              {"round": 2, "best": "a", "dropping": True, "against": [against(1.2, [1.1, 1.3])]}]
    race = {"rounds": rounds, "smallest_effect": 0.05, "winner": "a", "decided": True, "ended_by": "one left",
            "launches": {"spent": 4, "full_design": 9},
            "history": [{"config": "a", "outcome": "won"}, {"config": "b", "outcome": "dropped"}]}
    plot_race(SimpleNamespace(data={"race": race}), tmp_path / "unused.png")
    [fig] = drawn
    ax = fig.axes[0]
    ends = [seg for coll in ax.collections if hasattr(coll, "get_segments") for seg in coll.get_segments()]
    xs = {round(float(seg[0][0])) for seg in ends if len(seg) == 2 and seg[0][0] == seg[1][0]}
    assert xs == {2}, f"error bars drawn at rounds {xs}"
    assert ax.get_ylim()[1] < 1.5, "round 1's interval (up to 1 / 0.5) no longer sets the y-range"
