"""The closing summary onsuccess prints: read from the report's own files, only after a run that wrote them.

The fixture is a real report: the CPU sweep recorded under docs/measurements."""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

from specsweep.testing.workflow import REPO
from specsweep.workflow.closing import closing_lines, print_closing

SWEEP = REPO / "docs/measurements/2026-12-01-cpu-sweep"


def _rows() -> list[dict]:
    return list(csv.DictReader((SWEEP / "summary.csv").open(newline="")))


def test_the_lines_say_what_the_report_found():
    rows = _rows()
    lines = closing_lines(SWEEP, [SWEEP / "best/eagle3.env", SWEEP / "best/eagle3.json"])
    spread = float(rows[0]["aa_spread"])
    assert lines[1] == (f"A/A control: nospec launched twice differed by up to {spread * 100:.1f} % in median tok/s: "
                        "smaller differences are not called.")
    for point in ("c1", "c2", "c4"):
        ok = [r for r in rows if r["point"] == point and r["status"] == "ok"]
        best = max(ok, key=lambda r: float(r["tok_s_median"]))
        [line] = [x for x in lines if x.startswith(f"Fastest at {point}: ")]
        assert line.startswith(f"Fastest at {point}: {best['config']}, {float(best['tok_s_median']):.1f} tok/s ("), line
    faster = sum(r["verdict"] == "faster" for r in rows)
    assert any(x.startswith("Verdicts against the baseline: ") and f"{faster} faster" in x for x in lines), lines
    assert any(x.startswith("Best of grid eagle3: eagle3-shm-acc3p6 (all-reduce-backend=shm): ") for x in lines)
    assert lines[-1].startswith(f"Report: {SWEEP / 'report.md'} ") and "snakemake --report" in lines[-1]


def test_printed_only_when_this_run_wrote_the_report(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(SWEEP, results)
    out = io.StringIO()
    mtime = (results / "report.md").stat().st_mtime
    assert not print_closing(results, mtime + 10, [], out) and out.getvalue() == ""  # an older report: silence
    assert print_closing(results, mtime - 10, [], out)
    assert out.getvalue().startswith("\nspecsweep summary:\n  9 configuration(s) at 3 point(s), baseline nospec.\n")
    os.unlink(results / "summary.csv")
    assert closing_lines(results) == []
    assert not print_closing(Path(tmp_path / "none"), 0.0, [], io.StringIO())
