"""The SGLang preflight as a new user runs it: the package in a fresh virtualenv, installed by the README's line.

Why: a parser venv made with ``--system-site-packages`` from inside a
virtualenv sees the BASE interpreter's site-packages, not the user's venv, so
a closure that counted on "already installed" packages broke there
(``No module named 'multidict'``), while CI, installing into the system
interpreter, could not see it. This runs the preflight of one SGLang
configuration through the workflow, from a clone whose package lives only in a
fresh venv, against the parser environment the workflow keeps in the user's
cache (built here, from inside that venv, when no earlier test built it), and
checks that the environment is self-contained: no system site-packages, and
SGLang's parser and model code import with ``python -I``. It fails (never
skips) when anything is missing. One configuration, not the matrix's 52: the
tests of tests/workflow/test_dag.py run preflight jobs of the matrix through
the DAG and every configuration's job input through the same checks.
Minutes (the README's install into an empty venv): slow.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsweep.engines.sglang.preflight import IMPORT_CHECK, parser_env_size, wheels_dir
from specsweep.testing.parser_env import parser_env_dir
from specsweep.testing.workflow import REPO, copy_workflow

README_INSTALL = "python3 -m pip install -r requirements.txt -e ."


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)  # noqa: S603
    assert proc.returncode == 0, f"{argv!r}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_preflight_passes_from_a_fresh_virtualenv(tmp_path):
    assert README_INSTALL in (REPO / "README.md").read_text(), "the README's install line changed"
    clone = copy_workflow(tmp_path / "clone")
    user_venv = tmp_path / "user-venv"
    # The user's environment: no PYTHONPATH pointing into another checkout, nothing from this process.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPECSWEEP_PARSER_ENV")}
    _run([sys.executable, "-m", "venv", str(user_venv)], clone, env, 300)
    env["PATH"] = f"{user_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(user_venv)
    # The README's line, run by the venv's python3 (first on PATH), in the clone.
    _run(["python3", *README_INSTALL.split()[1:]], clone, env, 1800)
    parser_env = parser_env_dir()
    start = time.monotonic()
    _run(["snakemake", "--cores", "1", "results/nospec/preflight.json", "--configfile",
          "config/kimi-k25-8gpu.yaml", "config/kimi-k25-8gpu-dummy.yaml", "--config", f"parser_env={parser_env}"],
         clone, env, 3600)
    print(f"snakemake preflight of one configuration from a fresh venv: {time.monotonic() - start:.0f} s "
          f"(parser env {parser_env}: {parser_env_size(clone / 'envs' / 'sglang-parser.txt')})")
    # Self-contained: no system site-packages, and SGLang's parser and model code import in isolation.
    cfg = (parser_env / "pyvenv.cfg").read_text()
    assert re.search(r"^include-system-site-packages = false$", cfg, re.MULTILINE), cfg
    _run([str(parser_env / "bin" / "python"), "-I", "-c", IMPORT_CHECK], clone, env, 600)
    assert not wheels_dir(parser_env).exists(), "the downloads are removed once the venv is complete"
    assert json.loads((clone / "results" / "nospec" / "preflight.json").read_text())["ok"]
