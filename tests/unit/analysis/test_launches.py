"""summary.json over launches and points: pooling, statuses, the A/A control."""

from __future__ import annotations

import random

import pytest

from specsweep.analysis.launches import LaunchFiles, aa_control, build_config_summary, point_sample
from specsweep.analysis.stats import Noise, pooled_noise
from specsweep.contracts.summary import SUMMARY_FORMAT_VERSION
from specsweep.records import new_record
from specsweep.testing.doubles import engine_facts

MS = 1_000_000
WORKLOAD = {
    "endpoint": "generate", "num_prompts": 6, "input_len": 8, "output_len": 17, "concurrency": 1,
    "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0, "request_timeout_s": 10,
    "warmup": {"window": 2, "tolerance": 0.1, "min_windows": 2, "max_requests": 8},
}
PLAN = {"name": "cfg", "engine": "reference", "image": None, "server_args": {}, "workload": WORKLOAD,
        "facts": engine_facts("reference"),
        "points": [{"name": "c1", "workload": WORKLOAD}, {"name": "c2", "workload": dict(WORKLOAD, concurrency=2)}]}


def records(run: str, point: str, gap_ms: float, seed: int) -> list[dict]:
    rng, out, t = random.Random(seed), [], 0
    for rep in range(2):
        for i in range(6):
            chunks = [t + 20 * MS]
            while len(chunks) < 17:
                chunks.append(chunks[-1] + int(gap_ms * rng.uniform(0.99, 1.01) * MS))
            out.append(new_record(run_id=run, point=point, request_id=f"{run}-{point}-{rep}{i}", phase="measured",
                                  repeat=rep, index=i, endpoint="generate", input_len=8, output_len=17, send_ns=t,
                                  chunk_ns=chunks, chunk_tokens=[1] * 17, end_ns=chunks[-1], http_status=200,
                                  completion_tokens=17, status="ok"))
            t = chunks[-1] + MS
    return out


def e2e_ms(gap_ms: float) -> float:
    """End-to-end time of one request of ``records``: first token at 20 ms, then 16 gaps."""
    return 20 + 16 * gap_ms


def launch(lid: str, gap_ms: float, seed: int, failed_point: str | None = None) -> LaunchFiles:
    points = {p: {"status": "ok", "stage": None, "reason": None, "detail": None, "warmup": None} for p in ("c1", "c2")}
    if failed_point:
        points[failed_point] = {"status": "failed", "stage": "benchmark", "reason": "all_requests_failed",
                                "detail": "0 succeeded"}
    measured = [r for p in ("c1", "c2") if p != failed_point for r in records(lid, p, gap_ms, seed)]
    status = "failed" if failed_point else "ok"
    return LaunchFiles(launch=lid, record={"ready_s": 2.0}, warmup=[], measured=measured, server_log="",
                       outcome={"status": status, "stage": None, "points": points, "launch": lid, "run_id": lid,
                                "started_at": 100.0 * seed, "ended_at": 100.0 * seed + 30})


def test_points_pool_their_launches():
    s = build_config_summary(PLAN, [launch("1", 10.0, 1), launch("2", 12.5, 2)], lambda _: None)
    assert s.format_version == SUMMARY_FORMAT_VERSION == 8 and s.status == "ok"
    assert [p.point for p in s.points] == ["c1", "c2"]
    assert [e.launch for e in s.launches] == ["1", "2"] and s.launches[0].wall_s == 30
    c1 = s.points[0].to_dict()
    assert c1["metrics"]["counts"]["ok"] == 24 and c1["metrics"]["repeats"] == [0, 1, 2, 3]
    sample = c1["metrics"]["samples"]["output_tok_s"]
    assert sample["launch"] == ["1"] * 12 + ["2"] * 12 and sample["repeat"][12] == 2
    medians = [e["tok_s_median"] for e in c1["launches"]]
    assert medians[0] / medians[1] == pytest.approx(e2e_ms(12.5) / e2e_ms(10.0), rel=0.01)  # the faster launch
    assert c1["plan"]["workload"]["concurrency"] == 1 and s.points[1].workload["concurrency"] == 2
    assert "format_version" not in c1
    assert c1["run_id"] is None and [e["run_id"] for e in c1["launches"]] == ["1", "2"], "one run per launch"
    assert [e.run_id for e in s.launches] == ["1", "2"]
    # the decode rate: the geometric mean of the launches' median decode rates (1000 / 10 and 1000 / 12.5 tok/s)
    assert c1["metrics"]["decode_rate"]["value"] == pytest.approx((100.0 * 80.0) ** 0.5, rel=0.01)
    assert [e["decode_tok_s_median"] for e in c1["launches"]] == pytest.approx([100.0, 80.0], rel=0.01)
    assert c1["metrics"]["samples"]["ttft_ms"]["launch"] == ["1"] * 12 + ["2"] * 12, "TTFT is judged on its own"


def test_one_failed_launch_fails_the_point_and_names_the_launch():
    s = build_config_summary(PLAN, [launch("1", 10.0, 1), launch("2", 10.0, 2, failed_point="c2")], lambda _: None)
    by = {p.point: p for p in s.points}
    assert by["c1"].status == "ok"
    assert by["c2"].status == "failed" and by["c2"].detail.startswith("launch 2:")
    assert s.status == "failed"


def test_the_aa_control_is_pooled_and_measured_against_the_first_launch():
    s = build_config_summary(PLAN, [launch("1", 10.0, 1), launch("aa", 13.0, 2)], lambda _: None)
    c1 = s.points[0].to_dict()
    # judged by a launch variance of 1 % (10 degrees of freedom) measured over the sweep: called
    aa = aa_control(c1, Noise(var=0.01 ** 2, df=10, request_var=None, unit="launch", sides=3, units=13))
    assert aa["first"] == "1" and aa["control"] == "aa" and aa["metric"] == "decode_tok_s"
    assert aa["launch_medians"] == pytest.approx({"1": 100.0, "aa": 1000 / 13}, rel=0.01)
    assert aa["drift"] == pytest.approx(10.0 / 13.0 - 1, rel=0.02)
    assert aa["comparison"]["verdict"] == "slower" and aa["comparison"]["units"] == [1, 1]
    # judged by these two launches alone (1 degree of freedom): the same 23 % is within the launch effect
    alone = aa_control(c1, pooled_noise([point_sample(c1)]))
    assert alone["comparison"]["verdict"] == "no significant difference" and alone["comparison"]["df"] == 1


def test_a_failed_control_is_a_warning_not_a_failed_baseline():
    s = build_config_summary(PLAN, [launch("1", 10.0, 1), launch("aa", 10.0, 2, failed_point="c1")], lambda _: None)
    c1 = s.points[0].to_dict()
    assert c1["status"] == "ok" and c1["metrics"]["counts"]["ok"] == 12, "the failed control is not pooled"
    assert any("A/A control launch aa did not end ok" in w for w in c1["warnings"])
    assert aa_control(c1, pooled_noise([point_sample(c1)])) is None


def test_a_launch_that_never_started_fails_every_point():
    dead = LaunchFiles(launch="1", record=None, warmup=[], measured=[], server_log="",
                       outcome={"status": "failed", "stage": "launch", "reason": "server_exited", "detail": "exit 1",
                                "log_tail": "boom", "points": {}, "launch": "1"})
    s = build_config_summary(PLAN, [dead], lambda _: None)
    assert [(p.status, p.stage, p.reason) for p in s.points] == [("failed", "launch", "server_exited")] * 2
    assert s.points[0].log_tail == "boom"


def test_the_wait_for_the_host_is_kept_apart_from_the_server_time():
    """A job that waited 118.5 s for the host lock and ran 153.8 s in all: its server ran 35.3 s, and the
    Launches table and the launch line say so (launch.json records both waits: serve.lock, serve.phases)."""
    from specsweep.analysis.controls import launches_record
    from specsweep.report.head import launch_lines
    from specsweep.report.tables import launch_table

    waited = launch("1", 10.0, 1)
    waited.record.update(host_lock={"waited_s": 118.5}, host_before_launch={"waited_s": 0.5})
    waited.outcome.update(started_at=1000.0, ended_at=1153.8)
    alone = launch("2", 10.0, 2)
    alone.record.update(host_lock={"waited_s": 0.0}, host_before_launch={"waited_s": 0.0})
    s = build_config_summary(PLAN, [waited, alone], lambda _: None)
    first = s.launches[0]
    assert first.wall_s == pytest.approx(153.8)
    assert first.host_wait_s == pytest.approx(119.0) and first.server_s == pytest.approx(34.8)
    record = launches_record([s], None)
    assert record["server_s"] == pytest.approx(34.8 + 30) and record["host_wait_s"] == pytest.approx(119.0)
    table = launch_table(record["entries"])
    assert "| host wait s | ready s | server s | wall s |" in table
    assert "| 119.0 | 2.0 | 34.8 | 153.8 |" in table, table
    line = launch_lines(record)
    assert "1.1 min of server time in all" in line and "2.0 min waiting for the host" in line, line
    # an older launch.json without the waits: the server time is unknown, not the wall time
    old = launch("3", 10.0, 3)
    assert build_config_summary(PLAN, [old], lambda _: None).launches[0].server_s is None
