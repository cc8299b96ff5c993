"""A target written after ``--configfile`` (which takes one or more files) is read as a config file: one line that
names it and the two ways to write the command, not a schema error about the target's keys.

A target that does not exist yet never reaches the workflow: Snakemake loads every config file while it parses
its arguments (snakemake/settings/types.py:412-415) and ends with its own FileNotFoundError first.
"""

from __future__ import annotations

import subprocess
import sys

from specsweep.plan.config import target_as_configfile
from specsweep.testing.workflow import copy_workflow


def test_an_existing_target_after_configfile_is_one_line_naming_it_and_the_fix(tmp_path):
    work = copy_workflow(tmp_path)
    (work / "results" / "nospec").mkdir(parents=True)
    (work / "results" / "nospec" / "summary.json").write_text('{"format_version": 5, "config": "nospec"}\n')
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--configfile", "config.yaml",
                             "results/nospec/summary.json"], cwd=work, capture_output=True, text=True,  # noqa: S603
                            timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    lines = [line for line in result.stderr.splitlines() if line.startswith("specsweep: ")]
    assert lines == [
        "specsweep: results/nospec/summary.json was read as a config file: --configfile takes every file after it "
        "(Snakemake's parser: one or more), so a target after it is one of them; put the target first "
        "(`snakemake results/nospec/summary.json --configfile config.yaml`) or end the config files with `--` "
        "(`snakemake --configfile config.yaml -- results/nospec/summary.json`)"], out
    assert "Traceback" not in out and "unknown key" not in out, out
    # the two commands it names do what they say (a dry run of that one summary)
    for argv in (["results/nospec/summary.json", "--configfile", "config.yaml"],
                 ["--configfile", "config.yaml", "--", "results/nospec/summary.json"]):
        (work / "results" / "nospec" / "summary.json").unlink(missing_ok=True)
        dry = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", *argv], cwd=work,  # noqa: S603
                             capture_output=True, text=True, timeout=300)
        assert dry.returncode == 0 and "summarize_config" in dry.stdout, dry.stdout[-2000:] + dry.stderr[-2000:]


def test_config_files_outside_results_are_no_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    assert target_as_configfile([tmp_path / "config.yaml", tmp_path / "config" / "other.yaml"]) is None
    line = target_as_configfile([tmp_path / "config" / "other.yaml", tmp_path / "results" / "report.json"])
    assert line is not None and line.startswith("specsweep: results/report.json was read as a config file")
    assert "`snakemake --configfile config/other.yaml -- results/report.json`" in line
