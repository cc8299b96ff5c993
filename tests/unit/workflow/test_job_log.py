"""A job's log keeps its failure: every script runs inside ``workflow.jobs.job_log``, so the traceback of an
exception that ends the job is in ``snakemake.log[0]`` and the job still fails.

Each script used to set ``sys.stderr = log`` inside ``with open(log)``: the traceback was printed after the
file had closed, so the log was empty and the console said "lost sys.stderr"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO
from specsweep.workflow.jobs import job_log

# Runs a script as Snakemake's script: directive does, with a stand-in for the injected ``snakemake`` object.
RUN_SCRIPT = """
import runpy, sys, types
script, log, out, plan = sys.argv[1:]
smk = types.SimpleNamespace(scriptdir=str(__import__("pathlib").Path(script).parent), log=[log], output=[out],
                            params=types.SimpleNamespace(plan=plan))
runpy.run_path(script, init_globals={"snakemake": smk}, run_name="__main__")
"""


def test_a_failing_script_leaves_its_traceback_in_its_log_and_fails(tmp_path: Path) -> None:
    log, out = tmp_path / "resolve_plan.log", tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(REPO / "scripts/resolve_plan.py"), str(log),
                           str(out), "{not json"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False)
    assert proc.returncode != 0
    text = log.read_text()
    assert "Traceback (most recent call last)" in text
    assert "JSONDecodeError" in text and "write_plan" in text
    # the console (Snakemake's) gets it too, and nothing is lost
    assert "JSONDecodeError" in proc.stderr and "lost sys.stderr" not in proc.stderr
    assert not out.exists()


def test_a_script_that_succeeds_logs_as_before(tmp_path: Path) -> None:
    log, out = tmp_path / "resolve_plan.log", tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(REPO / "scripts/resolve_plan.py"), str(log),
                           str(out), json.dumps(plan_dict(name="base"))], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text() == "plan base written\n"
    assert out.exists()


def test_job_log_writes_the_traceback_restores_stderr_and_reraises(tmp_path: Path) -> None:
    path, before = tmp_path / "job.log", sys.stderr
    with pytest.raises(ValueError, match="boom"), job_log(path) as log:
        assert sys.stderr is log
        print("started", file=sys.stderr)
        raise ValueError("boom")
    assert sys.stderr is before
    text = path.read_text()
    assert text.startswith("started\n") and "Traceback" in text and "ValueError: boom" in text


def test_job_log_a_chosen_exit_is_no_crash(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    with pytest.raises(SystemExit), job_log(path):
        raise SystemExit("preflight: 2 problems")
    assert path.read_text() == "preflight: 2 problems\n"
    with pytest.raises(SystemExit), job_log(path, "a"):
        raise SystemExit(1)
    assert path.read_text() == "preflight: 2 problems\n"


def test_every_script_runs_in_job_log() -> None:
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text()
        if "snakemake.log" not in text:
            continue
        assert "with job_log(snakemake.log[0]" in text, script.name
        assert "sys.stderr =" not in text, script.name


def test_a_ctrl_c_ends_the_job_without_a_traceback(tmp_path: Path) -> None:
    """The job has torn down and said its outcome: one line in its log, exit status 130, nothing on the console."""
    log = tmp_path / "job.log"
    # Python's own Ctrl-C handler, as under Snakemake: a shell that starts a command in the background gives it
    # SIGINT ignored, and Python then keeps it ignored (a test run started that way saw exit status 0)
    code = ("import os, signal, sys; from specsweep.workflow.jobs import job_log\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            f"with job_log({str(log)!r}) as log:\n"
            "    print('outcome: failed launch interrupted', file=log)\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 130 and proc.stderr == "", proc.stderr
    assert log.read_text() == "outcome: failed launch interrupted\ninterrupted (SIGINT): the job stopped here\n"
