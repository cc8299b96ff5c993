"""The HTML report as a browser shows it: `snakemake --report` of a small finished run, opened in headless
Chromium (the page is drawn by its own scripts), holds on its first screen report.md's deploy line and the
Verdicts table, a row per configuration with its verdict.

tests/unit/report/test_html_report.py renders the first screen's text as Snakemake does; this opens the page
Snakemake wrote, after its scripts ran, in a 1280 x 800 window.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from specsweep.testing.browser import first_screen
from specsweep.testing.workflow import SNAKEMAKE, copy_workflow, plain_default_config, run, run_pipeline

pytestmark = pytest.mark.slow

TINY = {"num_prompts": 2, "output_len": 8, "repeats": 1,
        "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 1}}

# What the page shows once its scripts ran: the deploy line, the verdict table (its rows' cell texts) and where
# each begins in the window; null until the table is drawn.
PROBE = r"""(() => {
  const deploy = [...document.querySelectorAll('p')].find(e => e.innerText.trim().startsWith('On this host'));
  const table = [...document.querySelectorAll('table')].find(t => t.innerText.includes('decode verdict vs baseline'));
  if (!deploy || !table) return null;
  const heading = [...document.querySelectorAll('h1, h2, h3')].find(h => h.innerText.trim() === 'Verdicts');
  return JSON.stringify({height: window.innerHeight, deploy: deploy.innerText.trim(),
    deploy_top: deploy.getBoundingClientRect().top, table_top: table.getBoundingClientRect().top,
    heading: heading ? heading.innerText.trim() : null,
    rows: [...table.rows].map(r => [...r.cells].map(c => c.innerText.trim()))});
})()"""


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """Two configurations, one launch each, run to the end; then `snakemake --report`."""
    config = plain_default_config()
    config["defaults"]["workload"].update(TINY)
    config["configurations"] = {name: config["configurations"][name] for name in ("nospec", "eagle3-gloo")}
    config["aa_control"] = False
    work = run_pipeline(copy_workflow(tmp_path_factory.mktemp("html")), config)
    built = run([*SNAKEMAKE, "--report", "results/report.html"], work, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return work / "results"


def test_the_first_screen_holds_the_deploy_line_and_the_verdicts_table(report):
    shown = first_screen(report / "report.html", PROBE, width=1280, height=800)
    # report.md's own deploy line, as its markdown reads without the marks
    [deploy] = [x for x in (report / "report.md").read_text().splitlines() if x.startswith("**On this host")]
    assert shown["deploy"] == re.sub(r"[*`]", "", deploy), shown
    assert shown["heading"] == "Verdicts"
    head, *rows = shown["rows"]
    assert head == ["config", "status", "decode tok/s [95% CI]", "decode verdict vs baseline (ratio [CI], threshold)"]
    with (report / "summary.csv").open() as fh:
        configs = [row["config"] for row in csv.DictReader(fh)]
    assert [r[0] for r in rows] == configs == ["nospec", "eagle3-gloo"], rows
    assert rows[0][3] == "baseline" and rows[1][3], rows
    # both begin on the first screen, the deploy line first
    assert 0 <= shown["deploy_top"] < shown["table_top"] < shown["height"], shown
