"""The HTML views of report.md for ``snakemake --report``: its landing text, report.md as a page, summary.csv
as a table.

Snakemake's HTML report opens on the workflow description (the Snakefile's
``report:`` file, ``report/workflow.rst``) beside the rule graph, shows an HTML
result inside the page and offers any other file (markdown, CSV) as a download.
So render_report writes, from the same markdown as report.md (``sections``:
one text, never a second wording):

* ``LANDING``: the first sections of report.md (what to deploy, the rule and
  the controls, the verdicts), an HTML fragment that report/workflow.rst
  includes (``captions.workflow_caption``), so that the first screen holds the
  answer;
* the whole of report.md as one self-contained HTML page (its figures inlined);
* summary.csv as an HTML table.

Markdown is rendered by markdown-it-py (CommonMark with tables; raw HTML in the
markdown is escaped, never passed through).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import re
from collections.abc import Sequence
from pathlib import Path

from markdown_it import MarkdownIt

#: report.md's sections (``sections.SECTIONS`` names) that the HTML report's first screen shows.
LANDING = ("deploy", "controls", "verdicts")

#: The landing text sits in Snakemake's narrow description column (``prose max-w-lg``, 32rem), in a view that
#: centres its content vertically (``items-center h-screen overflow-auto``: a text taller than the window
#: would lose its top, the deploy line): widened and aligned to the top here (Snakemake 9.27.1,
#: report/html_reporter/template/components/content.js:9,51). Tailwind's prose quotes code in backticks.
_LANDING_STYLE = ("<style>.prose.max-w-lg{max-width:62rem}"
                  ".grow.flex.items-center.justify-center.h-screen.overflow-auto{align-items:flex-start}"
                  ".specsweep-answer code::before,.specsweep-answer code::after{content:none}"
                  ".specsweep-answer table{font-size:0.8rem}"
                  ".specsweep-answer td,.specsweep-answer th{padding:0.2rem 0.4rem}</style>")

_PAGE_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:90rem;line-height:1.45;color:#1f2328}
table{border-collapse:collapse;margin:0.8rem 0;font-size:0.85rem}
th,td{border:1px solid #d0d7de;padding:0.25rem 0.5rem;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
code{background:#f6f8fa;padding:0 0.2rem}
pre{background:#f6f8fa;padding:0.6rem}
img{max-width:100%}
"""


def markdown_html(text: str) -> str:
    """Markdown (CommonMark with tables) as HTML; raw HTML in the text is escaped."""
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def landing_html(sections: Sequence[str]) -> str:
    """The first screen of the HTML report: report.md's ``LANDING`` sections' markdown, as an HTML fragment."""
    body = markdown_html("".join(sections))
    more = ("<p><em>The whole report: <b>Report</b> (report.md with its figures); every row and column: "
            "<b>Summary</b>; the figures one by one: <b>Plots</b>.</em></p>")
    return f'{_LANDING_STYLE}<div class="specsweep-answer">{body}{more}</div>\n'


def _inline_images(body: str, base: Path) -> str:
    """``<img src="plots/x.png">`` as a data URI, so that the page stands alone (the HTML report embeds it)."""

    def inline(m: re.Match[str]) -> str:
        path = base / html.unescape(m.group(2))
        if not path.is_file():  # a figure report.md links but that has no file: left as the link
            return m.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f'{m.group(1)}data:image/png;base64,{data}{m.group(3)}'

    return re.sub(r'(<img src=")([^"]+\.png)(")', inline, body)


def page_html(markdown: str, base: Path, title: str = "specsweep report") -> str:
    """report.md as one HTML page, its figures (paths relative to ``base``, report.md's directory) inlined."""
    body = _inline_images(markdown_html(markdown), base)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_PAGE_STYLE}</style></head><body>\n{body}</body></html>\n")


def table_html(csv_text: str, title: str = "summary.csv") -> str:
    """summary.csv as one HTML table (an empty cell stays empty: a metric that could not be computed)."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    out = io.StringIO()
    out.write(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
              f"<style>{_PAGE_STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n<table>\n")
    for i, row in enumerate(rows):
        cell = "th" if i == 0 else "td"
        out.write("<tr>" + "".join(f"<{cell}>{html.escape(v)}</{cell}>" for v in row) + "</tr>\n")
    out.write("</table></body></html>\n")
    return out.getvalue()
