"""The few lines Snakemake's ``onsuccess:`` prints after a run that wrote the report (stdlib only).

Read from what the report already wrote, never recomputed: the A/A and positive
control lines of ``results/report.md`` (``report.sweep.control_lines``: those
sentences have one home), and from ``results/summary.csv`` (``report.render.CSV_COLUMNS``)
the fastest configuration at each point by the decode rate the verdicts judge,
with its verdict against the baseline, and the verdicts counted; each grid's
winner from ``results/best/<grid>.json`` (``report.export``); where the report is.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from specsweep.contracts.vocabulary import CALLED, Status, Verdict
from specsweep.records import DEFAULT_POINT

#: The rate the verdicts judge and "fastest" ranks by (``analysis.metrics.BASELINE_TOK_S``; a test checks it).
RATE_COLUMN = "decode_rate"
#: Lines of report.md that are the controls' results (``report.sweep.aa_lines``, ``positive_lines``) and a
#: trend named over the sweep (``report.sweep.trend_lines``).
CONTROL_PREFIXES = ("A/A control", "Positive control", "Trend:", "Trend at point", "Cold start:", "Cold start at point")
#: At most this many points get a "fastest" line; the report has the rest.
MAX_POINT_LINES = 3
#: At most this many configurations are named per verdict.
MAX_NAMES = 4


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def closing_lines(results: Path, best_json: Iterable[str | Path] = ()) -> list[str]:
    """The closing summary of the report under ``results`` (empty when there is no summary.csv)."""
    csv_path = results / "summary.csv"
    if not csv_path.is_file():
        return []
    rows = list(csv.DictReader(csv_path.open(newline="")))
    points = list(dict.fromkeys(r["point"] for r in rows))
    baseline = next((r["config"] for r in rows if r["verdict"] == Verdict.BASELINE), None)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    lines = [f"{len(configs)} configuration(s) at {len(points)} point(s), baseline {baseline or 'none'}."]

    report = results / "report.md"
    if report.is_file():
        for line in report.read_text().splitlines():
            text = line.removeprefix("- ").replace("**", "").strip()
            if text.startswith(CONTROL_PREFIXES):
                lines.append(text)

    for point in points[:MAX_POINT_LINES]:
        at = [r for r in rows if r["point"] == point and r["status"] == Status.OK and _float(r.get(RATE_COLUMN))]
        if not at:
            lines.append(f"At {point}: no configuration measured ok." if points != [DEFAULT_POINT]
                         else "No configuration measured ok.")
            continue
        best = max(at, key=lambda r: _float(r[RATE_COLUMN]))
        against = ("the baseline" if best["verdict"] == Verdict.BASELINE else
                   f"{best['verdict']} than {baseline}" if best["verdict"] in CALLED else
                   f"{best['verdict']} against {baseline}")
        ratio = _float(best.get("ratio"))
        at_point = "" if points == [DEFAULT_POINT] else f" at {point}"
        lines.append(f"Fastest{at_point}: {best['config']}, {_float(best[RATE_COLUMN]):.1f} decode tok/s "
                     f"({against}{f', x{ratio:.2f}' if ratio is not None else ''}).")
    if len(points) > MAX_POINT_LINES:
        lines.append(f"(and {len(points) - MAX_POINT_LINES} more point(s) in the report)")

    verdicts: dict[str, list[str]] = {}
    for r in rows:
        if r["verdict"] != Verdict.BASELINE:
            verdicts.setdefault(r["verdict"] or r["status"], []).append(
                r["config"] if len(points) == 1 else f"{r['config']}@{r['point']}")
    if verdicts:
        counts = Counter({v: len(n) for v, n in verdicts.items()})
        lines.append("Verdicts against the baseline: " + ", ".join(f"{n} {v}" for v, n in counts.most_common()) + ".")
        for verdict in (Verdict.FASTER, Status.FAILED, Status.CONTAMINATED):
            if verdict in verdicts:
                lines.append(f"  {verdict}: {_names(verdicts[verdict])}")

    for path in (Path(p) for p in best_json if str(p).endswith(".json")):  # BEST_EXPORTS: .env, .csv too
        if path.is_file():
            best = json.loads(path.read_text())
            settings = ", ".join(f"{k.split('.', 1)[-1]}={v}" for k, v in (best.get("settings") or {}).items())
            if best.get("winner"):
                lines.append(f"Best of grid {best['grid']}: {best['winner']}"
                             f"{f' ({settings})' if settings else ''}: {path.with_suffix('.env')}")
            else:
                lines.append(f"Best of grid {best.get('grid')}: none ({best.get('why_none')})")

    lines.append(f"Report: {results / 'report.md'} (rows: {csv_path}); the HTML page with the plots: "
                 f"snakemake --report {results / 'report.html'}")
    return lines


def print_closing(results: Path, started_at: float, best_json: Iterable[str | Path], out: TextIO) -> bool:
    """Print the closing summary when this run wrote the report (``report.md`` newer than ``started_at``,
    the workflow's start): a run that made one configuration's summary only says nothing. True if printed."""
    report = results / "report.md"
    if not report.is_file() or report.stat().st_mtime < started_at:
        return False
    lines = closing_lines(results, best_json)
    if not lines:
        return False
    out.write("\n".join(["", "specsweep summary:", *(f"  {line}" for line in lines), ""]) + "\n")
    out.flush()
    return True
