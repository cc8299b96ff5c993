"""A launch belongs to its plan: plan keys, the current plan, and launches that lack a file (synthetic results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsweep.contracts import layout
from specsweep.workflow import inputs, round_inputs
from specsweep.workflow.stored import current_key, stale_launch_lines, stale_launches

PLAN = {"name": "a", "argv": ["python3", "-m", "x"], "env": {"A": "1"}}
OTHER = {**PLAN, "env": {"A": "2"}}


def _launch(results: Path, key: str, launch: str, leave_out: tuple[str, ...] = ()) -> Path:
    d = Path(layout.launch_dir("a", key, launch, str(results)))
    for leaf in layout.LAUNCH_FILES.values():
        if leaf in leave_out:
            continue
        if leaf == layout.NCCL_LOG_DIR:
            (d / leaf).mkdir(parents=True, exist_ok=True)
        else:
            d.mkdir(parents=True, exist_ok=True)
            (d / leaf).write_text("{}")
    return d


def _current(results: Path, plan: dict, summary: bool = True) -> str:
    (results / "a").mkdir(parents=True, exist_ok=True)
    (results / "a" / "plan.json").write_text(json.dumps(plan, indent=2))  # any layout: the key is of its content
    return inputs.plan_key(plan)


def test_a_plan_key_is_of_the_plan_content_and_names_its_directory():
    key = inputs.plan_key(PLAN)
    assert key == inputs.plan_key(dict(reversed(list(PLAN.items())))) != inputs.plan_key(OTHER)
    assert len(key) == layout.PLAN_KEY_DIGITS and set(key) <= set("0123456789abcdef")
    assert layout.launch_file("a", key, "1", "outcome") == f"results/a/plans/{key}/launch-1/outcome.json"
    assert inputs.plan_keys({"a": PLAN}) == {"a": key}


def test_a_plan_key_the_loaded_config_does_not_resolve_stops_with_one_line():
    keys = {"a": inputs.plan_key(PLAN)}
    assert inputs.check_plan_key(keys, "a", None) == "a" == inputs.check_plan_key(keys, "a", keys["a"])
    with pytest.raises(SystemExit, match=r"^specsweep: results/a/plans/0{12} is not the plan the loaded config "
                                         rf"files resolve for `a` \(that is results/a/plans/{keys['a']}\)"):
        inputs.check_plan_key(keys, "a", "0" * 12)


def test_the_current_key_is_the_key_of_the_current_plan_copy(tmp_path):
    assert current_key(tmp_path, "a") is None
    _current(tmp_path, PLAN)
    assert current_key(tmp_path, "a") == inputs.plan_key(PLAN)


def _summary(results: Path, *launches: str) -> None:
    (results / "a" / "summary.json").write_text(json.dumps({"launches": [{"launch": lid} for lid in launches]}))


def test_a_summarized_launch_that_lacks_a_file_is_named_with_its_stale_summary_and_the_rerun(tmp_path):
    key = _current(tmp_path, PLAN)
    _summary(tmp_path, "1", "2", "aa")
    _launch(tmp_path, key, "1")
    gone = _launch(tmp_path, key, "2", leave_out=("outcome.json",))
    planned = [("a", "1"), ("a", "2"), ("a", "aa"), ("a", "3")]  # launch-aa: deleted as a whole; 3: not run yet
    found = stale_launches(tmp_path, {"a": key}, planned)
    assert [(n, d.name, m) for n, d, m in found] == [
        ("a", "launch-2", ["outcome.json"]), ("a", "launch-aa", list(layout.LAUNCH_FILES.values()))]
    [line, _] = stale_launch_lines(tmp_path, {"a": key}, planned)
    assert line == (f"{gone} lacks outcome.json, and {tmp_path}/a/summary.json and the report were built from it: "
                    "Snakemake does not rerun a launch whose file was deleted (snakemake#1978); measure it again "
                    f"with `-R {gone}/outcome.json` (`specsweep failed` lists it)")


def test_launches_no_summary_of_the_plan_was_built_from_are_not_stale(tmp_path):
    key = _current(tmp_path, PLAN)
    _launch(tmp_path, key, "2", leave_out=("outcome.json",))  # a launch under way, or cut short
    assert stale_launches(tmp_path, {"a": key}, [("a", "2")]) == []  # no summary: Snakemake runs the launch first
    _launch(tmp_path, key, "1")
    _summary(tmp_path, "1")  # then `launches: 1 -> 2`: launch 2 is new, no summary's yet
    assert stale_launches(tmp_path, {"a": key}, [("a", "1"), ("a", "2")]) == []
    _summary(tmp_path, "1", "2")
    assert len(stale_launches(tmp_path, {"a": key}, [("a", "1"), ("a", "2")])) == 1
    # the summary is of another plan (another config file ran last): Snakemake rebuilds it from this plan's launches
    _current(tmp_path, OTHER)
    assert stale_launches(tmp_path, {"a": key}, [("a", "1"), ("a", "2")]) == []


def test_the_burn_in_runs_for_the_launches_still_to_measure_and_else_keeps_what_it_last_ran_for(tmp_path):
    """burn_in_host's params (``for``): new in an invocation that measures launches (it runs again, first), the
    record's own when nothing is to be measured (it does not run), None before any burn-in."""
    from specsweep.workflow.stored import burn_in_for, unmeasured

    results = tmp_path / "results"
    key = inputs.plan_key(PLAN)
    _launch(results, key, "1")
    planned = [("a", "1"), ("a", "2"), ("a", "aa"), ("other", "1")]
    assert unmeasured(results, {"a": key}, planned) == ["a launch-2", "a launch-aa"]  # "other": no current plan
    assert burn_in_for(results, {"a": key}, planned, 12.5) == {"launches": ["a launch-2", "a launch-aa"],
                                                               "invocation": 12.5}
    for launch in ("2", "aa"):
        _launch(results, key, launch)
    assert burn_in_for(results, {"a": key}, planned, 13.0) is None  # no burn-in ran yet: the settings alone
    record = results / "rounds" / "burn-in.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"format_version": 1, "for": {"launches": ["a launch-2"], "invocation": 12.5}}))
    assert burn_in_for(results, {"a": key}, planned, 14.0) == {"launches": ["a launch-2"], "invocation": 12.5}
    assert json.loads(round_inputs.burn_in_params({}, None)).get("for") is None
    due = {"launches": ["a launch-2"]}
    assert json.loads(round_inputs.burn_in_params({}, due))["for"] == due
