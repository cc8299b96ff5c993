"""What a sweep will cost is said by `specsweep check` and at the start of `snakemake -n`, with a warning when big."""

from __future__ import annotations

import subprocess
import sys

import yaml

from specsweep.testing.workflow import REPO, SNAKEMAKE, copy_workflow, run


def test_check_and_a_dry_run_say_the_cost(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["defaults"]["launches"] = 300
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(config))
    check = subprocess.run([sys.executable, "-m", "specsweep", "check", str(path)], cwd=REPO, capture_output=True,
                           text=True, timeout=300, check=False)
    assert check.returncode == 0, check.stderr
    assert "cost: 4 configuration(s), 1201 planned server launch(es)" in check.stdout
    assert "server launches, more than 100" in check.stderr
    work = copy_workflow(tmp_path / "work")
    dry = run(SNAKEMAKE + ["-n", "all"], work)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "specsweep: cost: 4 configuration(s), 9 planned server launch(es) " in dry.stdout + dry.stderr
