"""The workflow without running servers: lint, job counts, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specsweep.plan.config import load_configs
from specsweep.testing.workflow import REPO, SNAKEMAKE, copy_workflow, job_counts, plan_key_in, run


def test_lint_is_clean(tmp_path):
    work = copy_workflow(tmp_path)
    result = run([sys.executable, "-m", "snakemake", "--lint"], work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def test_dry_run_shows_every_stage_per_configuration(tmp_path):
    work = copy_workflow(tmp_path)
    (work / "config.yaml").write_text((REPO / "config.yaml").read_text())
    result = run(SNAKEMAKE + ["-n", "all"], work)
    assert result.returncode == 0, result.stderr
    n = len(load_configs([work / "config.yaml"])["configurations"])  # the positive control included
    assert n == len(yaml.safe_load((work / "config.yaml").read_text())["configurations"]) + 1
    counts = job_counts(result.stdout)
    assert counts == {
        "resolve_plan": n,
        "preflight_config": n,
        "select_plan": n,  # results/<config>/plan.json, the current plan, which the summary reads
        "benchmark_server": 2 * n + 1,  # two launches each, and the baseline's A/A control
        "burn_in_host": 1,  # before round 1
        "plan_round": 2,  # two planned rounds, each planned and judged
        "judge_round": 2,
        "summarize_config": n,
        "analyze_sweep": 1,
        "render_report": 1,
        "all": 1,
    }


def _write_config(work: Path, mutate) -> None:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    mutate(config)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def test_bad_config_fails_before_any_job_with_key_path_and_allowed_values(tmp_path):
    work = copy_workflow(tmp_path)
    _write_config(work, lambda c: c["configurations"]["nospec"].update(engine="sglng"))
    result = run(SNAKEMAKE + ["all"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config.yaml" in out
    assert "configurations.nospec.engine" in out and "['reference', 'sglang']" in out
    assert not (work / "results").exists(), "nothing may run before the config is valid"


def test_invalid_configuration_name_is_refused(tmp_path):
    work = copy_workflow(tmp_path)
    _write_config(work, lambda c: c["configurations"].update({"Bad Name": {"extends": "nospec"}}))
    result = run(SNAKEMAKE + ["-n", "all"], work)
    assert result.returncode != 0
    assert "configurations.Bad Name" in result.stdout + result.stderr
    assert "a-z, 0-9" in result.stdout + result.stderr


def test_duplicate_configuration_name_is_refused(tmp_path):
    work = copy_workflow(tmp_path)
    text = (REPO / "config.yaml").read_text()
    text += "\n  nospec:\n    description: a second entry of the same name\n"
    (work / "config.yaml").write_text(text)
    result = run(SNAKEMAKE + ["-n", "all"], work)
    assert result.returncode != 0
    assert "duplicate key 'nospec'" in result.stdout + result.stderr


def test_unknown_flag_fails_before_any_job(tmp_path):
    """A flag the reference engine's parser refuses stops the workflow at its start (the plan-time
    check), naming the configuration and the flag, before any preflight or server job ran."""
    work = copy_workflow(tmp_path)
    _write_config(work, lambda c: c["configurations"]["eagle3-shm"]["server_args"].update({"speculative-num-stepz": 3}))
    result = run(SNAKEMAKE + ["preflight", "--keep-going"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "configurations.eagle3-shm: unrecognized arguments: --speculative-num-stepz 3" in out, out
    assert not list(work.glob("results/**/preflight.json")), "no job may have run"
    assert not list(work.glob("results/**/launch-*/launch.json")), "no server may have been launched"


def _mark_write_plan(package: Path) -> Path:
    """Make resolve_plan's job log name the file of the package it ran; returns that file."""
    jobs = package / "workflow" / "jobs.py"
    source = jobs.read_text()
    marker = 'print(f"plan {plan.name} written", file=log)'
    assert marker in source
    jobs.write_text(source.replace(marker, marker + "\n    print(f'package of {__file__}', file=log)"))
    return jobs


def test_jobs_run_the_package_of_their_own_checkout(tmp_path):
    """A job's script imports specsweep from the checkout it belongs to, not from another version
    installed on the machine (here: a copy on PYTHONPATH, which comes before the directory Snakemake
    adds to a script's path), so that what plans a job and what runs it are the same code."""
    work = copy_workflow(tmp_path / "checkout")
    installed = tmp_path / "installed"
    shutil.copytree(work / "specsweep", installed / "specsweep")
    ours, theirs = _mark_write_plan(work / "specsweep"), _mark_write_plan(installed / "specsweep")
    assert theirs != ours
    result = subprocess.run(SNAKEMAKE + ["results/nospec/plan.json"], cwd=work, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONPATH": str(installed)})
    assert result.returncode == 0, result.stdout + result.stderr
    stored = work / "results" / "nospec" / "plans" / plan_key_in(work, "nospec")
    log = (stored / "logs" / "resolve_plan.log").read_text()
    used = [Path(line.removeprefix("package of ")).resolve() for line in log.splitlines()
            if line.startswith("package of ")]
    assert used == [ours.resolve()], log


GPU_MATRIX = ["--configfile", "config/kimi-k25-8gpu.yaml"]
GPU_MATRIX_DUMMY = GPU_MATRIX + ["config/kimi-k25-8gpu-dummy.yaml"]


def _gpu_matrix_names(work: Path) -> list[str]:
    """The configurations of the GPU matrix once its NCCL grid is expanded."""
    return sorted(load_configs([work / "config/kimi-k25-8gpu.yaml"])["configurations"])


def test_gpu_matrix_dry_run_shows_the_full_matrix(tmp_path):
    work = copy_workflow(tmp_path)
    n = len(_gpu_matrix_names(work))
    n_images = len(yaml.safe_load((work / "config/kimi-k25-8gpu.yaml").read_text())["images"])
    for extra in (GPU_MATRIX, GPU_MATRIX_DUMMY):
        # A parser venv of its own (the default one, in the user's cache, may be built already).
        result = run(SNAKEMAKE + ["-n", "all", *extra, "--config", f"parser_env={tmp_path / 'parser-env'}"], work)
        assert result.returncode == 0, result.stderr
        counts = job_counts(result.stdout)
        assert counts["benchmark_server"] == n + 1 and counts["preflight_config"] == n  # + the A/A control
        assert counts["build_image"] == n_images and counts["make_parser_env"] == 1
    # The NCCL grid: 3 algorithms x 3 protocols x 2 channel caps x 2 buffer sizes, and the rest of the matrix.
    assert sum(name.startswith("nccl-") and name.count("-") == 4 for name in _gpu_matrix_names(work)) == 36
    assert n >= 15 + 36


#: Configurations of the weight-free GPU matrix whose preflight jobs run through the DAG below: one per image the
#: matrix builds (each job gets its image's spec in its params), one with NCCL environment variables, and one
#: whose label expects a failed launch (plan.json holds no labels).
DAG_PREFLIGHTS = ("deepep", "fi-fusion", "mscclpp", "nccl-tree-bare")


@pytest.mark.slow
def test_gpu_matrix_preflight_target_is_green_on_a_cpu(tmp_path):
    """The `preflight` target plans one preflight_config job per configuration and no image build; those jobs
    put the argv through SGLang 0.5.23's own parser and the model and draft directories through SGLang's own
    ModelConfig/processor path, via the DAG (resolve_plan, preflight_config, select_plan).

    A job per configuration costs an SGLang import (~8 s of CPU), so the DAG runs the jobs of
    ``DAG_PREFLIGHTS``; every configuration's job input (its plan.json and image spec) goes through the same
    checks in one process in ``test_every_gpu_matrix_plan_passes_preflight_as_its_job_reads_it``. The
    preflight venv is the tests' shared one (``specsweep.testing.parser_env``, built first, failing rather
    than skipping), given as ``parser_env``: a private copy would cost 5.5 GB and minutes per run.
    """
    from specsweep.testing.parser_env import parser_env_dir, parser_python

    parser_python()
    work = copy_workflow(tmp_path)
    names = _gpu_matrix_names(work)
    parser_env = ["--config", f"parser_env={parser_env_dir()}"]
    planned = run(SNAKEMAKE + ["-n", "preflight", *GPU_MATRIX_DUMMY, *parser_env], work)
    assert planned.returncode == 0, planned.stderr[-3000:]
    counts = job_counts(planned.stdout)
    assert "build_image" not in counts, "preflight builds no image"
    assert counts["preflight_config"] == counts["resolve_plan"] == counts["select_plan"] == len(names), counts
    assert set(DAG_PREFLIGHTS) <= set(names)
    # Two jobs at a time, as a user's `--cores` would.
    two_cores = SNAKEMAKE[:-2] + ["--cores", "2"]
    targets = [f"results/{name}/preflight.json" for name in DAG_PREFLIGHTS]
    result = run(two_cores + [*targets, *GPU_MATRIX_DUMMY, *parser_env], work, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    for name in DAG_PREFLIGHTS:
        pre = json.loads((work / "results" / name / "preflight.json").read_text())
        assert pre["ok"] and pre["checked_with"].startswith("sglang 0.5.23"), pre
        assert pre["loaded"][0]["architectures"] == ["DeepseekV3ForCausalLM"], pre["loaded"]
    assert not list((work / "results").glob("images/*.json")), "preflight builds no image"


@pytest.mark.slow
def test_every_gpu_matrix_plan_passes_preflight_as_its_job_reads_it():
    """Every configuration of the weight-free GPU matrix as its preflight_config job reads it (the plan.json
    that resolve_plan writes from the plan's params, the images its image-spec params give), through SGLang
    0.5.23's own parser and model check, all in one process (a job runs one configuration's)."""
    from specsweep.testing.parser_env import job_preflights

    plans, results = job_preflights(tuple(REPO / path for path in GPU_MATRIX_DUMMY[1:]))
    assert sorted(plans) == sorted(results) == _gpu_matrix_names(REPO)
    for name, result in results.items():
        assert result["ok"] and result["sglang_version"] == "0.5.23", (name, result["errors"])
        assert result["loaded"][0]["architectures"] == ["DeepseekV3ForCausalLM"], (name, result["loaded"])


def test_a_configuration_the_loaded_files_do_not_define_is_named_with_the_file_that_does(tmp_path):
    work = copy_workflow(tmp_path)  # a fresh clone: the default config.yaml, the CPU reference engine
    result = run(SNAKEMAKE + ["-n", "results/mscclpp/summary.json"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in out and "Exception" not in out, out[-3000:]
    [line] = [ln for ln in out.splitlines() if ln.startswith("specsweep: no configuration `mscclpp`")]
    assert line.startswith("specsweep: no configuration `mscclpp` in config.yaml, which defines "), line
    assert line.endswith("; `mscclpp` is in config/kimi-k25-8gpu.yaml: add `--configfile config/kimi-k25-8gpu.yaml`")
    shown = line.split(" which defines ", 1)[1].split("; ", 1)[0].split(", ")
    assert set(yaml.safe_load((work / "config.yaml").read_text())["configurations"]) <= set(shown), shown
    assert not (work / ".snakemake" / "locks").exists() or not any((work / ".snakemake" / "locks").iterdir())
    # a name no file defines says so
    result = run(SNAKEMAKE + ["-n", "results/no-such/plan.json"], work)
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    assert "no file under config/ defines `no-such`" in result.stdout + result.stderr
    # with the matrix's file the same target plans
    result = run(SNAKEMAKE + ["-n", "results/mscclpp/summary.json", *GPU_MATRIX], work)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout)["summarize_config"] == 1


def test_a_build_context_not_staged_is_named_before_any_job(tmp_path):
    work = copy_workflow(tmp_path / "checkout")  # the overlay's ../mscclpp_src is not there
    result = run(SNAKEMAKE + ["-n", "results/images/sglang-mscclpp.json", *GPU_MATRIX,
                              "config/kimi-k25-8gpu-local-base.yaml"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert "specsweep: images.sglang-mscclpp.build_contexts.mscclpp_src: ../mscclpp_src is not a folder" in out


def test_a_launch_the_plan_does_not_have_is_one_line(tmp_path):
    work = copy_workflow(tmp_path)
    result = run(SNAKEMAKE + ["-n", f"results/nospec/plans/{plan_key_in(work, 'nospec')}/launch-7/outcome.json"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in out and "Exception" not in out, out[-3000:]
    [line] = [ln for ln in out.splitlines() if ln.startswith("specsweep: configuration")]
    expected = "specsweep: configuration `nospec` has no launch-7: the loaded config plans launch-1, "
    assert line.startswith(expected), line


def test_a_launch_file_other_than_its_outcome_names_the_target_that_measures_it(tmp_path):
    """benchmark_server declares the launch's outcome.json alone: its other files asked for as targets stop the run
    with one line naming that target, not Snakemake's MissingRuleException."""
    work = copy_workflow(tmp_path)
    launch = f"results/nospec/plans/{plan_key_in(work, 'nospec')}/launch-1"
    for leaf in ("requests.jsonl", "nccl"):  # one target a run: with two, Snakemake may stop at either first
        result = run(SNAKEMAKE + ["-n", f"{launch}/{leaf}"], work)
        out = result.stdout + result.stderr
        assert result.returncode != 0
        assert "Traceback" not in out and "Exception" not in out, out[-3000:]
        assert (f"specsweep: {launch}/{leaf} is written by its launch's job with {launch}/outcome.json, the one "
                f"file the job declares: ask for {launch}/outcome.json") in out.splitlines(), out[-3000:]


def test_a_launch_path_of_the_layout_before_plan_keys_names_where_the_launch_is_now(tmp_path):
    """results/<config>/launch-<n>/... (launches were stored there before they belonged to their plan): one line
    naming the path under the current plan, not Snakemake's MissingRuleException."""
    work = copy_workflow(tmp_path)
    key = plan_key_in(work, "nospec")
    result = run(SNAKEMAKE + ["-n", "results/nospec/launch-7/outcome.json"], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in out and "Exception" not in out, out[-3000:]
    assert ("specsweep: results/nospec/launch-7/outcome.json is not a path of this workflow: a launch is stored "
            f"under its plan, results/nospec/plans/{key}/launch-7/outcome.json for `nospec`'s current plan "
            "(results/nospec/plan.json)") in out.splitlines(), out[-3000:]
