"""SGLang's parser environment is a download of gigabytes: a run that must build it says so, with its size and
where it goes, when it starts (``snakemake -n`` too) and as its job starts and ends; Snakemake's quiet console
shows no job banner, so without these lines the build was silent for minutes. (The dry run's line:
tests/workflow/test_cost_said.py.)"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, parser_env_size
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_sweep
from specsweep.testing.workflow import REPO
from specsweep.workflow import jobs
from specsweep.workflow.inputs import parser_env_build_line

KIMI = REPO / "config" / "kimi-k25-8gpu.yaml"


def _plans(path: Path) -> tuple[dict, dict]:
    config = load_configs([path])
    return resolve_sweep(config, str(path))[0], config


def _built(venv: Path, requirements: Path = DEFAULT_REQUIREMENTS) -> Path:
    """A venv directory as a finished build leaves it (its python and the marker of its pins)."""
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").write_text("")
    (venv / ".specsweep-requirements.sha256").write_text(hashlib.sha256(requirements.read_bytes()).hexdigest() + "\n")
    return venv


def test_a_run_of_sglang_configurations_says_the_build_its_size_and_where_it_goes(tmp_path):
    plans, config = _plans(KIMI)
    venv = tmp_path / "venv"
    line = parser_env_build_line(plans, {**config, "parser_env": str(venv)})
    assert line is not None
    assert line.startswith(f"this run first builds SGLang's parser environment: building SGLang's parser "
                           f"environment in {venv} (once per {DEFAULT_REQUIREMENTS}: {parser_env_size()}; log ")
    assert "GB" in parser_env_size() and f"to check {len(plans)} SGLang configuration(s)" in line, line
    assert line.endswith("before any image build or launch")


def test_nothing_is_said_when_it_is_built_when_no_configuration_needs_it_or_images_check_them(tmp_path):
    plans, config = _plans(KIMI)
    assert parser_env_build_line(plans, {**config, "parser_env": str(_built(tmp_path / "venv"))}) is None
    assert parser_env_build_line(plans, {**config, "parser_env": str(tmp_path / "none"),
                                         "preflight_parser": "image"}) is None
    plans, config = _plans(REPO / "config.yaml")  # the reference engine checks with its own parser, in process
    assert parser_env_build_line(plans, {**config, "parser_env": str(tmp_path / "none")}) is None


def test_the_job_says_on_the_console_when_it_builds_and_when_it_is_done(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    requirements = tmp_path / "req.txt"
    requirements.write_text("# size: about 3.1 GB to download\nsglang==0.5.23\n")

    def build(venv_dir, reqs):  # what a finished build leaves; pip's part is the builder's own tests'
        return str(_built(Path(venv_dir), Path(reqs)) / "bin" / "python")

    monkeypatch.setattr(jobs, "ensure_parser_env", build)
    clock = iter([100.0, 412.0])
    console, log = io.StringIO(), io.StringIO()
    jobs.make_parser_env(venv, requirements, venv / "ready.json", log, console=console, clock=lambda: next(clock))
    assert console.getvalue().splitlines() == [
        f"specsweep make_parser_env: building SGLang's parser environment in {venv} (about 3.1 GB to download; "
        f"log {tmp_path / 'venv.build.log'})",
        "specsweep make_parser_env: SGLang's parser environment ready after 312 s"]
    assert json.loads((venv / "ready.json").read_text())["python"] == str(venv / "bin" / "python")
    console = io.StringIO()  # built already: the job only writes its ready file
    jobs.make_parser_env(venv, requirements, venv / "ready.json", io.StringIO(), console=console)
    assert console.getvalue() == ""
