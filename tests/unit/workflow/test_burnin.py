"""The burn-in's stop rule (workflow.burnin) on synthetic units: the decode rate and the time to ready must both
be steady from one unit to the next; its record, and the report's burn-in line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from specsweep.files import write_json_atomic, write_jsonl_atomic
from specsweep.records import new_record
from specsweep.report.head import burn_in_line
from specsweep.testing.doubles import plan_dict
from specsweep.workflow import burnin

#: The H100 record (docs/measurements/2026-12-06-h100-tp1-rounds, round-1-judgement.json): the rule stopped after
#: two units whose decode rates agreed within 1 %, while the time to ready was still falling; later launches were
#: ready after about 18 s.
H100_RATES = [136.96, 135.82]
H100_READY = [25.10, 21.30]
SETTINGS = {"requests": 4, "tolerance": 0.03, "ready_tolerance": 0.1, "min_units": 2, "max_units": 8}


def test_a_steady_decode_rate_with_a_falling_time_to_ready_is_not_steady():
    rule = burnin.stop_rule(H100_RATES, H100_READY, 0.03, 0.1, 2)
    assert rule == {"steady": False, "rate_steady": True, "ready_steady": False}
    # the next unit: still falling by more than 10 % (+ one poll); then it holds
    assert not burnin.stop_rule([*H100_RATES, 136.5], [*H100_READY, 18.3], 0.03, 0.1, 2)["steady"]
    assert burnin.stop_rule([*H100_RATES, 136.5, 136.1], [*H100_READY, 18.3, 18.0], 0.03, 0.1, 2)["steady"]


def test_the_time_to_ready_is_allowed_one_readiness_poll_besides_its_tolerance():
    """A CPU server ready after 3.26 s, then 3.77 s: 0.51 s apart, within 10 % (0.33 s) plus one 0.25 s poll."""
    assert burnin.stop_rule([140.0, 141.0], [3.26, 3.77], 0.05, 0.1, 2)["ready_steady"]
    assert not burnin.stop_rule([140.0, 141.0], [3.26, 5.03], 0.05, 0.1, 2)["ready_steady"]
    assert not burnin.stop_rule([140.0, 141.0], [3.26, 3.77], 0.05, 0.1, 2, ready_poll_s=0.0)["ready_steady"]


@pytest.mark.parametrize("rates,ready,min_units,why", [
    ([140.0, 150.0], [20.0, 20.0], 2, "the decode rate moved 7 %"),
    ([140.0, 140.0], [20.0, None], 2, "a unit without a time to ready (failed before it was ready)"),
    ([140.0, None], [20.0, 20.0], 2, "a unit without a decode rate"),
    ([140.0, 140.0], [20.0, 20.0], 3, "fewer units than min_units"),
])
def test_what_is_not_steady(rates, ready, min_units, why):
    assert not burnin.stop_rule(rates, ready, 0.03, 0.1, min_units)["steady"], why


def unit_files(d: Path, rate: float, ready_s: float, run_id: str) -> None:
    """What one unit's job leaves: launch.json with its time to ready, requests whose decode rate is ``rate``."""
    write_json_atomic(d / "launch.json", {"run_id": run_id, "ready_s": ready_s})
    gap = int(1e9 / rate)
    records = []
    for i in range(4):
        chunks = [i * 10**9 + 10**7 + k * gap for k in range(9)]
        records.append(new_record(run_id=run_id, request_id=f"{run_id}-{i}", phase="measured", repeat=0, index=i,
                                  endpoint="generate", input_len=8, output_len=9, send_ns=i * 10**9, chunk_ns=chunks,
                                  chunk_tokens=[1] * 9, end_ns=chunks[-1], http_status=200, completion_tokens=9,
                                  status="ok"))
    write_jsonl_atomic(d / "requests.jsonl", records)


def test_the_burn_in_runs_until_both_hold_and_its_record_says_so(tmp_path, monkeypatch):
    """The loop over units with each unit's job replaced by its files (the units of the H100 record, then two that
    agree): four units, not two; the record has the rule's parts, and the report's line shows the times to ready."""
    units = iter(zip([*H100_RATES, 136.5, 136.1], [*H100_READY, 18.3, 18.0]))
    calls = []

    def run_unit(plan, paths, *_args, launch_id, **_kw):
        rate, ready_s = next(units)
        calls.append(launch_id)
        unit_files(paths.launch.parent, rate, ready_s, launch_id)
        return {"status": "ok", "started_at": 100.0 * len(calls), "ended_at": 100.0 * len(calls) + 40}

    monkeypatch.setattr(burnin, "run_config", run_unit)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_dict(name="nospec", workload={"num_prompts": 4, "repeats": 3})))
    ran_for = {"launches": ["nospec launch-1"], "invocation": 1.5}  # its params' (workflow.stored.burn_in_for)
    record = burnin.burn_in(str(plan), {**SETTINGS, "for": ran_for}, str(tmp_path / "burn-in.json"), io.StringIO(),
                            unit_dir=str(tmp_path / "units"))
    assert calls == ["burn-in-1", "burn-in-2", "burn-in-3", "burn-in-4"]
    assert record["format_version"] == 3 and record["steady"] and record["rate_steady"] and record["ready_steady"]
    assert record["for"] == ran_for
    assert record["ready_tolerance"] == 0.1 and record["ready_poll_s"] == 0.25
    assert [u["ready_s"] for u in record["units"]] == [25.1, 21.3, 18.3, 18.0]
    assert json.loads((tmp_path / "burn-in.json").read_text()) == record
    line = burn_in_line(record)
    assert "time to ready s 25.1, 21.3, 18.3, 18.0: steady (the decode rate within 3% and the time to ready " \
           "within 10% (+0.25 s) of the unit before)" in line, line


def test_the_report_says_what_kept_moving_and_reads_a_record_of_format_1():
    record = {"format_version": 2, "config": "nospec", "wall_s": 79.3, "tolerance": 0.03, "ready_tolerance": 0.1,
              "ready_poll_s": 0.25, "steady": False, "rate_steady": True, "ready_steady": False,
              "units": [{"decode_tok_s": r, "ready_s": s} for r, s in zip(H100_RATES, H100_READY)]}
    line = burn_in_line(record)
    assert "decode tok/s per unit 137.0, 135.8, time to ready s 25.1, 21.3: NOT steady after 2 units: the host " \
           "kept changing (the time to ready at the last unit;" in line, line
    old = {"config": "nospec", "wall_s": 79.3, "tolerance": 0.03, "steady": True,
           "units": [{"decode_tok_s": r, "ready_s": s} for r, s in zip(H100_RATES, H100_READY)]}
    assert burn_in_line(old) == ("Burn-in: 2 unmeasured launches of nospec in 79.3 s, decode tok/s per unit 137.0, "
                                 "135.8: steady (within 3% of the unit before); it enters no verdict.")
