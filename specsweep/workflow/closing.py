"""The few lines Snakemake's ``onsuccess:`` prints after a run that wrote the report.

A view of ``results/report.json`` (``analysis.sweep``), as report.md is: nothing is
recomputed and no other view is read. What to deploy at each point and the A/A and
positive control sentences are report.md's own (``report.head.deploy_sentences``,
``control_sentences``: one home; the configuration named is report.json's ``deploy``,
never a control); the verdicts counted; each grid's winner; where the report is.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from specsweep.contracts.vocabulary import Status, Verdict
from specsweep.report.head import control_sentences, deploy_sentences

#: At most this many points get a deploy line; the report has the rest.
MAX_POINT_LINES = 3
#: At most this many configurations are named per verdict.
MAX_NAMES = 4


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _env_file(results: Path, grid: str, best_files: Iterable[str | Path]) -> Path:
    """Where the grid's env file is (``BEST_EXPORTS`` names it; else results/best/<grid>.env)."""
    return next((Path(p) for p in best_files if Path(p).name == f"{grid}.env"), results / "best" / f"{grid}.env")


def closing_lines(results: Path, best_files: Iterable[str | Path] = ()) -> list[str]:
    """The closing summary of the report under ``results`` (empty when there is no report.json, or one that
    analyze_sweep did not write: no ``format_version``, e.g. the empty object a ``snakemake --touch`` timing
    leaves, benchmarks/bench_dag.py)."""
    path = results / "report.json"
    if not path.is_file():
        return []
    report = json.loads(path.read_text())
    if not isinstance(report, dict) or "format_version" not in report:
        return []
    rows = report["rows"]
    points = list(dict.fromkeys(r["point"] for r in rows))
    baseline = next((r["config"] for r in rows if r["verdict"] == Verdict.BASELINE), None)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    lines = [f"{len(configs)} configuration(s) at {len(points)} point(s), baseline {baseline or 'none'}."]
    deploy = deploy_sentences(report["deploy"])
    lead = deploy[:1] if len(deploy) > 1 else []  # "On this host, by workload point:", then one line a point
    per_point = deploy[len(lead):]
    lines += lead + per_point[:MAX_POINT_LINES]
    if len(per_point) > MAX_POINT_LINES:
        lines.append(f"(and {len(per_point) - MAX_POINT_LINES} more point(s) in the report)")
    lines += control_sentences(report)

    race = report.get("race")
    if race:
        cost = race["launches"]
        what = ("won" if race["decided"] and not race["tied_with"] else
                f"ties with {', '.join(race['tied_with'])}" if race["tied_with"] else "leads (not decided)")
        screened = cost.get("screened_out") or []
        check = race.get("screen_check") or []
        slower = sum(1 for c in check if c["really_slower"])
        launched = sum(1 for c in check if c["launches"])
        lines.append(f"Race: {race['winner']} {what} ({race['ended_by']}); {cost['spent']} launches"
                     + (f" of {cost['full_design']} for the full design" if cost["full_design"] else "")
                     + (f"; {len(screened)} screened out by the cost model" if screened else "")
                     + (f" ({launched} launched to check it, {cost.get('check_spent')} launches: {slower} really "
                        "slower than the winner)" if launched else "") + ".")

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

    for grid in report["grids"]:
        if grid["winner"]:
            settings = ", ".join(f"{k.split('.', 1)[-1]}={v}" for k, v in grid["values"].items()
                                 if k not in grid["compared_at"])
            lines.append(f"Best of grid {grid['grid']}: {grid['winner']['config']}"
                         f"{f' ({settings})' if settings else ''}: {_env_file(results, grid['grid'], best_files)}")
        else:
            lines.append(f"Best of grid {grid['grid']}: none ({grid['why_none']})")

    lines.append(f"Report: {results / 'report.md'} (rows: {results / 'summary.csv'}); the HTML page with the plots: "
                 f"snakemake --report {results / 'report.html'}")
    return lines


def print_closing(results: Path, started_at: float, best_files: Iterable[str | Path], out: TextIO) -> bool:
    """Print the closing summary when this run wrote the report (``report.md`` newer than ``started_at``,
    the workflow's start): a run that made one configuration's summary only says nothing. True if printed."""
    report = results / "report.md"
    if not report.is_file() or report.stat().st_mtime < started_at:
        return False
    lines = closing_lines(results, best_files)
    if not lines:
        return False
    out.write("\n".join(["", "specsweep summary:", *(f"  {line}" for line in lines), ""]) + "\n")
    out.flush()
    return True
