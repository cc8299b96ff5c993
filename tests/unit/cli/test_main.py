"""``python -m specsweep check`` and ``failed``: what a user runs before and after a sweep."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from specsweep.__main__ import main
from specsweep.testing.workflow import REPO


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsweep", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_check_exits_non_zero_on_a_typo_d_flag_with_the_engines_own_parser(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"]["nospec"]["server_args"]["tp-sise"] = 2
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _cli("check", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "configurations.nospec" in result.stderr and "--tp-sise" in result.stderr
    good = _cli("check", str(REPO / "config.yaml"))
    assert good.returncode == 0, good.stderr
    assert good.stdout.count("python3 -m specsweep.refengine") == len(config["configurations"]) + 1  # + the control


def test_check_gives_file_and_line_of_invalid_yaml(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("baseline: nospec\nconfigurations:\n  nospec: {server_args: {a: 1\n")
    result = _cli("check", str(path))
    assert result.returncode == 2
    assert f'"{path}", line 3' in result.stderr


def _outcome(results: Path, name: str, status: str, launch: str = "1") -> None:
    (results / name / f"launch-{launch}").mkdir(parents=True)
    (results / name / f"launch-{launch}" / "outcome.json").write_text(json.dumps({"status": status, "run_id": "0" * 12}))


def test_failed_lists_only_configurations_of_the_current_config_files(tmp_path, capsys, monkeypatch):
    """After a --configfile switch, results/ still holds the other file's configurations; -R could not make them."""
    results = tmp_path / "results"
    for name, status in (("nospec", "failed"), ("eagle3-shm", "ok"), ("eagle3-gloo", "contaminated"),
                         ("kimi-only", "failed")):
        _outcome(results, name, status)
    _outcome(results, "nospec", "ok", launch="aa")  # per launch: the control of a failed baseline may be ok
    monkeypatch.chdir(tmp_path)
    assert main(["failed", str(REPO / "config.yaml"), "--results", str(results)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == [str(results / "eagle3-gloo/launch-1/outcome.json"), str(results / "nospec/launch-1/outcome.json")]
    other = tmp_path / "other.yaml"
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"] = {"kimi-only": config["configurations"]["nospec"]}
    config["baseline"] = "kimi-only"
    config.pop("positive_control")  # its twin is not in this file
    other.write_text(yaml.safe_dump(config))
    assert main(["failed", str(other), "--results", str(results)]) == 0
    assert capsys.readouterr().out.split() == [str(results / "kimi-only/launch-1/outcome.json")]
