"""What a user sees on the console during `snakemake --cores 1 all`: each server job's stage and progress
while it runs, then the closing summary and where the report is (a real run on the reference engine), and
nothing of Snakemake's own job banners: at most 60 lines."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from specsweep.testing.workflow import copy_workflow, plain_default_config

pytestmark = pytest.mark.slow

SMALL_WORKLOAD = {"num_prompts": 3, "output_len": 16, "repeats": 2,
                  "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 2, "max_requests": 3}}


def test_progress_while_servers_run_and_a_summary_at_the_end(tmp_path):
    work = copy_workflow(tmp_path)
    config = plain_default_config()  # one launch each, plus the A/A control: 4 launches
    config["defaults"]["workload"].update(SMALL_WORKLOAD)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # stderr into stdout: one stream, in the order the terminal shows it
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "all"], cwd=work,  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    out = result.stdout
    assert result.returncode == 0, out[-5000:]
    lines = out.splitlines()

    def index(pattern: str) -> int:
        found = [i for i, line in enumerate(lines) if re.fullmatch(pattern, line)]
        assert found, f"no line matching {pattern!r} in:\n{out[-5000:]}"
        return found[0]

    # The run order: each round's seeded order (results/rounds/round-<r>/plan.json), round by round.
    rounds = sorted((work / "results" / "rounds").glob("round-*/plan.json"), key=lambda p: int(p.parent.name[6:]))
    launches = [f"{c} launch-{lid}" for path in rounds for c, lid in json.loads(path.read_text())["order"]]
    assert sorted(launches) == sorted(["nospec launch-1", "eagle3-gloo launch-1", "eagle3-shm launch-1",
                                       "nospec launch-aa"]), launches
    for job, following in zip(launches, [*launches[1:], None]):
        p = f"specsweep {re.escape(job)}: "
        # three lines a launch: launching (after how long it waited for the host, when it did), ready with the
        # warmup's result, the last round's totals with the outcome
        steps = [index(p + r"(had the host after [0-9.]+ s of waiting; )?launching \(local\), 1 point\(s\); "
                       r"every line in results/.*/benchmark_server\.log"),
                 index(p + r"ready after [0-9.]+ s; \[warmup\] (not )?steady after \d+ requests"),
                 index(p + r"\[measured 2/2\] 3/3 requests, 0 failed, [0-9.]+ output tok/s running, [0-9.]+ s; "
                       r"outcome: ok")]
        assert steps == sorted(steps), (job, steps)
        # shown while the job ran: before the next job's server starts, not replayed at the end
        if following:
            assert steps[-1] < index(f"specsweep {re.escape(following)}: launching.*")

    summary = index(r"specsweep summary:")
    assert summary > index(r"specsweep nospec launch-aa: .*outcome: ok")
    tail = "\n".join(lines[summary:])
    assert ("  A/A control: nospec launched again at a random place of round 1 (launch aa) against its launch 1: "
            in tail)
    # what to deploy: report.md's own line (report.json's deploy), never a control
    md = (work / "results/report.md").read_text()
    [deploy] = [x.replace("**", "") for x in md.splitlines() if x.startswith("**On this host, ")]
    assert f"  {deploy}" in tail, tail
    assert "  Report: results/report.md (rows: results/summary.csv)" in tail, tail
    assert (work / "results/report.md").is_file()
    # A quiet console: none of Snakemake's job banners, step counters or scheduler lines (the profile's quiet,
    # specsweep.workflow.console), three lines a launch, and the whole run in one screen.
    banners = [line for line in lines if re.match(r"(local)?rule \w+:|\s+reason: |Select jobs to execute|"
                                                  r"Execute \d+ jobs|\d+ of \d+ steps|Job stats:", line)]
    assert banners == [], banners
    # What this run says, at most 60 lines; a line about waiting for another run's server on this host (a
    # shared machine, not this run) is not the run's own.
    own = [line for line in lines if not re.match(r"waiting|host lock acquired after|the host is free after", line)]
    assert len(own) <= 60, f"{len(own)} lines:\n{out}"
