"""A new user's first hour, replayed on one workflow copy with real Snakemake runs on the reference engine: the
run to the end and its HTML report opened in a browser; an edit (only the edited configuration relaunches); a
switch to another config file and back (the launches measured before are reused: no server starts); a Ctrl-C
during a launch and the rerun (only the interrupted launch runs again, and the run completes).

The mistakes of that hour (refused before anything runs) are tests/unit/cli/test_first_hour.py's.

The HTML report: `snakemake --report` of the finished run, opened in headless Chromium (the page is drawn by
its own scripts), holds on its first screen report.md's deploy line and the Verdicts table, a row per
configuration with its verdict (tests/unit/report/test_html_report.py renders the first screen's text as
Snakemake does; this opens the page Snakemake wrote, after its scripts ran, in a 1280 x 800 window).
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from specsweep.testing.browser import first_screen
from specsweep.testing.workflow import (
    SNAKEMAKE,
    copy_workflow,
    interrupted_run,
    launch_path,
    measured_launches,
    plain_default_config,
    planned_jobs,
    run,
)

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


def console_of(work: Path, *args: str) -> str:
    """`snakemake --cores 1 <args>` in ``work``, which must succeed: its console (stderr into stdout, as shown)."""
    t0 = time.monotonic()
    result = subprocess.run([*SNAKEMAKE, *args], cwd=work, stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    print(f"snakemake {' '.join(args)}: {time.monotonic() - t0:.0f} s")
    assert result.returncode == 0, result.stdout[-5000:]
    return result.stdout


def launched(console: str) -> list[str]:
    """The launches a run started, as its console says them ("specsweep <config> launch-<n>: launching ...")."""
    return re.findall(r"^specsweep (\S+ launch-\w+): (?:.*; )?launching", console, flags=re.M)


def launch_bytes(work: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (work / "results").glob("*/plans/*/launch-*/*.json*")}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    """The default config's nospec and eagle3-gloo, one launch each, run to the end; then `snakemake --report`."""
    config = plain_default_config()
    config["defaults"]["workload"].update(TINY)
    config["configurations"] = {name: config["configurations"][name] for name in ("nospec", "eagle3-gloo")}
    config["aa_control"] = False
    work = copy_workflow(tmp_path_factory.mktemp("first-hour"))
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    console = console_of(work, "all")
    assert sorted(launched(console)) == ["eagle3-gloo launch-1", "nospec launch-1"], console[-3000:]
    built = run([*SNAKEMAKE, "--report", "results/report.html"], work, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return work


def test_the_report_s_first_screen_holds_the_deploy_line_and_the_verdicts_table(first_run):
    report = first_run / "results"
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


def test_an_edit_then_a_switch_to_another_config_file_and_back(first_run):
    work = first_run
    first = (work / "config.yaml").read_text()
    (work / "config" / "first.yaml").write_text(first)  # the first run's file, kept to switch back to

    # An edit: eagle3-gloo's accept length. Only its launch runs; nospec's files stay as they were.
    before = launch_bytes(work)
    config = yaml.safe_load(first)
    config["configurations"]["eagle3-gloo"]["env"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    edited = console_of(work, "all")
    assert launched(edited) == ["eagle3-gloo launch-1"], edited[-3000:]
    assert {p: p.read_bytes() for p in before} == before, "no launch measured before is touched"
    edited_run = json.loads((launch_path(work, "eagle3-gloo") / "outcome.json").read_text())["run_id"]

    # Another config file (the first run's): every plan of it was measured, so no server starts; the summaries
    # and the report are of its launches. Back to config.yaml: its plans were measured too, nothing starts.
    measured = launch_bytes(work)
    switched = console_of(work, "all", "--configfile", "config/first.yaml")
    assert launched(switched) == [], switched[-3000:]
    summary = json.loads((work / "results" / "eagle3-gloo" / "summary.json").read_text())
    first_gloo = launch_path(work, "eagle3-gloo", configfiles=["config/first.yaml"])
    assert summary["points"][0]["run_id"] == json.loads((first_gloo / "outcome.json").read_text())["run_id"]
    back = console_of(work, "all")
    assert launched(back) == [], back[-3000:]
    summary = json.loads((work / "results" / "eagle3-gloo" / "summary.json").read_text())
    assert summary["points"][0]["run_id"] == edited_run
    assert launch_bytes(work) == measured, "switching relaunches nothing and rewrites no launch"


def test_a_configuration_added_a_ctrl_c_at_once_then_while_it_measures_and_the_rerun(first_run):
    """A Ctrl-C in the first seconds, then one while the new configuration's server measures: the console's last
    line says what was interrupted (the second time, the launch's outcome), no traceback. The rerun launches it
    alone and completes; nothing is left to do. (After the edit above, when run with it: config.yaml as it is.)"""
    work = first_run
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["configurations"]["eagle3-shm"] = dict(plain_default_config()["configurations"]["eagle3-shm"],
                                                  workload={"num_prompts": 4, "output_len": 16, "repeats": 2})
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    measured = launch_bytes(work)
    # Ctrl-C at once (the cost line said more than expected): one line, what was interrupted and how to resume.
    code, text = interrupted_run(work, ["all"], lambda shown: "specsweep: cost: " in shown)
    assert code != 0 and "Traceback" not in text, text[-3000:]
    assert text.rstrip().splitlines()[-1].startswith("specsweep: interrupted (Ctrl-C)"), text[-3000:]
    assert "run the same command again" in text.rstrip().splitlines()[-1]
    # Ctrl-C while the new configuration's server measures.
    log = launch_path(work, "eagle3-shm") / "logs" / "benchmark_server.log"
    code, text = interrupted_run(work, ["all"], lambda _: log.exists() and "[measured" in log.read_text())
    assert code != 0 and "Traceback" not in text, text[-3000:]
    last = text.rstrip().splitlines()[-1]
    assert last == "specsweep eagle3-shm launch-1: outcome: failed benchmark interrupted", text
    assert not (work / "results" / "eagle3-shm" / "summary.json").exists()
    rerun = console_of(work, "all")
    assert launched(rerun) == ["eagle3-shm launch-1"], rerun[-3000:]
    assert json.loads((launch_path(work, "eagle3-shm") / "outcome.json").read_text())["status"] == "ok"
    assert {p: p.read_bytes() for p in measured} == measured, "the launches measured before the Ctrl-C are kept"
    assert ("eagle3-shm", "1") in measured_launches(work)
    assert planned_jobs(work) == []
