"""Figures read: one colour per series, legends inside the figure and clear of the data, legends that
list only what is drawn, no placeholder files; the report's warnings grouped with counts."""

from __future__ import annotations

import pytest

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.report import plots, plots_parts
from specsweep.report.linked import Curve
from specsweep.report.plots import RATE_CI
from specsweep.report.results import warning_lines
from specsweep.testing.reports import kept_figures

POINTS = ("c1", "c2", "c4")
CONFIGS = [f"eagle3-{b}-acc{a}" for b in ("gloo", "shm") for a in ("1p2", "2p0", "2p8", "3p6")]


@pytest.fixture
def drawn():
    """The figures the plot functions would save, laid out (drawn) and kept open for inspection."""
    with kept_figures(laid_out=True) as figures:
        yield figures


def _inside(fig, artist) -> bool:
    box, page = artist.get_window_extent(fig.canvas.get_renderer()), fig.bbox
    return box.x0 >= page.x0 - 1 and box.y0 >= page.y0 - 1 and box.x1 <= page.x1 + 1 and box.y1 <= page.y1 + 1


def _acceptance_rows() -> list[dict]:
    """The example sweep's shape: 8 speculative configurations x 3 points = 24 series."""
    return [{"config": c, "point": p, "point_index": i, "status": "ok", "label": f"{c} @ {p}",
             "accept_histogram": [k + 1, 8 - k, k, 1], "accept_rates": [0.9, 0.5 - k / 20, 0.1]}
            for k, c in enumerate(CONFIGS) for i, p in enumerate(POINTS)]


def test_acceptance_has_a_colour_per_configuration_and_its_legend_inside_the_figure(drawn, tmp_path):
    assert plots_parts.plot_acceptance(_acceptance_rows(), tmp_path / "unused.png") is None
    [fig] = drawn
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == CONFIGS
    colours = {tuple(h.get_color()) for h in legend.legend_handles}
    assert len(colours) == len(CONFIGS)  # no two series share a colour (tab10 repeats after 10)
    assert _inside(fig, legend)
    # one panel pair per point, each drawing every configuration in its legend colour
    assert [ax.get_title() for ax in fig.axes[:3]] == [f"point {p}: accepted draft tokens per verify" for p in POINTS]
    for ax in fig.axes[3:]:
        assert {tuple(line.get_color()) for line in ax.get_lines()} == colours


def test_series_colours_stay_distinct_beyond_twenty():
    names = [f"c{i}" for i in range(27)]
    assert len({tuple(c) for c in plots_parts._series_colors(names).values()}) == 27


def _curves() -> list[Curve]:
    """Two backends' decode rate against accept length; shm's 2.8 point high in the upper left area."""
    base = {"config": "nospec", BASELINE_TOK_S: 100.0, RATE_CI[0]: 95.0, RATE_CI[1]: 105.0}
    groups = []
    for label, ys in (("gloo", [25, 40, 55, 70]), ("shm", [80, 133, 172, 160])):
        rows = [{"accept_length": a, BASELINE_TOK_S: y, RATE_CI[0]: y - 5, RATE_CI[1]: y + 5, "point_index": 0}
                for a, y in zip([1.2, 2.0, 2.8, 3.6], ys)]
        computed = [1.8 if label == "shm" else 5.6]
        groups.append(Curve(label=label, point="c2", rows=rows, base=base,
                            crossing={"x": 1.74} if label == "shm" else {"x": None}, interval={},
                            computed=computed, computed_mean=computed[0]))
    return groups


def test_break_even_legend_is_under_the_panels_and_hides_no_point(drawn, tmp_path):
    assert plots.plot_break_even(_curves(), tmp_path / "unused.png") is None
    [fig] = drawn
    [ax] = fig.axes
    assert ax.get_legend() is None and len(fig.legends) == 1
    legend = fig.legends[0]
    assert _inside(fig, legend)
    box = legend.get_window_extent(fig.canvas.get_renderer())
    for group in _curves():
        for row in group.rows:
            x, y = ax.transData.transform((row["accept_length"], row[BASELINE_TOK_S]))
            assert not box.contains(x, y), (group.label, row["accept_length"])
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[0] == "baseline nospec" and {"gloo", "shm"} <= set(labels)


def test_break_even_lists_no_crossing_when_none_was_measured(drawn, tmp_path):
    groups = _curves()
    for g in groups:
        g.crossing = {"x": None}
    plots.plot_break_even(groups, tmp_path / "unused.png")
    labels = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert not any(label.startswith("measured crossing") for label in labels)


def _split_rows(trace: bool) -> list[dict]:
    row = {"config": "eagle3-gloo", "point": "default", "status": "ok", "verify_comm_ms": 20.0,
           "verify_compute_ms": 10.0, "comm_share": 0.66}
    if trace:
        row.update(trace_verify_ms=31.0, trace_verify_compute_ms=9.0, trace_verify_comm_ms=19.0,
                   trace_verify_idle_ms=3.0, trace_comm_share=0.61, allreduce_bench_ms_per_verify=15.0)
    return [row]


def test_comm_split_legend_lists_only_what_is_drawn(drawn, tmp_path):
    plots_parts.plot_comm_split(_split_rows(trace=False), tmp_path / "unused.png")
    plots_parts.plot_comm_split(_split_rows(trace=True), tmp_path / "unused.png")
    engine_only, with_trace = ([t.get_text() for t in fig.axes[0].get_legend().get_texts()] for fig in drawn)
    assert engine_only == ["compute", "communication"]
    assert with_trace == ["compute", "communication", "idle", "hatched: profiler trace (rank 0, profiled requests)",
                          "micro-benchmark latency x all-reduces per verify"]


def test_pareto_lists_a_frontier_only_when_one_is_drawn(drawn, tmp_path):
    rows = [{"config": c, "point": "default", "point_index": 0, BASELINE_TOK_S: u, "tok_s_per_gpu": g,
             "device_kind": "gpu"} for c, u, g in (("a", 10.0, 10.0), ("b", 20.0, 20.0))]
    plots.plot_pareto(rows, "a", tmp_path / "unused.png")  # b dominates: a frontier of one point
    rows[0]["tok_s_per_gpu"] = 30.0  # now a and b are both on it
    plots.plot_pareto(rows, "a", tmp_path / "unused.png")
    one, two = ([t.get_text() for t in fig.axes[0].get_legend().get_texts()] for fig in drawn)
    assert "Pareto frontier" not in one and "Pareto frontier" in two


def test_tok_s_lists_hatching_only_when_a_hatched_bar_is_drawn(drawn, tmp_path):
    row = {"config": "a", "point": "default", "status": "ok", BASELINE_TOK_S: 50.0, "verdict": "baseline",
           "absent": {}}
    plots.plot_tok_s([row], None, tmp_path / "unused.png")
    plots.plot_tok_s([row, dict(row, config="b", status="fallback", verdict="faster")], None, tmp_path / "unused.png")
    plots.plot_tok_s([row, dict(row, config="c", status="contaminated", verdict="contaminated")], None,
                     tmp_path / "unused.png")
    ok, fallback, contaminated = ([t.get_text() for t in fig.axes[0].get_legend().get_texts()] for fig in drawn)
    assert not any("hatched" in t for t in ok) and "hatched: status fallback" in fallback
    # the hatching names the statuses drawn (an H100 record's contaminated bars were called "fallback / failed")
    assert "hatched: status contaminated" in contaminated


def test_nothing_to_draw_is_no_file_and_a_reason(tmp_path):
    path = tmp_path / "break_even.png"
    path.write_bytes(b"an earlier render's")
    why = plots.plot_break_even([], path)
    assert not path.exists() and why.startswith("no configurations that differ only in accept length")


def test_warnings_that_differ_only_in_numbers_are_one_line_with_counts_ranges_and_places():
    load = "up to {} runnable tasks on 2 CPUs while the server ran (load1 up to {}): other work competed for the CPUs"
    rows = [{"config": "nospec", "point": "c1", "warnings": [f"launch 1: {load.format(3, 1.3)}",
                                                             f"launch aa: {load.format(5, 1.9)}"]},
            {"config": "eagle3", "point": "c1", "warnings": [load.format(6, 2.8), "prompts were cut to 32 tokens"]},
            {"config": "eagle3", "point": "c4", "warnings": [load.format(4, 2.5)]}]
    entries = [{"config": r["config"], "point": r["point"], "message": m} for r in rows for m in r["warnings"]]
    assert warning_lines(entries) == [
        "4 x up to 3-6 runnable tasks on 2 CPUs while the server ran (load1 up to 1.3-2.8): other work competed for "
        "the CPUs: nospec (c1 launch 1, c1 launch aa); eagle3 (c1, c4)",
        "eagle3 @ c1: prompts were cut to 32 tokens",
    ]


def test_tok_s_title_fits_the_figure(drawn, tmp_path):
    # the example sweep's row names: long tick labels push the axes (and their title) to the right
    rows = [{"config": c, "point": p, "label": f"{c} @ {p}", "status": "ok", BASELINE_TOK_S: 50.0,
             "verdict": "no significant difference", "absent": {}} for c in CONFIGS for p in POINTS]
    plots.plot_tok_s(rows, None, tmp_path / "unused.png")
    [fig] = drawn
    assert _inside(fig, fig.axes[0].title)


def test_tok_s_cuts_an_interval_of_few_degrees_of_freedom_at_the_axis_and_says_so(drawn, tmp_path):
    """A launch variance on one degree of freedom gives intervals of ~10^7 tok/s: the axis stays
    at the bars' scale, the cut end is marked, and the legend says why."""
    base = {"config": "a", "point": "default", "status": "ok", BASELINE_TOK_S: 50.0, "verdict": "baseline",
            "absent": {}, RATE_CI[0]: 45.0, RATE_CI[1]: 55.0}
    wild = dict(base, config="b", verdict="no significant difference", **{RATE_CI[0]: 1e-3, RATE_CI[1]: 6e7})
    plots.plot_tok_s([base, dict(base, config="c")], None, tmp_path / "unused.png")
    plots.plot_tok_s([base, wild], None, tmp_path / "unused.png")
    calm, cut = drawn
    assert calm.axes[0].get_xlim()[1] < 100
    assert not any("interval runs past" in t.get_text() for t in calm.axes[0].get_legend().get_texts())
    assert cut.axes[0].get_xlim()[1] <= plots.CI_AXIS_FACTOR * 50.0 * 1.2
    assert any("interval runs past" in t.get_text() for t in cut.axes[0].get_legend().get_texts())
