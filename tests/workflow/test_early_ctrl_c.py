"""Ctrl-C in Snakemake's first seconds, before any server job ran: the console ends with one line that says what was
interrupted and how to resume, and shows no traceback; the same command then runs.

A real ``snakemake`` process on a copy of the workflow and its default config, given Python's own SIGINT handler
(a process started in the background inherits SIGINT ignored), and a SIGINT to its process group, as Ctrl-C in a
terminal sends: while Snakemake reads the workflow (at the cost line, which the workflow prints as it is read),
and once the first jobs ran (a plan written) but no server was launched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specsweep.testing.workflow import copy_workflow, interrupted_run

pytestmark = pytest.mark.slow

READING = ("specsweep: interrupted (Ctrl-C) while Snakemake read the workflow, before any job ran; "
           "run the same command again to start")
RUNNING = ("specsweep: interrupted (Ctrl-C): the running jobs stop (a server job says its outcome); "
           "run the same command again to resume (launches measured already are kept)")


def _reruns(work: Path) -> None:
    dry = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "all"], cwd=work,  # noqa: S603
                         capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0 and "benchmark_server" in dry.stdout, dry.stdout[-2000:] + dry.stderr[-2000:]


def test_ctrl_c_while_the_workflow_is_read_is_one_line_and_no_traceback(tmp_path):
    work = copy_workflow(tmp_path)
    code, shown = interrupted_run(work, ["all"], lambda text: "specsweep: cost: " in text)
    assert code != 0 and "Traceback" not in shown and "KeyboardInterrupt" not in shown, shown[-3000:]
    assert shown.rstrip().splitlines()[-1] in (READING, RUNNING), shown[-3000:]
    print(shown.rstrip().splitlines()[-1])
    _reruns(work)


def test_ctrl_c_after_the_first_jobs_before_any_launch_is_one_line_and_no_traceback(tmp_path):
    work = copy_workflow(tmp_path)
    code, shown = interrupted_run(work, ["all"], lambda _: any((work / "results").glob("*/plans/*/plan.json")))
    assert code != 0 and "Traceback" not in shown and "KeyboardInterrupt" not in shown, shown[-3000:]
    assert shown.rstrip().splitlines()[-1] == RUNNING, shown[-3000:]
    assert not any((work / "results").glob("*/plans/*/launch-*/outcome.json")), "no server job ran"
    _reruns(work)
