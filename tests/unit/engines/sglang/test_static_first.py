"""The SGLang-free checks run first: in ``check`` and when the workflow starts, before any parser venv.

A configuration that cannot run for a reason that needs no SGLang (EAGLE without
a draft model, fewer GPUs than ranks) must say so in a second, with one line
naming the key, not after gigabytes of parser environment; and a parser
environment that cannot be built ends in a message that says how to resume.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from specsweep.__main__ import parser_env_notice
from specsweep.engines.sglang.preflight import (
    DEFAULT_REQUIREMENTS,
    ParserEnvError,
    ensure_parser_env,
    parser_env_dir,
    parser_env_size,
    wheels_dir,
)
from specsweep.testing.workflow import REPO, copy_workflow

NO_DRAFT = """\
configurations:
  eagle3:
    server_args:
      speculative-draft-model-path: null
"""
MATRIX = ["config/kimi-k25-8gpu.yaml", "config/kimi-k25-8gpu-dummy.yaml"]
DRAFT_ERROR = ("configurations.eagle3.server_args.speculative-draft-model-path: "
               "speculative-algorithm EAGLE3 needs a draft model path")


def test_check_stops_on_a_static_error_before_building_the_parser_env(tmp_path):
    overlay = tmp_path / "no-draft.yaml"
    overlay.write_text(NO_DRAFT)
    venv = tmp_path / "parser-env"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specsweep", "check", *MATRIX, str(overlay),
                           "--parser-env", str(venv)], cwd=REPO, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr  # a problem of the configuration (the CLI's exit status 2)
    assert f"specsweep check: {' + '.join([*MATRIX, str(overlay)])}: {DRAFT_ERROR}" in proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and "building SGLang's parser environment" not in proc.stderr
    assert not venv.exists() and not wheels_dir(venv).exists()
    assert elapsed < 5, f"check took {elapsed:.1f} s"


def test_snakemake_dry_run_refuses_a_static_error_at_plan_time(tmp_path):
    work = copy_workflow(tmp_path / "work")
    (work / "no-draft.yaml").write_text(NO_DRAFT)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "preflight",
                           "--configfile", *MATRIX, "no-draft.yaml"], cwd=work, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert DRAFT_ERROR in out
    assert "Traceback" not in out and "make_parser_env" not in out


def test_parser_env_lives_outside_results_keyed_by_content(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("sglang==0.5.23\n")
    first = parser_env_dir(req, cache=tmp_path / "cache")
    assert first.parent == tmp_path / "cache" / "specsweep" and first.name.startswith("sglang-parser-")
    req.write_text("sglang==0.5.24\n")
    assert parser_env_dir(req, cache=tmp_path / "cache") != first
    assert "results" not in parser_env_dir().parts


def test_failed_build_is_a_message_that_says_how_to_resume(tmp_path):
    """Not a traceback: what failed, the log's last lines, and that the downloads are kept for the rerun."""
    req = tmp_path / "req.txt"
    req.write_text("sglang==0.5.23\n")
    venv = tmp_path / "venv"
    kept = wheels_dir(venv) / "already-downloaded.whl"
    kept.parent.mkdir(parents=True)
    kept.write_text("")
    with pytest.raises(ParserEnvError) as info:
        ensure_parser_env(venv, req, python="/bin/false", timeout_s=30)
    message = str(info.value)
    assert message.startswith("SGLang's parser environment: `/bin/false -m venv ")
    assert "failed (exit status 1)" in message and f"{venv.name}.build.log" in message
    assert f"Run the same command again to resume: what was downloaded is kept in {wheels_dir(venv.resolve())}" \
        in message
    assert kept.exists()


def test_check_ends_a_failed_build_with_one_message(tmp_path):
    """`check` on a clean configuration whose parser venv cannot be built: the builder's message, exit 1."""
    bad = tmp_path / "req.txt"
    bad.write_text("specsweep-no-such-package==0.0.0\n")
    venv = tmp_path / "parser-env"
    proc = subprocess.run([sys.executable, "-m", "specsweep", "check", *MATRIX, "--parser-env", str(venv),
                           "--requirements", str(bad)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert f"building SGLang's parser environment in {venv}" in proc.stderr
    assert "error: SGLang's parser environment: downloading the pinned packages" in proc.stderr
    assert "Traceback" not in proc.stderr.split("last lines of")[0]


def test_preflight_of_a_config_without_sglang_builds_nothing(tmp_path):
    venv = tmp_path / "parser-env"
    proc = subprocess.run([sys.executable, "-m", "specsweep", "preflight", "config.yaml", "--parser-env", str(venv)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "no SGLang configuration" in proc.stderr and "building" not in proc.stderr
    assert not venv.exists() and not wheels_dir(venv).exists()
    assert all(r["ok"] for r in json.loads(proc.stdout).values())


def test_check_without_the_parser_env_builds_nothing_and_says_what_it_skipped(tmp_path):
    venv = tmp_path / "parser-env"
    proc = subprocess.run([sys.executable, "-m", "specsweep", "check", *MATRIX, "--parser-env", str(venv),
                           "--no-parser-env"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "building" not in proc.stderr and not venv.exists() and not wheels_dir(venv).exists()
    assert "SGLang's own parser and model check skipped (--no-parser-env)" in proc.stderr
    assert proc.stdout.count("sglang.launch_server") >= 10


def test_the_build_notice_says_how_big_where_and_how_to_skip(tmp_path):
    venv = tmp_path / "parser-env"
    notice = parser_env_notice(venv, DEFAULT_REQUIREMENTS, ["a", "b", "c", "d"])
    assert f"in {venv} " in notice and parser_env_size(DEFAULT_REQUIREMENTS) in notice
    assert "GB to download" in notice and "GB on disk" in notice
    assert "4 SGLang configuration(s) (a, b, c and 1 more)" in notice and "--no-parser-env" in notice
