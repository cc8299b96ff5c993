"""rules/images.smk without Docker: dry-run job counts and rerun triggers of
the image rules, and their input functions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from specsweep.images.tag import image_tag
from specsweep.testing.workflow import REPO, copy_workflow, job_counts
from specsweep.workflow import inputs


def _dry(work: Path, *targets: str) -> dict[str, int]:
    argv = [sys.executable, "-m", "snakemake", "--configfile", "config/docker-cpu.yaml", "--cores", "1", "-n", *targets]
    result = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)  # noqa: S603
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return job_counts(result.stdout)


def test_dry_run_builds_the_image_once(tmp_path):
    counts = _dry(copy_workflow(tmp_path), "all")
    assert counts["build_image"] == 1
    assert counts["benchmark_server"] == 3  # two configurations, and the baseline's A/A control launch


def test_push_target(tmp_path):
    counts = _dry(copy_workflow(tmp_path), "push")
    assert counts == {"build_image": 1, "push_images": 1, "push": 1}


def test_rule_inputs_are_explicit_and_content_based():
    config = yaml.safe_load((REPO / "config/docker-cpu.yaml").read_text())
    assert inputs.image_tag_params(config, REPO, "reference") == image_tag("reference", config["images"]["reference"],
                                                                            REPO)
    assert '"description"' not in inputs.image_spec_json(config, "reference")
    assert inputs.image_manifests(config) == ["results/images/reference.json"]
    assert '"url":"127.0.0.1:5000"' in inputs.registry_json(config)
    edited = {"images": {"reference": dict(config["images"]["reference"], description="other words")}}
    assert inputs.image_spec_json(edited, "reference") == inputs.image_spec_json(config, "reference")


def test_summarize_reads_the_nccl_debug_files_and_judges_a_known_failure(tmp_path):
    """summarize_config: NCCL's per-process files join the server log; a failed known-failing case is
    expected only because its own signature is in them (server.log alone has no NCCL line here)."""
    import io
    import json

    from specsweep.plan.config import load_configs
    from specsweep.plan.resolve import resolve_plans
    from specsweep.testing.workflow import REPO
    from specsweep.workflow.jobs import summarize_files

    plan = resolve_plans(load_configs([REPO / "config/kimi-k25-8gpu.yaml"]))["nccl-tree-bare"]
    from specsweep.records import new_run_id, run_header

    run_id = new_run_id()
    files = {"plan": plan, "launch": {"run_id": run_id},
             "outcome": {"run_id": run_id, "status": "failed", "stage": "launch", "reason": "server_exited",
                         "detail": "exit 1", "log_tail": ""}}
    for key, value in files.items():
        (tmp_path / f"{key}.json").write_text(json.dumps(value))
    (tmp_path / "server.log").write_text(run_header(run_id, "nccl-tree-bare")
                                         + "[2026-12-01 10:00:00 TP0] Capture cuda graph begin.\n")
    for name in ("warmup.jsonl", "requests.jsonl"):
        (tmp_path / name).write_text("")
    (tmp_path / "nccl").mkdir()
    (tmp_path / "nccl" / "nccl.h.42.log").write_text(
        "\nh:42:42 [0] enqueue.cc:2063 (topoGetAlgoInfo) NCCL WARN No algorithm/protocol available for function "
        "AllGather with datatype ncclInt8. NCCL_ALGO was set to Tree.\n")
    inputs = {k: str(tmp_path / f"{k}.json") for k in files}
    inputs.update(server_log=str(tmp_path / "server.log"), warmup=str(tmp_path / "warmup.jsonl"),
                  requests=str(tmp_path / "requests.jsonl"), nccl_logs=str(tmp_path / "nccl"))
    log = io.StringIO()
    from specsweep.plan.resolve import resolve_labels
    from specsweep.workflow.inputs import summary_labels

    labels = summary_labels(resolve_labels(load_configs([REPO / "config/kimi-k25-8gpu.yaml"])), "nccl-tree-bare")
    summary = summarize_files(inputs, str(tmp_path / "summary.json"), log, labels_json=labels)
    assert summary.status == "failed" and "summary nccl-tree-bare: failed" in log.getvalue()
    [point] = summary.points
    assert point.expected_failure["expected"] is True
    assert point.expected_failure["matched"][0]["signature"] == "nccl_no_algorithm"
    (tmp_path / "nccl" / "nccl.h.42.log").write_text("h:42:42 [0] NCCL INFO NCCL version 2.30.7+cuda13.0\n")
    summary = summarize_files(inputs, str(tmp_path / "summary.json"), io.StringIO(), labels_json=labels)
    assert summary.points[0].expected_failure["expected"] is False  # a surprise failure


def test_a_launch_file_deleted_since_stops_its_summary_with_one_line_naming_the_rerun(tmp_path):
    """A summary declares each launch's outcome.json only (inputs.summary_edges): a launch file deleted since is
    no missing input Snakemake would rerun the launch for, so the summary names it and the command, no traceback."""
    import pytest

    from specsweep.workflow.jobs import read_launch

    launch = tmp_path / "launch-1"
    launch.mkdir()
    (launch / "outcome.json").write_text("{}")
    paths = {k: str(launch / leaf) for k, leaf in inputs.LAUNCH_FILES.items()}
    with pytest.raises(SystemExit) as stop:
        read_launch(paths)
    assert str(stop.value) == (f"{launch} lacks launch.json, server.log, warmup.jsonl, requests.jsonl, nccl, "
                               f"profile.json, allreduce_bench.json: not summarising it. Measure this launch again: "
                               f"snakemake --cores 1 all -R {launch}/outcome.json")


def test_a_configuration_name_the_plans_hold_passes_and_another_stops_naming_the_files_that_define_it(tmp_path):
    plans = {"nospec": {}, "eagle3-shm": {}}
    assert inputs.configuration_name(plans, "nospec", [str(REPO / "config.yaml")], REPO) == "nospec"
    try:
        inputs.configuration_name(plans, "mscclpp", [str(REPO / "config.yaml")], REPO)
    except SystemExit as exc:  # what Snakemake lets through from an input function without a traceback
        message = str(exc)
    else:
        raise AssertionError("no SystemExit")
    assert message == ("specsweep: no configuration `mscclpp` in config.yaml, which defines eagle3-shm, nospec; "
                       "`mscclpp` is in config/kimi-k25-8gpu.yaml: add `--configfile config/kimi-k25-8gpu.yaml`")
    # a name generated by a grid is found in the file that declares the grid
    generated = "nccl-anyalgo-anyproto-ch16-anybuf"
    assert generated not in yaml.safe_load((REPO / "config/kimi-k25-8gpu.yaml").read_text())["configurations"]
    assert inputs.defining_files(generated, REPO) == ["config/kimi-k25-8gpu.yaml"]
    # the configurations shown are cut after twelve, with the count
    many = {f"c{i:02d}": {} for i in range(20)}
    assert "c11, ... (20 in all);" in inputs.unknown_configuration_message("x", sorted(many), [], tmp_path)
    assert inputs.unknown_configuration_message("x", [], [], tmp_path).endswith("no file under config/ defines `x`")


def test_an_image_name_the_config_does_not_define_stops_naming_the_whole_sweep_before_the_overlay():
    config = {"images": {"reference": {}}}
    assert inputs.image_name(config, "reference", [], REPO) == "reference"
    try:
        inputs.image_name(config, "sglang-mscclpp", [str(REPO / "config.yaml")], REPO)
    except SystemExit as exc:
        message = str(exc)
    else:
        raise AssertionError("no SystemExit")
    assert message == ("specsweep: no image `sglang-mscclpp` in config.yaml, which defines reference; "
                       "`sglang-mscclpp` is in config/kimi-k25-8gpu.yaml, config/kimi-k25-8gpu-local-base.yaml: "
                       "add `--configfile config/kimi-k25-8gpu.yaml` (or another of them)")


def test_a_value_every_configuration_shares_is_given_as_a_constant_else_the_function():
    def per_job(wildcards):  # what Snakemake would call for every job
        return None

    assert inputs.same_for_all({"a": 1, "b": 1}, per_job) == 1
    assert inputs.same_for_all({"a": [], "b": []}, per_job) == []
    assert inputs.same_for_all({"a": '{"x":1}', "b": '{"x":1}'}, per_job) == '{"x":1}'  # canonical JSON
    assert inputs.same_for_all({"a": 1, "b": 0}, per_job) is per_job
    assert inputs.same_for_all({}, per_job) is per_job
    # Snakemake would format {x} in a constant param as a wildcard: the function keeps the value as it is
    assert inputs.same_for_all({"a": '{"v":"{x}"}', "b": '{"v":"{x}"}'}, per_job) is per_job
    assert inputs.same_for_all({"a": ["p/{ x}"], "b": ["p/{ x}"]}, per_job) is per_job
