"""render_report: every view of results/report.json, and nothing computed.

summary.csv (``summary_csv``), report.md (``sections.SECTIONS`` in order), the
figures that have data (``figures.FIGURES``) and, for every grid, its
best-configuration files (``export``). Each reads report.json (``analysis.sweep``
writes it); none reads another. The HTML report's pages (``pages``: its landing
text, report.md as a page, summary.csv as a table) are the same texts in HTML.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsweep.files import write_text_atomic
from specsweep.report import pages
from specsweep.report.export import write_exports
from specsweep.report.figures import PLOT_FILES, draw_figures
from specsweep.report.linked import Context, Linked
from specsweep.report.sections import render_markdown, render_sections
from specsweep.report.summary_csv import summary_csv


@dataclass(frozen=True)
class HtmlPages:
    """Where the HTML report's pages go (rules/report.smk names them): ``landing`` (the fragment
    report/workflow.rst includes), ``page`` (report.md as HTML), ``table`` (summary.csv as HTML)."""

    landing: Path
    page: Path
    table: Path


def render_report(report: dict[str, Any], csv_path: Path | str, md_path: Path | str, plots_dir: Path | str,
                  best_dir: Path | str | None = None, html: HtmlPages | None = None) -> None:
    """Write summary.csv, report.md, the figures with data under ``plots_dir``, each grid's files under
    ``best_dir`` and the HTML pages (``html``) from ``report`` (report.json as loaded:
    ``analysis.sweep.load_report``)."""
    linked = Linked(report)
    csv_text = summary_csv(linked.rows)
    write_text_atomic(csv_path, csv_text)
    plots_dir = Path(plots_dir)
    plots_rel = Path(os.path.relpath(plots_dir, Path(md_path).parent)).as_posix()
    files = write_exports(report["grids"], best_dir) if best_dir is not None else {}
    if best_dir is not None:
        rel = Path(os.path.relpath(best_dir, Path(md_path).parent)).as_posix()
        files = {g: {k: f"{rel}/{Path(v).name}" for k, v in f.items()} for g, f in files.items()}
    figures = draw_figures(linked, plots_dir)
    ctx = Context(linked, plots_rel, PLOT_FILES, figures, files)
    markdown = render_markdown(ctx)
    write_text_atomic(md_path, markdown)
    if html is not None:
        write_text_atomic(html.landing, pages.landing_html(render_sections(ctx, pages.LANDING)))
        write_text_atomic(html.page, pages.page_html(markdown, Path(md_path).parent))
        write_text_atomic(html.table, pages.table_html(csv_text))
