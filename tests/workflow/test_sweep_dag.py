"""A sweep's DAG without running servers: job counts, launch priorities, bad axes."""

from __future__ import annotations

import re

import yaml

from specsweep.plan.rounds import round_order
from specsweep.testing.workflow import SNAKEMAKE, copy_workflow, job_counts, plan_key_in, run

SWEEP = ["--configfile", "config/sweep-cpu.yaml"]


def test_the_example_sweep_plans_one_job_per_launch_not_per_point(tmp_path):
    work = copy_workflow(tmp_path)
    result = run(SNAKEMAKE + ["-n", "all", *SWEEP], work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # 2 backends x 4 accept lengths + the baseline; 3 points each, measured inside each launch
    # one planned round: its plan, the burn-in before it, its judgement
    assert job_counts(result.stdout) == {"resolve_plan": 9, "preflight_config": 9, "select_plan": 9,
                                         "benchmark_server": 10, "burn_in_host": 1, "plan_round": 1, "judge_round": 1,
                                         "summarize_config": 9, "analyze_sweep": 1, "render_report": 1,
                                         "all": 1}
    assert "results/best/eagle3.env" in result.stdout and "results/plots" in result.stdout


def test_launch_priorities_give_each_rounds_seeded_order(tmp_path):
    work = copy_workflow(tmp_path)
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["defaults"]["launches"] = 1
    config["configurations"]["eagle3-shm"]["launches"] = 2  # and so its positive control, which extends it
    config["configurations"]["eagle3-gloo"]["launches"] = 2
    config["rounds"] = {"seed": 11}
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run(SNAKEMAKE + ["-n", "all"], work)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = re.findall(r"wildcards: config=([a-z0-9_-]+), plan=\w+, launch=(\w+)\n\s+priority: ([0-9.]+)", result.stdout)
    assert all(0 < float(p) < 100 for _, _, p in jobs), "below resolve_plan and preflight_config (100)"
    by_round: dict[int, list[tuple[str, str, float]]] = {}
    for c, lid, p in jobs:
        by_round.setdefault(1 if lid == "aa" else int(lid), []).append((c, lid, float(p)))
    assert sorted(by_round) == [1, 2]
    assert {(c, lid) for c, lid, _ in by_round[2]} == {("eagle3-gloo", "2"), ("eagle3-shm", "2"),
                                                      ("eagle3-shm-slow10", "2")}
    assert ("nospec", "aa") in {(c, lid) for c, lid, _ in by_round[1]}
    for r, members in by_round.items():
        ran = [(c, lid) for c, lid, _ in sorted(members, key=lambda j: -j[2])]
        assert ran == round_order([(c, lid) for c, lid, _ in members], 11, r)
    # the planned rounds' launch jobs all exist at once: every launch of round 1 comes before any of round 2
    assert min(p for _, _, p in by_round[1]) > max(p for _, _, p in by_round[2])


def test_a_bad_axis_stops_the_run_before_any_job(tmp_path):
    work = copy_workflow(tmp_path)
    config = yaml.safe_load((work / "config/sweep-cpu.yaml").read_text())
    config["configurations"]["eagle3"]["axes"].append({"workload.concurency": [1, 2]})
    (work / "config/sweep-cpu.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run(SNAKEMAKE + ["all", *SWEEP], work)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config/sweep-cpu.yaml" in out and "configurations.eagle3.axes[2]" in out and "'concurrency'" in out
    assert not (work / "results").exists()


def test_a_launch_the_sweep_does_not_plan_is_refused(tmp_path):
    work = copy_workflow(tmp_path)
    key = plan_key_in(work, "eagle3-shm")
    result = run(SNAKEMAKE + ["-n", f"results/eagle3-shm/plans/{key}/launch-7/outcome.json"], work)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "specsweep: configuration `eagle3-shm` has no launch-7: the loaded config plans launch-1, launch-2" in out
    assert "Traceback" not in out and "Exception" not in out, out[-3000:]
