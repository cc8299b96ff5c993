"""A race's DAG without running servers: the ground-truth grid's planned rounds (config/race-cpu.yaml), and the
screen (rules/screen.smk): ``-n`` before the screen shows the micro-benchmarks (one per distinct communication
setting) and the checkpoint, and no server launch; the rounds then hold only what the screen kept
(``workflow.inputs``: the set-aside list read through the checkpoint)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from specsweep.files import canonical_json
from specsweep.plan.config import load_config
from specsweep.testing.workflow import REPO, SNAKEMAKE, copy_workflow, job_counts, run
from specsweep.workflow import round_inputs

SCREEN = ["--configfile", "config/screen-cpu.yaml"]


def test_before_the_screen_the_dry_run_shows_the_micro_benchmarks_and_the_screen_and_no_launch(tmp_path):
    work = copy_workflow(tmp_path)
    result = run(SNAKEMAKE + ["-n", "all", *SCREEN], work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)
    # 2 groups (with and without speculation) x 2 all-reduce backends: 4 distinct settings, one run each
    assert counts["bench_setting"] == 4 and counts["screen_grid"] == 1, counts
    # no server before the screen: the burn-in comes with round 1's launches, which exist once it is written
    assert "benchmark_server" not in counts and "burn_in_host" not in counts and "judge_round" not in counts, counts
    assert "checkpoint jobs" in result.stdout


def test_the_rounds_and_the_report_read_the_screens_set_aside_list():
    config = {"baseline": "a", "aa_control": True, "rounds": {"mode": "race", "max_launches": 4},
              "screen": {"enabled": True, "settings": ["server_args.all-reduce-backend"]}}
    launches = {"a": 2, "b": 2, "c": 2}
    rounds = round_inputs.walk_rounds(launches, config, lambda r: "unused", upto=2, screened=lambda: ["b"])
    assert rounds == [[("a", "1"), ("c", "1"), ("a", "aa")], [("a", "2"), ("c", "2")]]
    assert round_inputs.report_summaries(["a", "b", "c"], config, lambda: ["b"]) == ["results/a/summary.json",
                                                                              "results/c/summary.json"]
    params = round_inputs.round_params(config, {n: {"variant": None, "expect": "ok", "expect_signature": None}
                                          for n in launches}, launches, {n: "k" for n in launches})
    assert json.loads(round_inputs.judge_params(params, config, lambda: ["b"]))["launches"] == {"a": 2, "c": 2}
    assert round_inputs.screen_input(config) == {"screen": round_inputs.SCREEN_PATH}
    off = {**config, "screen": {"enabled": False}}
    never = lambda: (_ for _ in ()).throw(AssertionError("no screen is read when it is off"))  # noqa: E731
    assert len(round_inputs.walk_rounds(launches, off, lambda r: "unused", upto=1, screened=never)[0]) == 4
    assert round_inputs.report_summaries(["a", "b"], off, never) == ["results/a/summary.json", "results/b/summary.json"]
    assert round_inputs.judge_params(params, off, never) == params and round_inputs.screen_input(off) == {}
    # the screen's check run: the set-aside configuration once, in round 1, and its summary in the report;
    # the judgements know it is outside the race
    check = {**config, "screen": {**config["screen"], "check": True}}
    rounds = round_inputs.walk_rounds(launches, check, lambda r: "unused", upto=2, screened=lambda: ["b"])
    assert rounds == [[("a", "1"), ("b", "1"), ("c", "1"), ("a", "aa")], [("a", "2"), ("c", "2")]]
    assert round_inputs.report_summaries(["a", "b", "c"], check, lambda: ["b"]) == [
        "results/a/summary.json", "results/b/summary.json", "results/c/summary.json"]
    judged = json.loads(round_inputs.judge_params(params, check, lambda: ["b"]))
    assert judged["launches"] == {"a": 2, "b": 1, "c": 2} and judged["outside_race"] == ["b"]


def test_the_ground_truth_grids_race_16_known_slowdowns_and_plan_their_first_rounds(tmp_path):
    # steps wider than smallest_effect on the CPU (its launch SD), 2 % on a GPU (config/race-gpu.yaml)
    for name, step in (("race-cpu", 0.06), ("race-gpu", 0.02)):
        config = load_config(REPO / f"config/{name}.yaml")
        expanded = config["configurations"]  # the grid expanded
        slowdowns = sorted(float(c["env"]["SPECSWEEP_TEST_STEP_SLOWDOWN"]) for c in expanded.values())
        assert slowdowns == [round(k * step, 2) for k in range(16)], (name, slowdowns)
        assert config["smallest_effect"] == 0.05
    config = load_config(REPO / "config/race-cpu.yaml")
    expanded = config["configurations"]
    assert config["rounds"]["mode"] == "race" and config["baseline"] == "race-slow00" in expanded
    work = copy_workflow(tmp_path)
    result = run(SNAKEMAKE + ["-n", "all", "--configfile", "config/race-cpu.yaml"], work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)
    # the planned rounds: 16 x 2 launches and the A/A control, after the burn-in; the survivors' rounds come
    # from the judgement of round 2 (a checkpoint)
    assert counts["benchmark_server"] == 33 and counts["burn_in_host"] == 1 and counts["judge_round"] == 1, counts
    assert "bench_setting" not in counts and "screen_grid" not in counts, "no screen asked for"
    # judged after round 1 (config/race-first-round.yaml): every configuration once, the baseline 4 times and
    # its A/A control, then round 1's judgement; nothing of round 2 before it
    first = run(SNAKEMAKE + ["-n", "all", "--configfile", "config/race-cpu.yaml", "config/race-first-round.yaml"],
                work)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    counts = job_counts(first.stdout)
    assert counts["benchmark_server"] == 20 and counts["judge_round"] == 1, counts
    launches = set(re.findall(r"results/([a-z0-9-]+)/plans/[0-9a-f]+/launch-(\w+)/outcome\.json", first.stdout))
    assert {lid for c, lid in launches if c == "race-slow00"} == {"1", "1b", "1c", "1d", "aa"}, launches
    assert {lid for c, lid in launches if c != "race-slow00"} == {"1"}


def test_a_check_run_launches_the_set_aside_configuration_once_in_round_1_and_never_after(tmp_path):
    """``screen.check`` through Snakemake: once the screen has set nospec-gloo aside (its record written, every
    file before it present), ``-n`` plans nospec-gloo's launch 1 in round 1 and no launch 2; without the check,
    none of it."""

    import yaml

    work = copy_workflow(tmp_path)
    config = yaml.safe_load((work / "config/screen-cpu.yaml").read_text())
    config["screen"]["check"] = True
    (work / "check.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    args = ["--configfile", "check.yaml"]
    before = run(SNAKEMAKE + ["-n", "all", *args], work)
    assert before.returncode == 0, before.stdout[-3000:] + before.stderr[-3000:]
    # every file up to the screen's checkpoint, as if it had run (plans as resolved: the start reads them)
    from specsweep.plan.config import check_sweep
    from specsweep.plan.resolve import resolve_sweep

    cwd = Path.cwd()
    os.chdir(work)
    try:
        plans, _ = resolve_sweep(check_sweep(config, "check.yaml").config)
    finally:
        os.chdir(cwd)
    upto = ("resolve_plan", "preflight_config", "bench_setting", "screen_grid")
    blocks = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):\n(?:\s+input: .*\n)?\s+output: (.+)$", before.stdout,
                        flags=re.M)
    assert {rule for rule, _ in blocks} >= set(upto), ({rule for rule, _ in blocks}, before.stdout[-3000:])
    for out in sorted({f.strip() for rule, outs in blocks if rule in upto for f in outs.split(",")}):
        path = work / out
        path.parent.mkdir(parents=True, exist_ok=True)
        name = Path(out).parts[1]
        path.write_text(canonical_json(plans[name]) if out.endswith("/plan.json") and name in plans else "{}")
    (work / "results/screen/screen.json").write_text(json.dumps({"set_aside": ["nospec-gloo"]}))
    touched = run(SNAKEMAKE + ["--touch", "screen_grid", *args], work)
    assert touched.returncode == 0, touched.stdout[-3000:] + touched.stderr[-3000:]
    after = run(SNAKEMAKE + ["-n", "all", *args], work)
    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    launches = set(re.findall(r"results/([a-z0-9-]+)/plans/[0-9a-f]+/launch-(\w+)/outcome\.json", after.stdout))
    assert ("nospec-gloo", "1") in launches and ("nospec-gloo", "2") not in launches, after.stdout[-3000:]
    assert {("nospec-shm", "2"), ("eagle3-shm", "2"), ("eagle3-gloo", "2"), ("nospec-shm", "aa")} <= launches
    # the same files without the check: nospec-gloo is never launched
    off = run(SNAKEMAKE + ["-n", "all", "--configfile", "config/screen-cpu.yaml"], work)
    assert off.returncode == 0, off.stdout[-3000:] + off.stderr[-3000:]
    assert not re.search(r"results/nospec-gloo/plans/[0-9a-f]+/launch-", off.stdout), "set aside, not checked"
