"""The HTML report (snakemake --report): its first screen holds the answer as report.md words it (what to
deploy, the controls, the verdict table); report.md and summary.csv are pages shown in it, not downloads.

The first screen is the Snakefile's ``report:`` text, which Snakemake renders with Jinja, then docutils
(snakemake 9.27.1, report/__init__.py:723-745); the test renders report/workflow.rst the same way against
the landing file render_report wrote. docs/images/report-first-screen.png is that screen of a real run.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from docutils.core import publish_parts
from jinja2 import Environment

from specsweep.analysis.summary import build_summary
from specsweep.report import captions, pages
from specsweep.report.render import HtmlPages
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records
from specsweep.testing.workflow import REPO


def _summary(name: str, gap_ms: float, per_chunk: int, seed: int) -> dict:
    args = {"speculative-algorithm": "EAGLE3"} if per_chunk > 1 else {}
    plan = {"name": name, "engine": "reference", "image": None, "workload": WORKLOAD, "server_args": args,
            "facts": engine_facts("reference", args)}
    return build_summary(plan, None, OK, [], sequential_records(name, gap_ms, per_chunk, per_chunk > 1, seed,
                                                                jitter=0.02), None)


class _Text(HTMLParser):
    """The text of an HTML page, and its tables as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parsed(html: str) -> _Text:
    parser = _Text()
    parser.feed(html)
    parser.text = [" ".join("".join(parser.text).split())]
    return parser


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("work")
    out = work / "results"
    out.mkdir()
    summaries = [_summary("base", 12.0, 1, 1), _summary("fast", 12.0, 2, 2), _summary("slow", 30.0, 2, 3)]
    render_summaries(summaries, "base", out / "summary.csv", out / "report.md", out / "plots",
                     sweep={"aa_control": True},
                     html=HtmlPages(work / captions.LANDING_FILE, out / "report_page.html", out / "summary.html"))
    return out


def _first_screen(work: Path, files: list) -> str:
    """report/workflow.rst as Snakemake renders the global description (Jinja, then docutils' html_body)."""
    text = (REPO / captions.CAPTION_DIR / "workflow.rst").read_text()
    rst = Environment(trim_blocks=True, lstrip_blocks=True).from_string(text).render(
        snakemake=None, categories={}, files=files)
    cwd = os.getcwd()
    os.chdir(work)  # Snakemake builds the report in the workflow's directory
    try:
        return publish_parts(rst, writer_name="html")["html_body"]
    finally:
        os.chdir(cwd)


def test_the_first_screen_holds_the_deploy_line_the_controls_and_the_verdict_table(results):
    md = (results / "report.md").read_text()
    html = _first_screen(results.parent, files=[object()])
    page = _parsed(html)
    text = page.text[0]
    # report.md's own deploy line and control lines, in the same words
    [deploy] = [x for x in md.splitlines() if x.startswith("**On this host, deploy `fast`")]
    plain = re.sub(r"[*`]", "", deploy)
    assert plain in text, (plain, text[:500])
    assert "A/A control:" in text and "Positive control:" in text
    # the verdict table: a row per configuration with its decode verdict against the baseline
    [table] = [t for t in page.tables if t and t[0][:2] == ["config", "status"]]
    assert table[0][3] == "decode verdict vs baseline (ratio [CI], threshold)"
    verdicts = {row[0]: row[3] for row in table[1:]}
    assert verdicts["base"] == "baseline"
    assert verdicts["fast"].startswith("faster (x") and verdicts["slow"].startswith("slower (x")
    assert text.index("On this host") < text.index("A/A control") < text.index("decode verdict vs baseline")


def test_before_any_run_the_first_screen_says_so(tmp_path):
    html = _first_screen(tmp_path, files=[])  # no results yet: no landing file to include
    assert "No report yet: run the workflow" in _parsed(html).text[0]


def test_report_md_and_summary_csv_are_pages_with_the_same_text(results):
    page = _parsed((results / "report_page.html").read_text())
    assert "On this host, deploy fast" in page.text[0]
    assert 'src="data:image/png;base64,' in (results / "report_page.html").read_text()  # figures inlined
    [head, *rows] = _parsed((results / "summary.html").read_text()).tables[0]
    csv_lines = (results / "summary.csv").read_text().splitlines()
    assert ",".join(head) == csv_lines[0] and len(rows) == len(csv_lines) - 1


def test_the_rule_shows_pages_not_downloads_and_writes_the_landing_file_the_caption_includes():
    rule = (REPO / "rules" / "report.smk").read_text()
    marked = re.findall(r'report\(\s*(?:directory\()?"([^"]+)"', rule)
    assert marked and all(p.endswith(".html") or p.endswith("plots") for p in marked), marked
    assert f'landing="{captions.LANDING_FILE}"' in rule
    assert re.search(r'^report: "report/workflow.rst"$', (REPO / "Snakefile").read_text(), re.M)
    assert pages.LANDING == ("deploy", "controls", "verdicts")


def test_the_rules_whose_files_the_page_shows_have_no_params_to_show():
    """Snakemake's report shows each file with its job's params, as an escaped dict (snakemake 9.27.1,
    report/__init__.py:379-383): the params (a JSON blob of the report's inputs) belong to analyze_sweep, which
    writes report.json and nothing the page shows."""
    text = "\n".join((REPO / "rules" / name).read_text() for name in sorted(os.listdir(REPO / "rules")))
    rules = re.split(r"^rule ", text, flags=re.M)[1:]
    shown = [r for r in rules if "report(" in r]
    assert [r.split(":")[0] for r in shown] == ["render_report"]
    assert all("\n    params:" not in r for r in shown), shown
