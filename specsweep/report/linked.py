"""report.json as the renderers read it: the rows linked to the rows they were judged against.

report.json names another row as ``[config, point]``; ``Linked`` puts the row itself
there (``base_row``, ``own_row``; ``comparison`` = the primary verdict of
``comparisons``), gives the break-even curves their rows (``Curve``), and keeps the
rest as written. Nothing is computed here: a renderer that needs a number finds it
in report.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsweep.analysis.metrics import PRIMARY_VERDICT


@dataclass
class Curve:
    """One break-even curve of report.json's ``curves``, its rows and baseline row linked."""

    label: str
    point: str
    rows: list[dict[str, Any]]
    base: dict[str, Any] | None
    crossing: dict[str, Any] | None
    interval: dict[str, Any] | None
    computed: list[float]
    computed_mean: float | None


class Linked:
    """The report (``data``: report.json as loaded) with its rows linked (module docstring)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.rows: list[dict[str, Any]] = [dict(r) for r in data["rows"]]
        self.by_key = {(r["config"], r["point"]): r for r in self.rows}
        for r in self.rows:
            r["base_row"] = self.row(r.get("base"))
            r["own_row"] = self.row(r.get("own"))
            r["comparison"] = (r.get("comparisons") or {}).get(PRIMARY_VERDICT)
        self.base = self.row(data["baseline"]["row"])
        self.baseline: str | None = data["baseline"]["name"]
        self.curves = [Curve(c["label"], c["point"], [self.by_key[tuple(k)] for k in c["rows"]], self.row(c["base"]),
                             c["crossing"], c["interval"], c["computed"], c["computed_mean"]) for c in data["curves"]]

    def row(self, key: list[str] | None) -> dict[str, Any] | None:
        return None if key is None else self.by_key[tuple(key)]


@dataclass
class Context:
    """What a section of report.md renders from: the linked report, and where its files went (``plot_files``:
    the figures by key; ``figures``: each figure's reason it was not drawn, None when it was; ``best_files``:
    each grid's exported files, relative to report.md)."""

    report: Linked
    plots_rel: str
    plot_files: dict[str, str]
    figures: dict[str, str | None]
    best_files: dict[str, dict[str, str]]
