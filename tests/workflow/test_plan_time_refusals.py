"""What `snakemake -n` refuses before any job: the reference engine's flag errors (its own parser, in process),
not the preflight job's RuleException."""

from __future__ import annotations

import subprocess
import sys

import yaml

from specsweep.testing.workflow import REPO, copy_workflow


def test_a_reference_engine_flag_error_stops_the_dry_run_naming_configuration_and_flag(tmp_path):
    work = copy_workflow(tmp_path)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"]["eagle3-shm"]["server_args"]["tp-sise"] = 2
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "all"], cwd=work,  # noqa: S603
                            capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "  - configurations.eagle3-shm: unrecognized arguments: --tp-sise 2" in out, out
    assert "RuleException" not in out and "preflight_config" not in out, out


def test_a_misspelled_nccl_variable_stops_the_dry_run_naming_the_key_and_the_fix(tmp_path):
    """NCCL_ALOG is read by nothing: the configuration would measure NCCL's own choice under another name."""
    work = copy_workflow(tmp_path)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"]["eagle3-shm"].setdefault("env", {})["NCCL_ALOG"] = "Ring"
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "all"], cwd=work,  # noqa: S603
                            capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "  - configurations.eagle3-shm.env.NCCL_ALOG: NCCL_ALOG is not a variable NCCL 2.30.7 reads" in out, out
    assert "did you mean NCCL_ALGO?" in out and "Traceback" not in out, out
