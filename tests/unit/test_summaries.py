"""summary.json as typed records (``contracts.summary``): read and written again byte for byte, another
format refused in one line, and what the report is given beside it (the labels) reaching every point."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specsweep.contracts.summary import (
    SUMMARY_FORMAT_VERSION,
    ConfigSummary,
    LaunchSection,
    PointSummary,
    SummaryError,
)
from specsweep.contracts.vocabulary import Status
from specsweep.files import write_json_atomic
from specsweep.testing.reports import launches_summary
from specsweep.workflow.jobs import analyze_sweep_files


@pytest.fixture(scope="module")
def summary() -> ConfigSummary:
    """nospec measured in two launches and its A/A control."""
    return launches_summary("nospec", 12.0, {"1": (0, 1.0), "2": (1, 1.02), "aa": (2, 0.99)}, seed=107)


def _written(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name / "summary.json"
    write_json_atomic(path, data)
    return path


def test_a_summary_read_and_written_again_is_the_same_bytes(summary, tmp_path):
    first = _written(tmp_path, "a", summary.to_dict())
    loaded = ConfigSummary.load(first)
    assert loaded == summary
    second = _written(tmp_path, "b", loaded.to_dict())
    assert first.read_bytes() == second.read_bytes()
    assert isinstance(loaded.status, Status) and isinstance(loaded.launches[0], LaunchSection)
    assert [p.point for p in loaded.points] == ["default"] and isinstance(loaded.points[0], PointSummary)
    assert [e.launch for e in loaded.point("default").launches] == ["1", "2", "aa"]


def test_records_are_frozen_and_hand_out_copies(summary):
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.status = Status.FAILED  # type: ignore[misc]
    out = summary.points[0].to_dict()
    out["metrics"]["counts"]["ok"] = -1
    assert summary.points[0].metrics["counts"]["ok"] != -1


def test_another_format_is_refused_in_one_line_naming_the_file_and_both_versions(summary, tmp_path):
    path = _written(tmp_path, "old", {**summary.to_dict(), "format_version": 7})
    with pytest.raises(SummaryError) as info:
        ConfigSummary.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: summary format_version 7, this checkout reads "
                                                      f"{SUMMARY_FORMAT_VERSION}")
    assert "--forcerun summarize_config" in message
    # the analyze_sweep rule says that line alone (no traceback) and stops
    params = json.dumps({"baseline": "nospec", "descriptions": {}, "expects": {}})
    with pytest.raises(SystemExit) as stop:
        analyze_sweep_files([str(path)], params, str(tmp_path / "report.json"))
    assert stop.value.code == message and not (tmp_path / "report.json").exists()


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d["launches"][0].pop("host_wait_s"), "launches[0]: missing keys ['host_wait_s']"),
    (lambda d: d["points"][0].update(extra=1), "points[0]: unknown keys ['extra']"),
    (lambda d: d.update(status="great"), "status 'great': allowed ['ok', 'fallback', 'contaminated', 'failed']"),
])
def test_a_summary_of_another_shape_names_the_key(summary, tmp_path, change, said):
    data = summary.to_dict()
    change(data)
    path = _written(tmp_path, "bad", data)
    with pytest.raises(SummaryError) as info:
        ConfigSummary.load(path)
    assert str(info.value).startswith(f"{path}: ") and said in str(info.value)


def test_the_expect_label_reaches_the_rows_of_a_summary_with_points(summary, tmp_path):
    """analyze_sweep gets each configuration's expect label from the report params; a summary of points
    (format 6 and later) lost it on its way to the rows, and a known-failing case that did not fail went
    unnamed."""
    other = launches_summary("known-bad", 12.0, {"1": (3, 1.0), "2": (4, 1.0)}, seed=111)
    paths = [str(_written(tmp_path, s.config, s.to_dict())) for s in (summary, other)]
    params = json.dumps({"baseline": "nospec", "descriptions": {"known-bad": "kept as a result"},
                         "expects": {"nospec": "ok", "known-bad": "failure"}})
    report = analyze_sweep_files(paths, params, str(tmp_path / "report.json"))
    rows = {r["config"]: r for r in report["rows"]}
    assert rows["known-bad"]["expect"] == "failure" and rows["nospec"]["expect"] == "ok"
    assert rows["known-bad"]["description"] == "kept as a result"
    warning = "expected to fail (a known-failing case) but did not: re-check what changed"
    assert {"config": "known-bad", "point": "default", "message": warning} in report["warnings"]
