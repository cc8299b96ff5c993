"""The ``specsweep`` command (``check``, ``failed``, ``--version``): what a user runs before and after a sweep.

Every error of the command is one line per problem on stderr, exit 2, never a traceback."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from specsweep import __version__
from specsweep.__main__ import main
from specsweep.contracts import layout
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_sweep
from specsweep.testing.datasets import write_sharegpt
from specsweep.testing.workflow import REPO, plain_default_config
from specsweep.workflow.inputs import plan_keys


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsweep", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_check_exits_non_zero_on_a_typo_d_flag_with_the_engines_own_parser(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"]["nospec"]["server_args"]["tp-sise"] = 2
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _cli("check", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
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


@pytest.mark.parametrize("text, kind", [("- nospec\n- eagle3-shm\n", "list"), ("just a string\n", "string")])
def test_check_of_a_yaml_file_that_is_not_a_mapping_is_one_line(tmp_path, text, kind):
    path = tmp_path / "notamap.yaml"
    path.write_text(text)
    line = _one_line_error(_cli("check", str(path)), str(path), f"got a YAML {kind}", "mapping")
    assert line.startswith(f"specsweep check: {path}: ")


def _plans(path: Path) -> dict[str, dict]:
    """The plans the config file at ``path`` resolves (``plan_keys``: where their launches are stored)."""
    return resolve_sweep(load_configs([path]), str(path))[0]


def _outcome(results: Path, name: str, key: str, status: str, launch: str = "1") -> Path:
    """A launch's files (a complete launch), its outcome with ``status``; returns the outcome's path."""
    outcome = Path(layout.launch_file(name, key, launch, "outcome", str(results)))
    (outcome.parent / layout.NCCL_LOG_DIR).mkdir(parents=True)
    for leaf in layout.LAUNCH_FILES.values():
        if leaf != layout.NCCL_LOG_DIR:
            (outcome.parent / leaf).write_text("{}")
    outcome.write_text(json.dumps({"status": status, "run_id": "0" * 12}))
    return outcome


def test_failed_lists_only_the_launches_of_the_plans_of_the_current_config_files(tmp_path, capsys, monkeypatch):
    """After a --configfile switch, results/ still holds the other file's configurations and plans (a plan of
    the same name too); -R could not make them."""
    results = tmp_path / "results"
    other = tmp_path / "other.yaml"
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"] = {"kimi-only": config["configurations"]["nospec"],
                                "nospec": dict(config["configurations"]["nospec"], env={"OTHER": "1"})}
    config["baseline"] = "kimi-only"
    config.pop("positive_control")  # its twin is not in this file
    other.write_text(yaml.safe_dump(config))
    plans = _plans(REPO / "config.yaml")
    keys, other_keys = plan_keys(plans), plan_keys(_plans(other))
    assert keys["nospec"] != other_keys["nospec"]
    expected = [_outcome(results, "eagle3-gloo", keys["eagle3-gloo"], "contaminated"),
                _outcome(results, "nospec", keys["nospec"], "failed")]
    _outcome(results, "nospec", keys["nospec"], "ok", launch="aa")  # per launch: the control of a failed baseline
    kimi = _outcome(results, "kimi-only", other_keys["kimi-only"], "failed")
    other_nospec = _outcome(results, "nospec", other_keys["nospec"], "failed")
    monkeypatch.chdir(tmp_path)
    assert main(["failed", str(REPO / "config.yaml"), "--results", str(results)]) == 0
    assert capsys.readouterr().out.split() == [str(p) for p in expected]
    # a launch whose outcome.json was deleted after its summary was built (Snakemake would not notice):
    # listed, -R reruns it
    deleted = _outcome(results, "eagle3-shm", keys["eagle3-shm"], "ok")
    (results / "eagle3-shm" / "plan.json").write_text(json.dumps(plans["eagle3-shm"]))  # the current plan
    (results / "eagle3-shm" / "summary.json").write_text(json.dumps({"launches": [{"launch": "1"}]}))
    deleted.unlink()
    assert main(["failed", str(REPO / "config.yaml"), "--results", str(results)]) == 0
    assert capsys.readouterr().out.split() == [str(p) for p in sorted([*expected, deleted])]
    assert main(["failed", str(other), "--results", str(results)]) == 0
    assert capsys.readouterr().out.split() == [str(kimi), str(other_nospec)]


def _one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """The command failed as a user error: exit 2, one line on stderr naming ``words``, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def test_version_is_the_package_version():
    result = _cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"specsweep {__version__}", result


def test_the_console_command_is_this_main_and_the_version_has_one_home():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    module, _, func = project["scripts"]["specsweep"].partition(":")
    assert getattr(importlib.import_module(module), func) is main
    assert "version" in project["dynamic"] and "version" not in project


@pytest.mark.parametrize("args, words", [
    (["check", "nosuch.yaml"], ["specsweep check", "nosuch.yaml", "no such file"]),
    (["check", "config"], ["specsweep check", "config is a directory", "config file"]),
    (["failed", "--results", "/nonexistent"], ["specsweep failed", "/nonexistent", "no such directory"]),
    (["check", "--no-such-option"], ["specsweep", "--no-such-option"]),
    ([], ["specsweep", "command"]),
])
def test_each_cli_error_is_one_line_with_exit_2(args, words):
    _one_line_error(_cli(*args), *words)


def test_check_outside_the_workflow_directory_says_where_to_run_it(tmp_path):
    line = _one_line_error(_cli("check", cwd=tmp_path), "no config.yaml", str(tmp_path))
    assert "workflow's directory" in line and "Snakefile" in line


def test_check_from_a_subdirectory_reads_model_paths_from_the_workflow_directory():
    result = _cli("check", "../config.yaml", cwd=REPO / "docs")
    assert result.returncode == 0, result.stderr
    assert "no config.json" not in result.stderr and f"checked from {REPO}" in result.stderr


def test_a_missing_relative_model_path_says_where_it_was_looked_for(tmp_path):
    config = plain_default_config()  # relative model paths, in a directory that is no checkout
    path = tmp_path / "elsewhere.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _cli("check", str(path), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"a relative path: looked for under {tmp_path}" in result.stderr, result.stderr


def test_each_config_problem_is_a_line_of_its_own_naming_file_and_key(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["configurations"]["nospec"]["workload"] = {"num_prompts": 0}
    config["configurations"]["eagle3-shm"]["launches"] = "two"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _cli("check", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert all(line.startswith(f"specsweep check: {path}: configurations.") for line in lines), lines


def _broken(tmp_path: Path, kind: str) -> Path:
    config = plain_default_config()  # without the positive control, which would repeat eagle3-shm's problem
    if kind == "dataset":
        data = write_sharegpt(tmp_path / "two.json", 2)
        config["defaults"]["workload"].update(num_prompts=50, dataset={"format": "sharegpt", "path": str(data)})
        config["configurations"] = {"nospec": config["configurations"]["nospec"]}
    elif kind == "baseline":
        config["baseline"] = "eagle3-shm"
    elif kind == "variant":
        config["configurations"]["eagle3-shm"]["variant"] = "mscclpp"
    elif kind == "flag":
        config["configurations"]["eagle3-shm"]["server_args"]["speculative-num-steps"] = 5
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("kind, words", [
    ("dataset", ["configurations.nospec.workload.num_prompts: ", "distinct prompt(s)", "num_prompts=50"]),
    ("baseline", ["baseline: 'eagle3-shm' runs speculative decoding"]),
    ("variant", ["configurations.eagle3-shm.variant: unknown variant(s) ['mscclpp'] for the reference engine"]),
    ("flag", ["configurations.eagle3-shm: --speculative-num-draft-tokens must equal"]),
])
def test_check_refuses_each_input_that_used_to_pass_in_one_line(tmp_path, kind, words):
    path = _broken(tmp_path, kind)
    line = _one_line_error(_cli("check", str(path)), *words)
    assert line.startswith(f"specsweep check: {path}: ")


def test_check_prints_each_configuration_s_environment_beside_its_argv():
    result = _cli("check", str(REPO / "config.yaml"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("eagle3-gloo: "))
    assert lines[at + 1] == " " * len("eagle3-gloo") + "  env: OMP_NUM_THREADS=1 SGLANG_SIMULATE_ACC_LEN=2.5"


@pytest.mark.parametrize("where, words", [
    ("env", ["configurations.eagle3-gloo.env.NCCL_ALOG: ", "did you mean NCCL_ALGO?"]),
    ("axes", ["configurations.eagle3-gloo.axes[0].env.NCCL_PROTO[1]: unknown element 'LL129'", "allowed: "]),
])
def test_check_refuses_a_misspelled_nccl_name_or_value_in_one_line(tmp_path, where, words):
    config = plain_default_config()
    entry = config["configurations"]["eagle3-gloo"]
    if where == "env":
        entry["env"]["NCCL_ALOG"] = "Ring"
    else:
        entry["axes"] = [{"env.NCCL_PROTO": ["LL", "LL129"]}]
    path = tmp_path / f"{where}.yaml"
    path.write_text(yaml.safe_dump(config))
    line = _one_line_error(_cli("check", str(path)), *words)
    assert line.startswith(f"specsweep check: {path}: ")
