"""The whole DAG against the real reference engine: results, failures, reruns, interrupts, and what a user
sees on the console during `snakemake --cores 1 all`.

One pipeline run (module fixture) on a small workload serves the console test
and then the rerun tests, which only ask Snakemake what it would do (`-n`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specsweep.contracts import layout
from specsweep.testing import workflow as wf
from specsweep.testing.workflow import (
    SNAKEMAKE,
    beside_rounds,
    copy_workflow,
    launch_path,
    only_point,
    plain_default_config,
    plan_key_in,
    run,
    run_pipeline,
    small_config,
)
from specsweep.workflow.stored import current_key

pytestmark = pytest.mark.slow


def planned_jobs(work: Path, *extra: str) -> list[tuple[str, str]]:
    """(rule, config) of every job a dry run would execute."""
    return sorted((rule, config) for rule, config, _ in wf.planned_jobs(work, *extra))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[Path, str]:
    """The default configurations on a small workload, one launch each plus the A/A control, and one whose
    server crashes at startup, run once: the workflow copy, and its console (stderr into stdout: one stream,
    in the order the terminal shows it)."""
    work = copy_workflow(tmp_path_factory.mktemp("pipeline"))
    (work / "config.yaml").write_text(yaml.safe_dump(small_config(), sort_keys=False))
    t0 = time.monotonic()
    result = subprocess.run(SNAKEMAKE + ["all"], cwd=work, stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.STDOUT, text=True, timeout=1800)
    print(f"pipeline {work.name} took {time.monotonic() - t0:.0f} s")
    assert result.returncode == 0, result.stdout[-5000:]
    return work, result.stdout


@pytest.fixture(scope="module")
def pipeline(first_run) -> Path:
    return first_run[0]


summary = only_point  # the one point of a configuration


def test_progress_while_servers_run_and_a_summary_at_the_end(first_run):
    """Each server job's stage and progress while it runs, then the closing summary and where the report is,
    and nothing of Snakemake's own job banners: at most 60 lines."""
    work, out = first_run
    lines = out.splitlines()

    def index(pattern: str) -> int:
        found = [i for i, line in enumerate(lines) if re.fullmatch(pattern, line)]
        assert found, f"no line matching {pattern!r} in:\n{out[-5000:]}"
        return found[0]

    # The run order: each round's seeded order (results/rounds/round-<r>/plan.json), round by round.
    rounds = sorted((work / "results" / "rounds").glob("round-*/plan.json"), key=lambda p: int(p.parent.name[6:]))
    launches = [f"{c} launch-{lid}" for path in rounds for c, lid in json.loads(path.read_text())["order"]]
    assert sorted(launches) == sorted(["nospec launch-1", "eagle3-gloo launch-1", "eagle3-shm launch-1",
                                       "nospec launch-aa", "crashes launch-1"]), launches
    for job, following in zip(launches, [*launches[1:], None]):
        p = f"specsweep {re.escape(job)}: "
        # three lines a launch: launching (after how long it waited for the host, when it did), ready with the
        # warmup's result, the last round's totals with the outcome; a server that crashes at startup: two
        steps = [index(p + r"(had the host after [0-9.]+ s of waiting; )?launching \(local\), 1 point\(s\); "
                       r"every line in results/.*/benchmark_server\.log")]
        if job == "crashes launch-1":
            steps.append(index(p + "outcome: failed launch server_exited"))
        else:
            steps += [index(p + r"ready after [0-9.]+ s; \[warmup\] (not )?steady after \d+ requests"),
                      index(p + r"\[measured 2/2\] 3/3 requests, 0 failed, [0-9.]+ output tok/s running, "
                            r"[0-9.]+ s; outcome: ok")]
        assert steps == sorted(steps), (job, steps)
        # shown while the job ran: before the next job's server starts, not replayed at the end
        if following:
            assert steps[-1] < index(f"specsweep {re.escape(following)}: (had the host after .*)?launching.*")

    summary_at = index(r"specsweep summary:")
    assert summary_at > index(r"specsweep nospec launch-aa: .*outcome: ok")
    tail = "\n".join(lines[summary_at:])
    assert ("  A/A control: nospec launched again at a random place of round 1 (launch aa) against its launch 1: "
            in tail)
    # what to deploy: report.md's own line (report.json's deploy), never a control
    md = (work / "results/report.md").read_text()
    [deploy] = [x.replace("**", "") for x in md.splitlines() if x.startswith("**On this host, ")]
    assert f"  {deploy}" in tail, tail
    assert "  Report: results/report.md (rows: results/summary.csv)" in tail, tail
    # A quiet console: none of Snakemake's job banners, step counters or scheduler lines (the profile's quiet,
    # specsweep.workflow.console), at most three lines a launch, and the whole run in one screen.
    banners = [line for line in lines if re.match(r"(local)?rule \w+:|\s+reason: |Select jobs to execute|"
                                                  r"Execute \d+ jobs|\d+ of \d+ steps|Job stats:", line)]
    assert banners == [], banners
    # What this run says, at most 60 lines; a line about waiting for another run's server on this host (a
    # shared machine, not this run) is not the run's own.
    own = [line for line in lines if not re.match(r"waiting|host lock acquired after|the host is free after", line)]
    assert len(own) <= 60, f"{len(own)} lines:\n{out}"


def test_every_configuration_has_a_summary_and_the_numbers_differ(pipeline):
    ok = {name: summary(pipeline, name) for name in ("nospec", "eagle3-gloo", "eagle3-shm")}
    for name, s in ok.items():
        assert s["status"] == "ok", (name, s.get("reason"), s.get("detail"))
    tok_s = {name: s["metrics"]["output_tok_s"]["p50"] for name, s in ok.items()}
    assert len(set(tok_s.values())) == 3, tok_s
    assert ok["eagle3-shm"]["metrics"]["accept_length"]["value"] > 1.0
    # Without speculation there is no accept length: absent with a reason, never 0.
    assert "accept_length" not in ok["nospec"]["metrics"]
    assert "spec_verify_ct" in ok["nospec"]["metrics"]["absent"]["accept_length"]
    csv_text = (pipeline / "results" / "summary.csv").read_text()
    report = (pipeline / "results" / "report.md").read_text()
    for name in ok:
        assert name in csv_text and name in report


def test_a_server_that_crashes_at_startup_is_a_failed_result(pipeline):
    s = summary(pipeline, "crashes")
    assert s["status"] == "failed"
    assert s["stage"] == "launch" and s["reason"] == "server_exited"
    assert s["log_tail"], "the log tail says why"
    assert "crashes" in (pipeline / "results" / "report.md").read_text()


def test_nothing_reruns_when_nothing_changed(pipeline):
    assert planned_jobs(pipeline) == []


def test_editing_one_configuration_reruns_only_it_and_the_report(pipeline):
    config = yaml.safe_load((pipeline / "config.yaml").read_text())
    original = (pipeline / "config.yaml").read_text()
    try:
        config["configurations"]["eagle3-shm"]["env"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert beside_rounds(planned_jobs(pipeline)) == sorted(
            [
                ("resolve_plan", "eagle3-shm"),
                ("preflight_config", "eagle3-shm"),
                ("select_plan", "eagle3-shm"),
                ("benchmark_server", "eagle3-shm"),
                ("summarize_config", "eagle3-shm"),
                ("analyze_sweep", ""), ("render_report", ""),
            ]
        )
    finally:
        (pipeline / "config.yaml").write_text(original)


def test_a_configuration_added_later_runs_when_its_summary_is_asked_for(pipeline):
    """The round's plan is rewritten (a new member) but no launch waits on it through an ancient() edge,
    which would make Snakemake drop the asked-for summary (specsweep.workflow.round_inputs.round_plan_input)."""
    original = (pipeline / "config.yaml").read_text()
    try:
        config = yaml.safe_load(original)
        config["configurations"]["added"] = {"description": "added after the sweep ran", "extends": "nospec",
                                             "workload": {"num_prompts": 2}}
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        jobs = wf.planned_jobs(pipeline, targets=["results/added/summary.json"])
        assert sorted(rule for rule, _, _ in jobs) == [
            "benchmark_server", "preflight_config", "resolve_plan", "select_plan", "summarize_config"], jobs
        assert {name for _, name, _ in jobs} == {"added"}, "no launch already measured reruns"
    finally:
        (pipeline / "config.yaml").write_text(original)


def test_reordering_keys_and_editing_descriptions_rerun_no_benchmark(pipeline):
    original = (pipeline / "config.yaml").read_text()
    try:
        config = yaml.safe_load(original)
        config["configurations"] = dict(reversed(list(config["configurations"].items())))
        config["defaults"] = dict(reversed(list(config["defaults"].items())))
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert planned_jobs(pipeline) == []
        config["configurations"]["nospec"]["description"] = "edited"
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert beside_rounds(planned_jobs(pipeline)) == [("analyze_sweep", ""), ("render_report", "")]
    finally:
        (pipeline / "config.yaml").write_text(original)


def test_relabelling_a_result_reruns_no_server(pipeline):
    """variant: the summary (the log must prove it) and the report; expect: the summary too (it judges
    ``expected_failure`` against the configuration's ``expect_signature``) and the report; never the server."""
    original = (pipeline / "config.yaml").read_text()
    try:
        config = yaml.safe_load(original)
        # Dropping the label (a variant that contradicts the flags is refused at plan time).
        config["configurations"]["eagle3-shm"]["variant"] = []
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert beside_rounds(planned_jobs(pipeline)) == [("analyze_sweep", ""), ("render_report", ""),
                                          ("summarize_config", "eagle3-shm")]
        config = yaml.safe_load(original)
        config["configurations"]["crashes"]["expect"] = "failure"
        (pipeline / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        assert beside_rounds(planned_jobs(pipeline)) == [("analyze_sweep", ""), ("render_report", ""),
                                          ("summarize_config", "crashes")]
    finally:
        (pipeline / "config.yaml").write_text(original)


def test_every_file_of_a_launch_is_from_one_run(pipeline):
    for name in ("nospec", "eagle3-gloo", "eagle3-shm", "crashes"):
        whole = json.loads((pipeline / "results" / name / "summary.json").read_text())
        launches = {e["launch"]: e["run_id"] for e in whole["launches"]}
        assert list(launches) == (["1", "aa"] if name == "nospec" else ["1"])  # the baseline's A/A control
        assert len(set(launches.values())) == len(launches), "one run id per launch"
        for launch, run_id in launches.items():
            d = launch_path(pipeline, name, launch)
            assert run_id and json.loads((d / "launch.json").read_text())["run_id"] == run_id
            assert json.loads((d / "outcome.json").read_text())["run_id"] == run_id
            assert (d / "server.log").read_text().startswith(f"# specsweep run_id={run_id} ")
            records = [json.loads(line) for line in (d / "requests.jsonl").read_text().splitlines()]
            assert {r["run_id"] for r in records} <= {run_id}
        if len(launches) == 1:
            assert summary(pipeline, name)["run_id"] == launches["1"]


def test_reformatting_harness_code_reruns_nothing(pipeline):
    script = pipeline / "scripts" / "benchmark_server.py"
    original = script.read_text()
    try:
        script.write_text("# a comment changes no measurement\n" + original)
        assert planned_jobs(pipeline) == []
    finally:
        script.write_text(original)


def test_retry_failed_configurations_only(pipeline):
    failed = run([sys.executable, "-m", "specsweep", "failed"], pipeline).stdout.split()
    assert failed == [str((launch_path(pipeline, "crashes") / "outcome.json").relative_to(pipeline))]
    assert beside_rounds(planned_jobs(pipeline, "-R", *failed)) == sorted(
        [("benchmark_server", "crashes"), ("summarize_config", "crashes"), ("analyze_sweep", ""),
         ("render_report", "")]
    )


def test_switching_config_files_and_back_relaunches_nothing_measured(pipeline):
    """Another config file gives `eagle3-shm` another plan: it runs that plan's launch beside the first plan's
    (nospec and eagle3-gloo have the same plans in both files: measured once, reused); back to config.yaml,
    the summary and the report are rebuilt from the launches of its own plans, and no server is launched."""
    other = small_config(crashes=False)
    other["configurations"]["eagle3-shm"]["env"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
    (pipeline / "config" / "other.yaml").write_text(yaml.safe_dump(other, sort_keys=False))
    first = launch_path(pipeline, "eagle3-shm")
    measured = {p: p.read_bytes() for p in (pipeline / "results").glob("*/plans/*/launch-*/*.json*")}
    try:
        switch = ["--configfile", "config/other.yaml"]
        launches = [(rule, name) for rule, name, _ in wf.planned_jobs(pipeline, *switch) if rule == "benchmark_server"]
        assert launches == [("benchmark_server", "eagle3-shm")], "only the plan not measured yet"
        t0 = time.monotonic()
        run_pipeline(pipeline, None, args=["results/eagle3-shm/summary.json", *switch])  # its launch and summary
        print(f"the other config file's run took {time.monotonic() - t0:.0f} s")
        second = launch_path(pipeline, "eagle3-shm", configfiles=["config/other.yaml"])
        assert second != first and second.parent.parent == first.parent.parent and (second / "outcome.json").exists()
        assert current_key(pipeline / "results", "eagle3-shm") == second.parent.name  # its summary's plan
        assert {p: p.read_bytes() for p in measured} == measured, "the first plan's launches are kept as they were"
        # Back to config.yaml: its plans were measured, nothing relaunches.
        assert beside_rounds(planned_jobs(pipeline)) == [
            ("analyze_sweep", ""), ("render_report", ""), ("select_plan", "eagle3-shm"),
            ("summarize_config", "eagle3-shm")]
    finally:
        run_pipeline(pipeline, None)  # config.yaml's summaries and report again, as the other tests expect them
    assert current_key(pipeline / "results", "eagle3-shm") == first.parent.name
    run_id = json.loads((first / "launch.json").read_text())["run_id"]
    assert summary(pipeline, "eagle3-shm")["run_id"] == run_id, "the summary is of config.yaml's launch again"
    assert planned_jobs(pipeline) == []


def test_a_deleted_launch_file_is_named_at_the_next_start_and_its_rerun_rebuilds_the_summary(pipeline, tmp_path):
    """Snakemake does not rerun a launch whose outcome.json was deleted while the summary built from it is up to
    date (snakemake#1978): every start says so, `specsweep failed` lists it, and `-R` with it reruns that launch,
    its summary and the report."""
    outcome = launch_path(pipeline, "eagle3-gloo") / "outcome.json"
    kept = tmp_path / "outcome.json"
    shutil.copy2(outcome, kept)  # its bytes and time, put back below: the other tests see the sweep unchanged
    try:
        outcome.unlink()
        dry = run(SNAKEMAKE + ["-n", "all"], pipeline)
        assert dry.returncode == 0, dry.stderr[-3000:]
        rel = outcome.relative_to(pipeline)
        [line] = [ln for ln in dry.stderr.splitlines() if ln.startswith("specsweep: warning: ") and "lacks" in ln]
        assert line.startswith(f"specsweep: warning: {rel.parent} lacks outcome.json, and "
                               "results/eagle3-gloo/summary.json and the report were built from it"), line
        assert f"`-R {rel}`" in line, line
        failed = run([sys.executable, "-m", "specsweep", "failed"], pipeline).stdout.split()
        assert str(rel) in failed, failed
        assert beside_rounds(planned_jobs(pipeline, "-R", str(rel))) == [
            ("analyze_sweep", ""), ("benchmark_server", "eagle3-gloo"), ("render_report", ""),
            ("summarize_config", "eagle3-gloo")]
    finally:
        shutil.copy2(kept, outcome)
    assert planned_jobs(pipeline) == []


def _group_alive(pgid: int) -> list[int]:
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
            alive.append(int(proc.name))
    return alive


def test_sigint_during_benchmark_leaves_no_server(tmp_path):
    work = copy_workflow(tmp_path)
    config = plain_default_config()
    config["configurations"] = {"long": config["configurations"]["eagle3-gloo"] | {"extends": []}}
    config["baseline"] = None
    config["configurations"]["long"]["server_args"] = dict(
        config["defaults"]["server_args"], **config["configurations"]["long"]["server_args"]
    )
    config["defaults"]["workload"].update(num_prompts=200, output_len=64)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    console = (tmp_path / "console.txt").open("w")  # stderr into stdout: what the terminal shows, in order
    proc = subprocess.Popen(SNAKEMAKE + ["all"], cwd=work, start_new_session=True,  # noqa: S603
                            stdout=console, stderr=subprocess.STDOUT)
    launch_dir = work / layout.launch_dir("long", plan_key_in(work, "long"), "1")
    launch = launch_dir / "launch.json"
    job_log = launch_dir / "logs" / "benchmark_server.log"
    deadline = time.monotonic() + 180
    while not (launch.exists() and "ready after" in job_log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "server never became ready"
        time.sleep(0.2)
    pid = json.loads(launch.read_text())["pid"]
    while "[measured" not in job_log.read_text():  # inside the measurement now
        assert proc.poll() is None and time.monotonic() < deadline, "the measurement never started"
        time.sleep(0.2)
    assert _group_alive(pid), "the server should be running before the interrupt"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    proc.wait(timeout=120)
    deadline = time.monotonic() + 30
    while _group_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _group_alive(pid) == [], "no rank of the server may outlive the interrupted job"
    assert not (work / "results" / "long" / "summary.json").exists()
    # The console ends with the job's outcome line: no traceback, nothing of Snakemake's after it.
    console.close()
    shown = (tmp_path / "console.txt").read_text()
    assert proc.returncode != 0 and "Traceback" not in shown, shown[-3000:]
    assert shown.rstrip().splitlines()[-1] == "specsweep long launch-1: outcome: failed benchmark interrupted", shown
    # The job records the interrupt in its log, which Snakemake keeps. Its outcome.json survives only when
    # Snakemake handles the Ctrl-C first (it stops, leaving the job's outputs marked incomplete); a job that
    # ends first is a failed job, whose outputs Snakemake removes ("Removing output files of failed job").
    assert "outcome: failed benchmark interrupted" in job_log.read_text(), job_log.read_text()[-2000:]
    outcome_path = launch_dir / "outcome.json"
    if outcome_path.exists():
        outcome = json.loads(outcome_path.read_text())
        assert (outcome["stage"], outcome["reason"]) == ("benchmark", "interrupted"), outcome
    # A plain rerun just works: the profile's rerun-incomplete, no IncompleteFilesException.
    assert ("benchmark_server", "long") in planned_jobs(work)
