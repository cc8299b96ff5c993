"""The report's first lines: the rule the verdicts use, the A/A control and the positive control.

Summaries are built from synthetic records of known speed (``testing.reports``), several launches per
configuration, each launch slower or faster by a known factor of its own: the launch effect (not shared by
the launches of a round, which would be a round effect, which the verdicts' model removes).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from specsweep.analysis.launches import LaunchFiles, build_config_summary
from specsweep.analysis.rows import config_rows, explode_points
from specsweep.records import DEFAULT_POINT
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records

#: The launch effect of each configuration's launch 1, 2 and aa: decode time x these factors (a spread of about 1 %).
FACTORS = {"nospec": {"1": 1.00, "2": 1.012, "aa": 0.994}, "eagle3": {"1": 1.008, "2": 0.998},
           "eagle3-copy": {"1": 0.995, "2": 1.006}, "eagle3-slow": {"1": 1.004, "2": 0.997}}
#: Launches about 6 % apart.
LOUD = {"nospec": {"1": 1.0, "2": 1.06, "aa": 0.95}, "eagle3": {"1": 1.06, "2": 1.0},
        "eagle3-copy": {"1": 0.97, "2": 1.03}, "eagle3-slow": {"1": 1.03, "2": 0.98}}


def config_summary(name: str, gap_ms: float, per_chunk: int, launches: list[str], seed: int,
                   factors: dict[str, float]) -> dict:
    spec = per_chunk > 1
    args = {"speculative-algorithm": "EAGLE3" if spec else "NONE"}
    plan = {"name": name, "engine": "reference", "image": None, "gpus": 0, "workload": WORKLOAD,
            "server_args": args, "env": {}, "facts": engine_facts("reference", args)}
    files = []
    for k, lid in enumerate(launches):
        run = f"{name}-{lid}"
        records = [dict(r, point=DEFAULT_POINT) for r in
                   sequential_records(run, gap_ms * factors[lid], per_chunk, spec, seed + 10 * k, jitter=0.02)]
        files.append(LaunchFiles(launch=lid, record={"ready_s": 1.0}, warmup=[], measured=records, server_log="",
                                 outcome={**OK, "run_id": run, "launch": lid, "started_at": 10.0 * k,
                                          "ended_at": 10.0 * k + 5}, run_id=run))
    return build_config_summary(plan, files, lambda _: None)


def sweep(slowdown: float, factors: dict[str, dict[str, float]] = FACTORS) -> list[dict]:
    """nospec (launches 1, 2 and the A/A control), eagle3 and an identical copy, and eagle3 slowed by ``slowdown``."""
    return [config_summary("nospec", 12.0, 1, ["1", "2", "aa"], 1, factors["nospec"]),
            config_summary("eagle3", 20.0, 3, ["1", "2"], 2, factors["eagle3"]),
            config_summary("eagle3-copy", 20.0, 3, ["1", "2"], 3, factors["eagle3-copy"]),
            config_summary("eagle3-slow", 20.0 * (1 + slowdown), 3, ["1", "2"], 4, factors["eagle3-slow"])]


CONTROL = {"name": "eagle3-slow", "of": "eagle3", "slowdown": 0.10}


def test_the_report_states_the_rule_and_both_controls(tmp_path: Path):
    render_summaries(sweep(0.10), "nospec", tmp_path / "s.csv", tmp_path / "r.md", tmp_path / "plots",
                  sweep={"aa_control": True, "positive_control": CONTROL, "smallest_effect": 0.05})
    md = (tmp_path / "r.md").read_text()
    head = md.split("## Results")[0]
    assert head.split("\n\n")[1].startswith("**On this host, deploy `eagle3")  # what to deploy comes first
    first = head.split("\n\n")[2]
    assert first.startswith("**Verdicts are on the decode rate, called when the 95 % interval of the ratio "
                            "excludes 1:** the launch-to-launch variance left by the model with the round as a block "
                            "(configuration + round, 9 launches of 5 levels in 2 rounds; the A/A control a level of "
                            "its own)")
    # 9 launches - (mean + 4 other levels + 1 other round): the A/A control's own level takes its degree of freedom
    assert "(3 degrees of freedom)" in first and "a configuration of 2 launches against the baseline's 2" in first
    assert "the 5.0 % asked for is resolved" in first
    assert "- A/A control: nospec launched again at a random place of round 1 (launch aa) against its launch 1" in head
    assert "no significant difference, as it must be" in head and "round effects removed" in head
    assert ("- Positive control: eagle3-slow (eagle3 with every engine step slowed by 10.0 %): called slower, as it "
            "must be") in head and "expected x0.909" in head
    pairwise = md.split("## Pairwise verdicts")[1].split("\n## ")[0]
    assert "eagle3 vs eagle3-copy: no significant difference" in pairwise and "over 3 pairs" in pairwise
    assert "eagle3 vs eagle3-slow: faster" in pairwise
    rows = {r["config"]: r for r in csv.DictReader((tmp_path / "s.csv").open())}
    # every row carries the threshold it was judged by; one baseline tok/s
    assert float(rows["eagle3"]["threshold"]) > 0 and rows["eagle3"]["verdict"] == "faster"
    assert float(rows["eagle3"]["baseline_tok_s"]) == pytest.approx(float(rows["nospec"]["decode_rate"]))
    assert rows["eagle3"]["end_to_end_verdict"] == "faster" and rows["eagle3"]["ttft_verdict"]
    # break-even = cycle time x the same baseline tok/s
    assert float(rows["eagle3"]["break_even_accept_length"]) == pytest.approx(
        float(rows["eagle3"]["cycle_time_ms"]) / 1e3 * float(rows["nospec"]["decode_rate"]))


def test_a_control_below_what_the_design_sees_is_not_called_and_the_report_says_what_would_be_needed(tmp_path):
    summaries = sweep(0.01, LOUD)  # launches 6 % apart: a 1 % slowdown is far below that
    render_summaries(summaries, "nospec", tmp_path / "s.csv", tmp_path / "r.md", tmp_path / "plots",
                  sweep={"aa_control": True, "positive_control": dict(CONTROL, slowdown=0.01),
                         "smallest_effect": 0.05})
    head = (tmp_path / "r.md").read_text().split("## Results")[0]
    assert "**NOT called slower (no significant difference" in head
    assert "this sweep cannot see a 1.0 % effect**" in head and "launches per configuration would (80 % power)" in head
    assert "to resolve the 5.0 % asked for," in head and "launches per configuration would be needed" in head
    rows, _ = config_rows(explode_points(summaries), "nospec", 0.05)
    copy = next(r for r in rows if r["config"] == "eagle3-copy")
    assert copy["detectable"] > 0.05 and copy["launches_needed"] > 2


def test_an_aa_control_with_too_few_requests_is_not_judged_and_not_said_to_pass():
    """Fewer than min_samples requests a side (3 prompts x 2 repeats): the comparison has no interval and says
    'insufficient samples'; the line said 'insufficient samples, as it must be', as if the control had passed."""
    from specsweep.report.head import aa_lines

    comparison = {"n": 6, "n_baseline": 6, "min_samples": 10, "level": 0.95, "verdict": "insufficient samples"}
    aa = {"planned": True, "baseline": "nospec", "external": False, "points": [{
        "point": "default", "called": False, "launch_sd": 0.033, "drift_beyond_sd": True,
        "result": {"metric": "decode_tok_s", "first": "1", "control": "aa", "launch_medians": {"1": 53.8, "aa": 56.4},
                   "drift": 0.048, "comparison": comparison}}]}
    line = aa_lines(aa)
    assert "as it must be" not in line, line
    assert ("nospec launched again at a random place of round 1 (launch aa) against its launch 1: 53.8 vs 56.4 "
            "decode tok/s (drift +4.8 %): **not judged (insufficient samples)**: whether two launches of one "
            "configuration differ is untested") in line, line
    judged = {**aa, "points": [{**aa["points"][0], "drift_beyond_sd": False, "result": {
        **aa["points"][0]["result"], "comparison": {**comparison, "verdict": "no significant difference",
                                                    "ratio": 1.048, "ratio_ci": [0.9, 1.2], "threshold": 0.1}}}]}
    assert "no significant difference, as it must be (x1.048 [0.900, 1.200]" in aa_lines(judged)
