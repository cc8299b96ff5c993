"""summary.json over launches and points: pooling, statuses, the A/A control."""

from __future__ import annotations

import random

import pytest

from specsweep.analysis.launches import LaunchFiles, aa_control, build_config_summary, point_sample
from specsweep.analysis.stats import Noise, pooled_noise
from specsweep.contracts.summary import SUMMARY_FORMAT_VERSION, ConfigSummary
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


# ------------------------------------------------------------ side by side: what the summaries and the report keep


def side_launch(lid: str, seed: int, started_at: float, first_window_ns: int, partners_up: list[str],
                share: float = 0.001, worst: float = 0.004) -> LaunchFiles:
    """A launch of a side-by-side round as its files say (serve.sidebyside: outcome.json's ``side_by_side``,
    launch.json's keys of it and its ``window_log``)."""
    base = launch(lid, 10.0, seed)
    side = {"partners_up": partners_up, "windows": 5, "partner_cpu_share": share, "partner_cpu_share_max": worst,
            "partner_cpu_share_limit": 0.02}
    windows = [{"window": k, "start_ns": first_window_ns + k * 10**9, "end_ns": first_window_ns + k * 10**9 + 5 * 10**8}
               for k in range(5)]
    base.record.update(round=1, design="side-by-side", window_log=windows, **side)
    base.outcome.update(started_at=started_at, ended_at=started_at + 30, side_by_side=side)
    return base


def summary_of(config: str, *launches: LaunchFiles) -> ConfigSummary:
    return build_config_summary(dict(PLAN, name=config), list(launches), lambda _: None)


def test_a_side_by_side_launch_carries_its_partners_windows_and_their_cpu_and_a_sequential_one_nothing_new():
    s = summary_of("cfg", side_launch("1", 1, 1000.0, 5 * 10**12, ["other@1"]), launch("2", 10.0, 2))
    side, alone = (e.to_dict() for e in s.launches)
    assert side["side_by_side"] == {"partners_up": ["other@1"], "windows": 5, "partner_cpu_share": 0.001,
                                    "partner_cpu_share_max": 0.004, "partner_cpu_share_limit": 0.02,
                                    "first_window_ns": 5 * 10**12}
    # a launch measured alone: its section has exactly the keys it always had (summary.json's bytes unchanged)
    assert set(alone) == {"launch", "control", "run_id", "status", "stage", "reason", "started_at", "ended_at",
                          "wall_s", "host_wait_s", "server_s", "ready_s"}


def test_the_report_says_how_side_by_side_measurement_went_per_launch_and_over_the_sweep():
    from specsweep.analysis.controls import launches_record
    from specsweep.report.head import launch_lines
    from specsweep.report.tables import launch_table

    plans = [{"round": 1, "order": [["a", "1"], ["b", "1"], ["c", "1"]]}]
    files = [summary_of("a", side_launch("1", 1, 1000.0, 10**12, ["b@1", "c@1"], share=0.0011, worst=0.01)),
             summary_of("b", side_launch("1", 2, 1000.2, 10**12 + 10**8, ["a@1", "c@1"], share=0.0042, worst=0.012)),
             summary_of("c", side_launch("1", 3, 1000.1, 10**12 + 2 * 10**8, []))]
    record = launches_record(files, [["a", "1"], ["b", "1"], ["c", "1"]], plans)
    assert record["side_by_side"] == {"launches": 3, "of": 3, "windows": 15, "alone": [["c", "1"]],
                                      "partner_cpu_share_max": 0.0042, "worst": ["b", "1"], "worst_window": 0.012,
                                      "limit": 0.02, "busiest_limit": None}  # launches before one partner's limit
    table = launch_table(record["entries"])
    assert "| wall s | measured |" in table, table
    assert "side by side, 2 partners up, 5 windows, partners' CPU 0.42 % (worst window 1.20 %) |" in table, table
    assert "side by side, no partner up, 5 windows" in table
    line = launch_lines(record)
    assert ("Side by side: 3 of 3 launches measured in turn with their round's other servers up, in 15 windows; "
            "1 with no partner's server up (c/1); the partners' servers used at most 0.42 % of a core over one "
            "launch's windows (b/1), 1.20 % in the worst single window") in line, line
    # a sweep measured one launch at a time: no column, no sentence, as before
    alone = launches_record([summary_of("a", launch("1", 10.0, 1))], None)
    assert alone["side_by_side"] is None
    assert "measured" not in launch_table(alone["entries"]) and "Side by side" not in launch_lines(alone)


def test_a_side_by_side_rounds_order_is_checked_by_its_first_windows_not_by_its_starts():
    """A side-by-side round's jobs start together, in whatever order Snakemake forks them; what follows the
    round's order is its turns. Round 1 side by side (started c, a, b; turns a, b, c as planned), round 2
    sequential (a then b, as planned)."""
    from specsweep.analysis.controls import launches_record
    from specsweep.report.head import launch_lines

    plans = [{"round": 1, "order": [["a", "1"], ["b", "1"], ["c", "1"]]},
             {"round": 2, "order": [["a", "2"], ["b", "2"]]}]
    planned = [p for r in plans for p in r["order"]]
    t = 10**12

    def sweep(turns: dict[str, int]) -> list[dict]:
        return [summary_of("a", side_launch("1", 1, 1000.4, turns["a"], ["b@1", "c@1"]), launch("2", 10.0, 20)),
                summary_of("b", side_launch("1", 2, 1000.9, turns["b"], ["a@1", "c@1"]), launch("2", 10.0, 21)),
                summary_of("c", side_launch("1", 3, 1000.0, turns["c"], ["a@1", "b@1"]))]

    order = launches_record(sweep({"a": t, "b": t + 10**8, "c": t + 2 * 10**8}), planned, plans)["order"]
    assert order == {"planned": True, "in_order": True, "by": "start and first window"}
    assert "a side-by-side round's launches, whose servers start together, by their first measuring window" in \
        launch_lines(launches_record(sweep({"a": t, "b": t + 10**8, "c": t + 2 * 10**8}), planned, plans))
    # turns out of the round's order are still found
    order = launches_record(sweep({"a": t, "b": t + 2 * 10**8, "c": t + 10**8}), planned, plans)["order"]
    assert order == {"planned": True, "in_order": False, "by": "start and first window", "first_bad": 1,
                     "ran": ["c", "1"], "expected": ["b", "1"]}
    # sequential rounds alone: by their starts, as before
    seq = [summary_of("a", launch("1", 10.0, 1)), summary_of("b", launch("1", 10.0, 2))]
    assert launches_record(seq, [["a", "1"], ["b", "1"]])["order"] == {"planned": True, "in_order": True,
                                                                       "by": "start"}
    assert launches_record(seq, [["b", "1"], ["a", "1"]])["order"]["in_order"] is False
