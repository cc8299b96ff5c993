"""What a sweep will cost is said by `specsweep check` and at the start of `snakemake -n`, with a warning when big;
so is the download of SGLang's parser environment when the run must build it first."""

from __future__ import annotations

import subprocess
import sys

import yaml

from specsweep.engines.sglang.preflight import parser_env_size
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


def test_a_run_that_must_build_the_parser_environment_says_so_with_its_size_before_any_job(tmp_path):
    """Its job (make_parser_env) has no banner on the quiet console: the start says what and how big."""
    work = copy_workflow(tmp_path / "work")
    (work / "elsewhere.yaml").write_text(yaml.safe_dump({"parser_env": str(tmp_path / "venv")}))
    dry = run(SNAKEMAKE + ["-n", "preflight", "--configfile", "config/kimi-k25-8gpu.yaml", "elsewhere.yaml"], work)
    assert dry.returncode == 0, dry.stderr[-3000:]
    said = [x for x in dry.stderr.splitlines()
            if x.startswith("specsweep: this run first builds SGLang's parser environment: ")]
    assert len(said) == 1 and parser_env_size() in said[0] and str(tmp_path / "venv") in said[0], said
    assert "make_parser_env " in dry.stdout, "the job it announces"
    default = run(SNAKEMAKE + ["-n", "all"], work)  # the reference engine's configurations need none
    assert default.returncode == 0 and "parser environment" not in default.stdout + default.stderr
