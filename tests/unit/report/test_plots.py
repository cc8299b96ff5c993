"""Figures with several workload points: every row is drawn against the baseline at its own point."""

from __future__ import annotations

from specsweep.report import plots


def _rows() -> list[dict]:
    """A baseline and two speculative configurations at two points; the baselines differ per point."""
    base = {p: {"config": "nospec", "point": p, "point_index": i, "status": "ok", "label": f"nospec @ {p}",
                "tok_s_median": tok, "decode_rate": tok, "accept_length": None}
            for i, (p, tok) in enumerate([("c1", 100.0), ("c4", 40.0)])}
    rows = list(base.values())
    for name, al, cyc in [("eagle3-a", 2.0, 10.0), ("eagle3-b", 3.0, 25.0)]:
        for p, b in base.items():
            rows.append({"config": name, "point": p, "point_index": b["point_index"], "status": "ok",
                         "label": f"{name} @ {p}", "tok_s_median": al / cyc * 1e3, "decode_rate": al / cyc * 1e3,
                         "accept_length": al, "cycle_time_ms": cyc, "verdict": "faster", "base_row": b,
                         "break_even_accept_length": cyc / 1e3 * b["decode_rate"]})
    for b in base.values():
        b["base_row"] = b
    return rows


def _dashed_x(line) -> float | None:
    xs = set(line.get_xdata())
    return xs.pop() if line.get_linestyle() == "--" and len(xs) == 1 else None


def test_accept_length_has_a_panel_per_point_each_with_that_points_baseline(drawn, tmp_path):
    rows = _rows()
    plots.plot_accept_length(rows, rows[0], tmp_path / "unused.png")
    [fig] = drawn
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["point c1", "point c4"]
    for ax, expected in zip(panels, (100.0, 40.0)):
        baselines = {line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"}
        assert baselines == {expected}
        # each panel shows the two configurations of its own point, named without the point
        names = {t.get_text() for t in ax.texts}
        assert {"eagle3-a", "eagle3-b"} <= names


def test_tok_s_marks_each_row_at_the_baseline_of_its_point(drawn, tmp_path):
    rows = _rows()
    plots.plot_tok_s(rows, rows[0], tmp_path / "unused.png")
    [fig] = drawn
    [ax] = [a for a in fig.axes if a.get_title()]
    marks = sorted(x for line in ax.get_lines() if (x := _dashed_x(line)) is not None)
    # one mark per row: 3 rows at c1 (baseline 100), 3 at c4 (baseline 40)
    assert marks == [40.0] * 3 + [100.0] * 3
