"""benchmark_server declares its outcome.json alone: the job itself removes an earlier attempt's other files
before the launch and fails, naming them, when any is missing after it (what Snakemake did for them as
declared outputs). Real jobs: the job holds its own lock directory, whose host lock another holder keeps,
so that each one ends ``host_busy`` at once, without a server."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from specsweep.contracts import layout
from specsweep.files import read_json, read_jsonl
from specsweep.records import run_id_of_log
from specsweep.serve import lock
from specsweep.testing.doubles import plan_dict
from specsweep.workflow import jobs

KEY = "0123456789ab"


def loopback_plan() -> dict:
    return plan_dict(name="loop", engine="reference", runtime="local",
                     argv=[sys.executable, "-m", "specsweep.testing.loopback"], env={"NCCL_DEBUG": "INFO"})


@pytest.fixture
def busy_host(tmp_path, monkeypatch):
    """The job's lock directory, from its environment as under Snakemake, with the host lock held by another."""
    settings = lock.LockSettings(tmp_path / "locks", wait_s=0.3)
    monkeypatch.setenv("SPECSWEEP_LOCK_DIR", str(settings.lock_dir))
    monkeypatch.setenv("SPECSWEEP_LOCK_WAIT_S", str(settings.wait_s))
    held = lock.acquire(settings, {"config": "other"})
    yield
    held.release()


def earlier_attempt(launch_dir: Path) -> None:
    """What a failed attempt of the launch left: every file but outcome.json (Snakemake removes a failed job's
    declared output), each with its run id, and an NCCL file; the job's own log."""
    (launch_dir / "logs").mkdir(parents=True)
    (launch_dir / "logs" / "benchmark_server.log").write_text("the earlier attempt's job log\n")
    (launch_dir / "launch.json").write_text(json.dumps({"run_id": "old"}))
    (launch_dir / "server.log").write_text("# specsweep run old config loop\n")
    for name in ("warmup.jsonl", "requests.jsonl"):
        (launch_dir / name).write_text(json.dumps({"run_id": "old"}) + "\n")
    (launch_dir / "nccl").mkdir()
    (launch_dir / "nccl" / "nccl.host.1.log").write_text("NCCL INFO of the earlier attempt\n")
    for name in ("profile.json", "allreduce_bench.json"):
        (launch_dir / name).write_text(json.dumps({"run_id": "old", "enabled": False}))


def run_job(tmp_path: Path, launch: str = "1") -> tuple[dict, str]:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(loopback_plan()))
    outcome = layout.launch_file("loop", KEY, launch, "outcome", str(tmp_path / "results"))
    (Path(outcome).parent / "logs").mkdir(parents=True, exist_ok=True)
    log = io.StringIO()
    return jobs.benchmark_server(str(plan), [], outcome, log, launch=launch), log.getvalue()


def test_a_rerun_launch_starts_with_no_file_of_its_earlier_attempt(tmp_path, busy_host, monkeypatch):
    here = Path(layout.launch_dir("loop", KEY, "1", str(tmp_path / "results")))
    other = Path(layout.launch_dir("loop", KEY, "2", str(tmp_path / "results")))
    earlier_attempt(here)
    earlier_attempt(other)
    (other / "outcome.json").write_text(json.dumps({"run_id": "old", "status": "ok"}))
    seen = {}
    real = jobs.run_config

    def run_config(*args, **kwargs):  # the real job, after a look at what it starts with
        seen["at start"] = sorted(p.relative_to(here).as_posix() for p in here.rglob("*"))
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "run_config", run_config)
    outcome, said = run_job(tmp_path)
    assert seen["at start"] == ["logs", "logs/benchmark_server.log"], "no file of the earlier attempt"
    assert (here / "logs" / "benchmark_server.log").read_text() == "the earlier attempt's job log\n"
    assert "removed an earlier attempt's launch.json, server.log, warmup.jsonl, requests.jsonl, nccl, " \
           "profile.json, allreduce_bench.json" in said
    assert outcome["reason"] == "host_busy", outcome
    run_id = outcome["run_id"]
    # Every file of the launch exists at its end and is this run's; NCCL's directory holds nothing of the
    # earlier attempt (a job that never owned its files leaves it empty).
    assert read_json(here / "outcome.json")["run_id"] == read_json(here / "launch.json")["run_id"] == run_id
    assert run_id_of_log((here / "server.log").read_text()) == run_id
    assert read_jsonl(here / "warmup.jsonl") == read_jsonl(here / "requests.jsonl") == []
    assert list((here / "nccl").iterdir()) == []
    assert read_json(here / "profile.json")["run_id"] == read_json(here / "allreduce_bench.json")["run_id"] == run_id
    # Another launch's files are not touched.
    assert sorted(p.name for p in other.iterdir()) == sorted([*layout.LAUNCH_FILES.values(), "logs"])
    assert read_json(other / "launch.json") == {"run_id": "old"}
    assert (other / "nccl" / "nccl.host.1.log").exists()


@pytest.mark.parametrize("kind", ["requests", "nccl_logs", "profile"])
def test_a_launch_that_lacks_one_of_its_files_fails_naming_it_and_leaves_no_outcome(tmp_path, busy_host,
                                                                                    monkeypatch, kind):
    here = Path(layout.launch_dir("loop", KEY, "1", str(tmp_path / "results")))
    real = jobs.run_config

    def run_config(*args, **kwargs):  # the real job, then one of its files gone (as if it had not written it)
        outcome = real(*args, **kwargs)
        jobs.clear_launch([here / layout.LAUNCH_FILES[kind]])
        return outcome

    monkeypatch.setattr(jobs, "run_config", run_config)
    with pytest.raises(SystemExit) as info:
        run_job(tmp_path)
    assert str(info.value) == (f"benchmark_server: {here} lacks {layout.LAUNCH_FILES[kind]} after the launch; its "
                               "outcome.json is removed, so that the next run measures this launch again")
    assert not (here / "outcome.json").exists()
    assert (here / "launch.json").exists(), "the rest is kept for a look, and removed when the launch runs again"
