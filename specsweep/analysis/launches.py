"""One configuration's summary: every launch and every workload point, pooled per point.

The unit of measurement is (configuration, launch, point): one server job is
one launch and measures every point of the plan; the summary of a
configuration has one section per point, pooling that point's records over
all launches. Per point, each launch is first summarised on its own
(``summary.build_summary``, exactly the shape of a one-launch summary), then:

* one launch: that summary is the point's summary;
* several launches: the metrics are recomputed from the pooled records (each
  launch's own run, repeats numbered launch after launch so that the
  per-repeat spread spans launches), the status is the worst of the regular
  launches (``failed`` > ``contaminated`` > ``fallback`` > ``ok``, with the
  launch named), ``run_id`` is null (each launch's is in ``launches``), and
  ``launches`` lists each launch's median and repeat medians.

Output agreement is checked per launch and pooled against the baseline's
first launch at the same point (its records of that point; all its records
when the baseline has no such point), so that batching at another
concurrency never enters the comparison.

The A/A control (launch ``aa`` of the baseline) is pooled like any launch of
the baseline when it succeeded; when it failed, that is a warning on the
baseline (the launch effect stays unknown), not a failure of the baseline.

summary.json is a ``contracts.summary.ConfigSummary`` (its records, shape and
format history are there): the configuration's launches as they ran
(``LaunchSection``: outcome, times, the wait for the host apart from the
server's own time) and one ``PointSummary`` per point: a one-launch summary
(``analysis.summary``) plus ``point``, ``workload``, ``launches``
(``PointLaunch``: per launch its status, run, medians and repeats) and
``samples[...]["launch"]`` (the launch of every sample), its ``plan`` with that
point's workload. A launch of a side-by-side round
also keeps ``side_by_side`` (``side_by_side``: its partners up, windows, their CPU
share, its first window).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specsweep.analysis.blocks import BlockFit, contrast, control_level
from specsweep.analysis.compute import compute_metrics
from specsweep.analysis.metrics import PRIMARY_VERDICT
from specsweep.analysis.stats import Noise, Sample, compare, launch_estimate
from specsweep.analysis.summary import (
    BaselineRun,
    agreement_message,
    agreement_reference,
    agreement_section,
    build_summary,
    expected_failure,
)
from specsweep.contracts.layout import CONTROL
from specsweep.contracts.summary import ConfigSummary, LaunchSection, PointSummary
from specsweep.contracts.vocabulary import STATUS_ORDER, Expect, Reason, Stage, Status, Verdict
from specsweep.records import DEFAULT_POINT

_STATUS_RANK = {status: rank for rank, status in enumerate(STATUS_ORDER)}


@dataclass(frozen=True)
class LaunchFiles:
    """What one server job (one launch) left, read back."""

    launch: str
    record: dict | None  # launch.json
    outcome: dict
    warmup: list[dict]
    measured: list[dict]
    server_log: str
    run_id: str | None = None  # the one run id of the launch's files (workflow.jobs.one_run_id)
    nccl_logs: tuple[str, ...] = ()  # the launch's NCCL_DEBUG_FILEs, as text
    # The launch's profiling stages (analysis.profiling.profile_section; None: off or not reached).
    # They profile the plan's first point, so only that point's summary carries them.
    profile: dict | None = None


def _points(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(plan.get("points") or [{"name": DEFAULT_POINT, "workload": plan["workload"]}])


def baseline_at(baseline: BaselineRun | None, point: str) -> BaselineRun | None:
    """The baseline as one point's agreement check needs it: its plan with that point's workload and
    its records of that point (all of them when the baseline has no point of that name)."""
    if baseline is None or baseline.plan is None or baseline.records is None:
        return baseline
    own = {p["name"]: p for p in _points(baseline.plan)}
    if point not in own:
        return baseline
    return BaselineRun(baseline.name, dict(baseline.plan, workload=own[point]["workload"]),
                       _of_point(baseline.records, point))


def _point_outcome(outcome: Mapping[str, Any], point: str) -> dict[str, Any]:
    """The outcome of one point of a launch (a failed launch fails every point)."""
    entry = (outcome.get("points") or {}).get(point)
    launch = {"run_id": outcome.get("run_id"), "host": outcome.get("host")}  # shared by every point
    if entry is not None:
        return {**launch, "status": entry["status"], "stage": entry.get("stage"), "reason": entry.get("reason"),
                "detail": entry.get("detail"), "warmup": entry.get("warmup"),
                "log_tail": outcome.get("log_tail") if entry["status"] != Status.OK else None}
    if outcome.get("status") in (Status.OK, Status.CONTAMINATED) and not outcome.get("points"):
        return dict(outcome)  # format 1: one point, no points section
    return {**launch, "status": Status.FAILED, "stage": outcome.get("stage") or Stage.BENCHMARK,
            "reason": outcome.get("reason") or Reason.POINT_NOT_MEASURED,
            "detail": outcome.get("detail") or f"point {point} has no outcome in this launch",
            "log_tail": outcome.get("log_tail")}


def _of_point(records: Sequence[dict], point: str) -> list[dict]:
    return [r for r in records if r.get("point", DEFAULT_POINT) == point]


def _launch_entry(launch: LaunchFiles, summary: dict[str, Any], offset: int) -> dict[str, Any]:
    m = summary["metrics"]
    tok = m.get("output_tok_s") or {}
    decode = m.get("decode_tok_s") or {}
    repeats = m.get("repeats") or []
    return {
        "launch": launch.launch,
        "control": launch.launch == CONTROL,
        "status": summary["status"],
        "stage": summary.get("stage"),
        "reason": summary.get("reason"),
        "run_id": summary.get("run_id") or m.get("run_id"),
        "n_ok": m["counts"]["ok"],
        "tok_s_median": tok.get("p50"),
        "decode_tok_s_median": decode.get("p50"),
        "ttft_ms_median": (m.get("ttft_ms") or {}).get("p50"),
        "per_repeat_median": tok.get("per_repeat_median") or [],
        "repeats": [offset + r for r in repeats],
    }


def _renumbered(records: Sequence[dict], offset: int) -> list[dict]:
    """Copies of measured records with ``repeat`` moved past earlier launches' repeats."""
    return [dict(r, repeat=offset + r["repeat"]) if r.get("phase") == "measured" and r.get("repeat") is not None
            else r for r in records]


def _tag_sample_launches(metrics: dict[str, Any], repeat_launch: Mapping[int, str]) -> None:
    for sample in (metrics.get("samples") or {}).values():
        sample["launch"] = [repeat_launch.get(r) for r in sample["repeat"]]


def summarize_point(
    plan: Mapping[str, Any], point: Mapping[str, Any], launches: Sequence[LaunchFiles],
    evidence: Mapping[str, dict | None], baseline: BaselineRun | None = None,
    agreement_threshold: float | None = None, labels: Mapping[str, Any] | None = None,
) -> PointSummary:
    """The summary of one point over every launch (module docstring); ``baseline``, ``agreement_threshold``
    and ``labels`` as for ``summary.build_summary`` (the baseline of the whole configuration)."""
    name = point["name"]
    point_plan = dict(plan, workload=point["workload"])
    seed = int(point["workload"]["seed"])
    repeats_per_launch = int(point["workload"]["repeats"])
    reference = baseline_at(baseline, name)
    per_launch: list[tuple[LaunchFiles, dict[str, Any], int]] = []
    profiled = name == _points(plan)[0]["name"]
    for k, launch in enumerate(launches):
        summary = build_summary(point_plan, launch.record, _point_outcome(launch.outcome, name),
                                _of_point(launch.warmup, name), _of_point(launch.measured, name),
                                evidence.get(launch.launch), reference, agreement_threshold, labels,
                                profile=launch.profile if profiled else None)
        per_launch.append((launch, summary, k * repeats_per_launch))
    entries = [_launch_entry(launch, summary, offset) for launch, summary, offset in per_launch]

    regular = [(launch, s) for launch, s, _ in per_launch if launch.launch != CONTROL]
    pooled_from = [(launch, s, off) for launch, s, off in per_launch
                   if launch.launch != CONTROL or s["status"] == Status.OK]
    first = (regular or [(per_launch[0][0], per_launch[0][1])])[0][1]
    if len(pooled_from) == 1:
        out = dict(pooled_from[0][1])
    else:
        records = [r for launch, _, off in pooled_from for r in _renumbered(_of_point(launch.measured, name), off)]
        runs = [s["metrics"]["run_id"] for _, s, _ in pooled_from if s["metrics"]["run_id"] is not None]
        out = dict(first)
        out["metrics"] = compute_metrics(records, seed=seed, run_id=runs, baseline=agreement_reference(
            point_plan, pooled_from[0][0].record, reference), profile=first.get("profile"))
        out["agreement"] = agreement_section(out["metrics"], reference, agreement_threshold)
        out["run_id"] = None  # several runs: each launch's is in launches
        worst = max(regular, key=lambda item: _STATUS_RANK[item[1]["status"]], default=None)
        if worst is not None and worst[1]["status"] != Status.OK:
            bad = worst[1]
            out.update(status=bad["status"], stage=bad.get("stage"), reason=bad.get("reason"),
                       detail=f"launch {worst[0].launch}: {bad.get('detail')}", log_tail=bad.get("log_tail"),
                       expected_failure=bad.get("expected_failure"))
        elif out["agreement"]["flagged"]:  # every launch agreed alone, their pooled outputs do not
            out.update(status=Status.FAILED, stage=Stage.SUMMARIZE, reason=Reason.OUTPUTS_DIFFER,
                       detail=agreement_message(out["agreement"], out["metrics"]), log_tail=None,
                       expected_failure=expected_failure(labels, None) if (labels or {}).get("expect") == Expect.FAILURE
                       else None)
        else:
            out.update(status=Status.OK, stage=None, reason=None, detail=None, log_tail=None, expected_failure=None)
        out["warnings"] = [f"launch {launch.launch}: {w}" for launch, s, _ in per_launch for w in s["warnings"]]
    repeat_launch = {r: e["launch"] for e in entries for r in e["repeats"]}
    if len(pooled_from) == 1:
        out["metrics"] = dict(out["metrics"])
        out["metrics"]["samples"] = {k: dict(v) for k, v in (out["metrics"].get("samples") or {}).items()}
        repeat_launch = {r: pooled_from[0][0].launch for r in out["metrics"].get("repeats") or []}
    _tag_sample_launches(out["metrics"], repeat_launch)
    control_failed = [e for e in entries if e["control"] and e["status"] != Status.OK]
    if control_failed:
        e = control_failed[0]
        out["warnings"] = [*out.get("warnings", []), f"A/A control launch {e['launch']} did not end ok "
                           f"({e['status']}: {e['reason']}): the launch effect at this point is unknown"]
    out.update(point=name, workload=point["workload"], launches=entries)
    return PointSummary.from_dict(out, f"summary of {plan['name']}: point {name}")


def _launch_section(launch: LaunchFiles) -> LaunchSection:
    record = launch.record or {}
    started, ended = launch.outcome.get("started_at") or record.get("started_at"), launch.outcome.get("ended_at")
    wall = (ended - started) if started is not None and ended is not None else None
    wait = host_wait_s(record)
    side = side_by_side(launch)
    return LaunchSection(
        launch=launch.launch,
        control=launch.launch == CONTROL,
        run_id=launch.run_id or launch.outcome.get("run_id"),
        status=launch.outcome.get("status"),
        stage=launch.outcome.get("stage"),
        reason=launch.outcome.get("reason"),
        started_at=started,
        ended_at=ended,
        wall_s=wall,
        host_wait_s=wait,
        server_s=None if wall is None or wait is None else wall - wait,
        ready_s=record.get("ready_s"),
        side_by_side=side,
    )


#: What a launch section keeps of a side-by-side measurement (``serve.sidebyside.SideBySide.summary``).
SIDE_BY_SIDE_KEYS = ("partners_up", "windows", "partner_cpu_share", "partner_cpu_share_max",
                     "partner_cpu_share_limit")
#: Recorded by later launches only (one partner's share, ``serve.sidebyside``): carried where a launch has them, so
#: that the summaries of earlier launches keep their bytes.
SIDE_BY_SIDE_LATER_KEYS = ("partner_cpu_share_busiest", "partner_cpu_share_busiest_limit")


def side_by_side(launch: LaunchFiles) -> dict[str, Any] | None:
    """How a launch of a side-by-side round was measured (outcome.json's ``side_by_side``, else launch.json's
    keys of it): the partners whose servers were up during its windows, the windows, the partners' CPU share
    over all of them and in the worst one, the limit, and when its first window began (``first_window_ns``:
    launch.json's ``window_log``: ``time.perf_counter_ns``, on Linux ``clock_gettime(CLOCK_MONOTONIC)``
    (``time.get_clock_info("perf_counter")``), a clock the processes of one host share: the round's turns in
    the order they ran).
    None for a launch measured alone (sequential), whose section stays as it was."""
    record = launch.record or {}
    part = launch.outcome.get("side_by_side")
    if part is None and "windows" in record:
        part = record
    if part is None:
        return None
    windows = record.get("window_log") or []
    return {**{k: part.get(k) for k in SIDE_BY_SIDE_KEYS}, **{k: part[k] for k in SIDE_BY_SIDE_LATER_KEYS if k in part},
            "first_window_ns": windows[0].get("start_ns") if windows else None}


def host_wait_s(record: Mapping[str, Any]) -> float | None:
    """Seconds a launch waited for the host before its own work (launch.json: ``host_lock.waited_s``, the
    one-server-per-host lock, plus ``host_before_launch.waited_s``, the wait until no other specsweep server
    ran here); None when launch.json records neither (a job that failed before, or an older file)."""
    parts = [(record.get(key) or {}).get("waited_s") for key in ("host_lock", "host_before_launch")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def build_config_summary(
    plan: Mapping[str, Any], launches: Sequence[LaunchFiles], evidence_of: Callable[[LaunchFiles], dict | None],
    baseline: BaselineRun | None = None, agreement_threshold: float | None = None,
    labels: Mapping[str, Any] | None = None,
) -> ConfigSummary:
    """summary.json of one configuration from the files of its launches (in run order).

    ``evidence_of(launch)`` is what the engine's log check says about that
    launch's communication variant and failures (read on failure too).
    ``baseline``, ``agreement_threshold``, ``labels``: as for ``summary.build_summary``.
    """
    evidence = {launch.launch: evidence_of(launch) for launch in launches}
    points = [summarize_point(plan, point, launches, evidence, baseline, agreement_threshold, labels)
              for point in _points(plan)]
    status = max((p.status for p in points), key=_STATUS_RANK.__getitem__, default=Status.FAILED)
    return ConfigSummary(config=plan["name"], status=status, plan=copy.deepcopy(dict(plan)),
                         launches=tuple(_launch_section(launch) for launch in launches), points=tuple(points))


def point_sample(point_summary: Mapping[str, Any], metric: str = PRIMARY_VERDICT) -> Sample | None:
    """The per-request values of ``metric`` at one point with the launch and round of each (None: not kept)."""
    sample = ((point_summary.get("metrics") or {}).get("samples") or {}).get(metric)
    if not sample or not sample.get("values"):
        return None
    return Sample(sample["values"], sample.get("launch"), sample.get("repeat"))


def aa_control(point_summary: Mapping[str, Any], noise: Noise | None,
               metric: str = PRIMARY_VERDICT, fit: BlockFit | None = None) -> dict[str, Any] | None:
    """The A/A result of the baseline at one point: its control launch against its first launch.

    ``launch_medians``: each ok launch's median of ``metric`` (the primary
    verdict's, decode tok/s); ``drift`` = control / first launch - 1 (the
    start and the end of the sweep); ``comparison``: the control against the
    first launch by ``stats.compare`` under ``noise`` (the point's pooled
    launch variance, which these launches are part of): it must not be
    called. Under a blocked ``fit`` (``blocks.fit_point`` of the point, the
    control a level of its own) the comparison is ``blocks.contrast`` of the
    control's level against its configuration's launches, round effects
    removed. None without a control that ended ok or without samples.
    """
    entries = [e for e in point_summary.get("launches") or [] if e["status"] == Status.OK]
    control = next((e for e in entries if e["control"]), None)
    first = next((e for e in entries if not e["control"]), None)
    sample = point_sample(point_summary, metric)
    if control is None or first is None or sample is None:
        return None
    c_side, f_side = sample.select(control["launch"]), sample.select(first["launch"])
    medians = {e["launch"]: launch_estimate(sample.select(e["launch"]).values) for e in entries}
    if medians[control["launch"]] is None or medians[first["launch"]] is None:
        return None
    out = {
        "metric": metric,
        "first": first["launch"],
        "control": control["launch"],
        "launch_medians": medians,
        "drift": medians[control["launch"]] / medians[first["launch"]] - 1,
    }
    name = point_summary.get("config")
    if fit is not None and fit.blocked and control_level(name) in fit.levels and name in fit.levels:
        out["comparison"] = contrast(fit, control_level(name), name)
    else:
        out["comparison"] = (compare(c_side, f_side, noise) if noise is not None
                             else {"verdict": Verdict.INSUFFICIENT})
    return out
