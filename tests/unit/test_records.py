"""One run, one id: the check that keeps files of two runs out of one summary."""

from __future__ import annotations

import pytest

from specsweep.records import MixedRunsError, check_one_run, new_run_id, run_header, run_id_of_log


def test_the_server_log_header_carries_the_run_id():
    run_id = new_run_id()
    assert run_id_of_log(run_header(run_id, "eagle3-shm") + "server output\n") == run_id
    assert run_id_of_log("server output without a header\n") is None


def test_one_run_passes_and_empty_record_files_do_not_contradict():
    assert check_one_run({"launch.json": "abc", "outcome.json": "abc", "requests.jsonl": {"abc"},
                          "warmup.jsonl": set()}) == "abc"


def test_two_runs_are_an_error_naming_each_files_run():
    with pytest.raises(MixedRunsError) as info:
        check_one_run({"launch.json": "aaa", "outcome.json": "bbb", "requests.jsonl": {"bbb"}, "server.log": "aaa"})
    msg = str(info.value)
    assert msg.startswith("files of two different runs")
    assert "run aaa: launch.json, server.log" in msg and "run bbb: outcome.json, requests.jsonl" in msg


def test_a_file_without_a_run_id_is_an_error():
    with pytest.raises(MixedRunsError, match="no run id: launch.json"):
        check_one_run({"launch.json": None, "outcome.json": "abc"})
    with pytest.raises(MixedRunsError, match="two different runs"):
        check_one_run({"requests.jsonl": {"abc", "def"}})
