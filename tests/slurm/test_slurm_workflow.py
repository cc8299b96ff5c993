"""The embedded default config through `--workflow-profile profiles/slurm`,
against the live single-node Slurm that .ci/setup-slurm.sh starts.

Every server job must be a Slurm job the scheduler itself knows: its id is in
launch.json, `scontrol show job` reports it while it runs, and the job
completion log (jobcomp/filetxt, the scheduler's own record; there is no
slurmdbd, so no sacct) holds its end state. The tests FAIL, never skip, when
Slurm is not there.

One pipeline run (module fixture) serves the tests after it, which run in
file order: a no-op rerun, an edit of one configuration, then a scancel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from specsweep.testing.workflow import (
    REPO,
    copy_workflow,
    launch_path,
    only_point,
    plan_key_in,
    run,
    run_pipeline,
    small_config,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/slurm"]
OK_CONFIGS = ("nospec", "eagle3-gloo", "eagle3-shm")


@pytest.fixture(scope="module")
def jobcomp_log() -> Path:
    """The scheduler's job completion log, after checking that Slurm answers."""
    for exe in ("sinfo", "sbatch", "squeue", "scontrol", "scancel"):
        if shutil.which(exe) is None:
            pytest.fail(f"{exe} not found: run .ci/setup-slurm.sh (as root) first")
    ping = run(["scontrol", "ping"], REPO, timeout=30)
    if "is UP" not in ping.stdout:
        pytest.fail(f"slurmctld does not answer (scontrol ping: {ping.stdout}{ping.stderr}); run .ci/setup-slurm.sh")
    state = run(["sinfo", "--noheader", "--partition", "specsweep", "--format", "%T"], REPO, timeout=30).stdout.split()
    if not state or not any(s in ("idle", "mixed", "allocated") for s in state):
        pytest.fail(f"partition specsweep has no usable node (sinfo: {state}); run .ci/setup-slurm.sh")
    config = run(["scontrol", "show", "config"], REPO, timeout=30).stdout
    comp_type = re.search(r"^JobCompType\s*=\s*(\S+)", config, re.M)
    comp_loc = re.search(r"^JobCompLoc\s*=\s*(\S+)", config, re.M)
    if not (comp_type and comp_type[1] == "jobcomp/filetxt" and comp_loc):
        pytest.fail("Slurm keeps no job completion log (JobCompType=jobcomp/filetxt); run .ci/setup-slurm.sh")
    return Path(comp_loc[1])


def scheduler_records(log: Path, workdir: Path) -> dict[str, dict[str, str]]:
    """Job id -> the completion record Slurm wrote for each job run from ``workdir``."""
    records = {}
    for line in log.read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("WorkDir") == str(workdir):
            records[fields["JobId"]] = fields
    return records


def slurm_config() -> dict:
    # The default configurations on a small workload, and one whose server crashes at startup (a result).
    config = small_config()
    config["aa_control"] = False  # one launch per configuration: these tests are about Slurm, not replication
    return config


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory, jobcomp_log):
    return run_pipeline(copy_workflow(tmp_path_factory.mktemp("slurm")), slurm_config(), snakemake=SNAKEMAKE)


def launch(work: Path, name: str) -> dict:
    return json.loads((launch_path(work, name) / "launch.json").read_text())


summary = only_point  # the one point of a configuration


def test_every_server_job_ran_as_a_slurm_job_the_scheduler_recorded(slurm_run, jobcomp_log):
    records = scheduler_records(jobcomp_log, slurm_run)
    names = (*OK_CONFIGS, "crashes")
    ids = {}
    for name in names:
        slurm = launch(slurm_run, name)["slurm"]
        assert slurm and slurm["job_id"].isdigit(), (name, slurm)
        ids[name] = slurm["job_id"]
        record = records.get(slurm["job_id"])
        assert record is not None, f"Slurm has no record of job {slurm['job_id']} ({name}) run from {slurm_run}"
        assert record["JobState"] == "COMPLETED", record
        assert record["NodeList"] == slurm["node"], (record, slurm)
        assert record["Partition"] == "specsweep"
        # The executor plugin's own log of that job, named by the same id (its directory joins the
        # wildcards' values with "_": snakemake-executor-plugin-slurm 2.8.0 utils.get_job_wildcards).
        # (config, plan, launch: the plan key is a wildcard of the launch's paths, contracts.layout)
        logs = slurm_run / ".snakemake/slurm_logs/rule_benchmark_server"
        job_dir = logs / f"{name}_{plan_key_in(slurm_run, name)}_1"
        assert (job_dir / f"{ids[name]}.log").exists(), sorted(p.name for p in logs.iterdir())
        # The provenance in summary.json carries the same identity.
        assert summary(slurm_run, name)["provenance"]["launch"]["slurm"] == slurm
    assert len(set(ids.values())) == len(names), ids
    # Only the server jobs went to Slurm: plan, preflight, summaries and the
    # report ran on the submit host (localrule).
    assert sorted(records) == sorted(ids.values()), records.keys()
    # Nothing serialised the submissions (no global `server: 1`): every server
    # job was queued before the first one ended; Slurm's exclusive allocation
    # ran them one per node.
    first_end = min(r["EndTime"] for r in records.values())
    assert all(r["SubmitTime"] <= first_end for r in records.values()), records
    starts = sorted((r["StartTime"], r["EndTime"]) for r in records.values())
    assert all(prev_end <= start for (_, prev_end), (start, _) in zip(starts, starts[1:])), starts


def test_all_configurations_ok_and_the_report_is_rendered(slurm_run):
    for name in OK_CONFIGS:
        s = summary(slurm_run, name)
        assert s["status"] == "ok", (name, s.get("reason"), s.get("detail"))
        assert s["metrics"]["output_tok_s"]["p50"] > 0
    report = (slurm_run / "results" / "report.md").read_text()
    csv_text = (slurm_run / "results" / "summary.csv").read_text()
    for name in (*OK_CONFIGS, "crashes"):
        assert name in report and name in csv_text
    assert "break-even" in report.lower()
    for plot in ("tok_s", "cycle_time", "accept_length"):
        assert (slurm_run / "results" / "plots" / f"{plot}.png").stat().st_size > 0


def test_a_server_that_crashes_at_startup_is_a_failed_result(slurm_run):
    s = summary(slurm_run, "crashes")
    assert s["status"] == "failed"
    assert s["stage"] == "launch" and s["reason"] == "server_exited"
    assert s["log_tail"], "the log tail says why"


def test_a_noop_rerun_submits_nothing(slurm_run, jobcomp_log):
    before = scheduler_records(jobcomp_log, slurm_run)
    result = run(SNAKEMAKE + ["all"], slurm_run)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Nothing to be done" in result.stdout + result.stderr
    assert "Submitted job" not in result.stdout + result.stderr
    assert scheduler_records(jobcomp_log, slurm_run) == before


def test_editing_one_configuration_submits_only_its_jobs(slurm_run, jobcomp_log):
    before = scheduler_records(jobcomp_log, slurm_run)
    untouched = {name: (launch_path(slurm_run, name) / "launch.json").read_bytes()
                 for name in ("nospec", "eagle3-gloo", "crashes")}
    config = yaml.safe_load((slurm_run / "config.yaml").read_text())
    config["configurations"]["eagle3-shm"]["env"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
    (slurm_run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run(SNAKEMAKE + ["all"], slurm_run)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    new = {k: v for k, v in scheduler_records(jobcomp_log, slurm_run).items() if k not in before}
    assert list(new) == [launch(slurm_run, "eagle3-shm")["slurm"]["job_id"]], new
    assert summary(slurm_run, "eagle3-shm")["status"] == "ok"
    for name, data in untouched.items():
        launch_json = launch_path(slurm_run, name) / "launch.json"
        assert launch_json.read_bytes() == data, f"{name} must not rerun"


def _processes_of(job_id: str, pgid: int) -> list[str]:
    """Live processes of a Slurm job (by SLURM_JOB_ID in their environment) or of the server's process group."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if stat[0] in ("Z", "X"):
            continue
        if int(stat[2]) == pgid or f"SLURM_JOB_ID={job_id}".encode() in environ:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def _job_state(job_id: str) -> str:
    out = run(["scontrol", "show", "job", job_id], REPO, timeout=30).stdout
    match = re.search(r"JobState=(\S+)", out)
    return match[1] if match else ""


def test_scancel_of_a_running_server_job_leaves_no_server_and_a_rerun_completes(slurm_run, jobcomp_log):
    config = yaml.safe_load((slurm_run / "config.yaml").read_text())
    # The default workload (20-odd seconds of requests on this host): long
    # enough to be cancelled in the middle of the benchmark.
    config["configurations"]["long"] = {
        "description": "cancelled mid-benchmark",
        "extends": "nospec",
        "workload": {"num_prompts": 8, "output_len": 48, "repeats": 3},
    }
    (slurm_run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    target = "results/long/summary.json"
    proc = subprocess.Popen(SNAKEMAKE + [target], cwd=slurm_run, stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.STDOUT, start_new_session=True)
    launch_json = launch_path(slurm_run, "long") / "launch.json"
    job_log = launch_path(slurm_run, "long") / "logs/benchmark_server.log"
    try:
        deadline = time.monotonic() + 300
        while not (launch_json.exists() and "ready after" in job_log.read_text()):
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the server job never became ready"
            time.sleep(0.5)
        record = launch(slurm_run, "long")
        job_id, pid = record["slurm"]["job_id"], record["pid"]
        time.sleep(2)  # inside the benchmark now
        assert _job_state(job_id) == "RUNNING", "the scheduler knows the running job by the recorded id"
        assert _processes_of(job_id, pid), "the server should be running before scancel"
        assert run(["scancel", job_id], REPO, timeout=30).returncode == 0
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    output = out.decode(errors="replace")
    assert proc.returncode != 0, "a cancelled server job fails the run"
    deadline = time.monotonic() + 60
    while _processes_of(job_id, pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_of(job_id, pid) == [], "no process of the cancelled job may survive it"
    # The job itself tore the server down when Slurm ended it (specsweep.serve.slurm's
    # watch), not only Slurm's SIGKILL of the whole step after KillWait.
    text = job_log.read_text()
    assert f"Slurm job {job_id} is " in text and "ending the server" in text, text[-2000:]
    assert "outcome: failed" in text and "interrupted" in text, text[-2000:]
    assert scheduler_records(jobcomp_log, slurm_run)[job_id]["JobState"] == "CANCELLED", output[-2000:]

    result = run(SNAKEMAKE + [target], slurm_run)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert summary(slurm_run, "long")["status"] == "ok"
    rerun_id = launch(slurm_run, "long")["slurm"]["job_id"]
    assert rerun_id != job_id
    assert scheduler_records(jobcomp_log, slurm_run)[rerun_id]["JobState"] == "COMPLETED"
