"""analyze_sweep: the answer of a whole sweep, computed once, as ``results/report.json``.

Every view of the sweep (report.md, summary.csv, the plots, the best-configuration
files, the HTML report's captions, the closing summary on the console) renders this
file; none of them computes a verdict or reads another view. ``docs/report-json.md``
describes it field by field for other tools.

``analyze_sweep`` reads the configurations' summary files, judges every row
(``analysis.rows``: verdicts, break-even), adds the answer (``analysis.answer``:
own baselines, cost model, budget, what to deploy), the controls and launches
(``analysis.controls``) and the curves and grid winners (``analysis.grids``), and
returns one JSON-ready dict; ``write_report``/``load_report`` keep its format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.analysis.answer import (
    annotate,
    budget_points,
    budget_records,
    deploy,
    model_record,
    own_baselines,
    verify_sizes,
)
from specsweep.analysis.blocks import BLOCKED_METHOD, TREND_METHOD, rounds_of_plans
from specsweep.analysis.controls import (
    aa_record,
    external_record,
    launches_record,
    pairwise_records,
    positive_record,
    rule_records,
)
from specsweep.analysis.curves import CROSSING_METHOD
from specsweep.analysis.grids import best_of_grids, break_even_groups, curve_record, winner_record
from specsweep.analysis.metrics import BASELINE_TOK_S, PRIMARY_VERDICT
from specsweep.analysis.race import race_record
from specsweep.analysis.rows import BREAK_EVEN_FORMULA, compare_primary, compare_rows, config_rows, explode_points
from specsweep.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    CI_LEVEL,
    CI_METHOD,
    PERCENTILE_METHOD_NAME,
    POWER,
    POWER_METHOD,
    VERDICT_LEVEL,
)
from specsweep.contracts.summary import ConfigSummary
from specsweep.contracts.vocabulary import Expect, Status
from specsweep.files import write_text_atomic

# Format history of results/report.json (REPORT_FORMAT_VERSION; docs/report-json.md, field by field):
#   1  format_version, baseline, method, smallest_effect, verdicts (the rule, the model and the trend
#      checks per point), controls (aa, positive), external, launches (entries as run with their
#      planned round and place, order check, totals), deploy, rows, curves, budget, grids, pairwise,
#      failures, warnings, burn_in (round 1's record, or null), design (the measurement design and
#      what ended the rounds, or null). Report.md, summary.csv, the plots and the best-configuration
#      files of this format are byte-identical to those the report rendered from the summaries
#      before report.json existed.
#   2  race: a race's answer (``analysis.race.race_record``: the winner, its verdicts against every other
#      configuration, each one's history, the rounds' standings, the launches spent against the full
#      design), or null when the rounds did not race (rounds.mode: sweep).
#   3  fields that came beside 2 without a version of their own: launches.entries gain host_wait_s (the
#      job's waits for the host) and server_s (wall_s less host_wait_s); launches.server_s is the sum of the
#      entries' server_s (in 1 and 2: of their wall_s) and null when none is known; + launches.host_wait_s,
#      launches.median_server_s; rows gain simulated_accept (VAR=value of the setting that fixed the accept
#      length, or null); launches.side_by_side (``analysis.controls.side_by_side_record``: what side-by-side
#      measurement did, or null), launches.entries[].side_by_side (a launch of a side-by-side round: its
#      partners up, windows, the partners' CPU share, its first window), launches.order.by (what the order
#      check compared: each launch's start, or for a side-by-side round's launches, which start together,
#      their first window); race.screen: the cost model's screen before the race (``analysis.screen``: every
#      prediction, the margin, the set-aside configurations, or why nothing was set aside), race.history's
#      ``screened out``, race.launches.screened_out; null without screening; race.screen_check (the screen's
#      check run, ``screen.check``: each set-aside configuration's prediction against its one launch,
#      ``analysis.screen.check_record``), race.launches.checked and check_spent (its launches, not the race's).
#      Every other field is as in 2.
#      (later, within 3, added only: launches.side_by_side.busiest_limit and the entries' side_by_side
#      partner_cpu_share_busiest and partner_cpu_share_busiest_limit: one partner's CPU share, which marks a launch
#      contaminated on its own; partner_cpu_share_limit, all partners', now scales with the host's free cores.)
#   4  race.launches.launches_needed (and so full_design) at the degrees of freedom of the full design itself,
#      (C - 1)(n - 1) for C configurations in n rounds (``analysis.race.full_design_df``); in 3 at this run's,
#      which are fewer and made the full design look larger than it is. rounds.first_round_baseline in
#      design.rounds where set (the baseline's launches 1b, 1c, ... in round 1: launches.entries and
#      race.launches.per_configuration count them). Every other field is as in 3.
REPORT_FORMAT_VERSION = 4

#: Row keys that stay in analysis: the summary it came from, its samples (objects), the plan and the
#: links to other rows (report.json names them as ``[config, point]``), and what has a section of its own.
_NOT_IN_ROW = ("summary", "verdict_samples", "samples", "sample_launches", "launch_entries", "plan", "server",
               "base_row", "own_row", "noise", "blocks", "trend", "cold_start", "aa", "comparison", "model",
               "warnings", "log_tail", "detail", "expected_failure")


def _key(row: Mapping[str, Any] | None) -> list[str] | None:
    return None if row is None else [row["config"], row["point"]]


def row_record(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One row as report.json holds it: every value of summary.csv and what the views draw from, with
    the rows it was judged against named as ``[config, point]`` (``base``, ``own``)."""
    out = {k: v for k, v in row.items() if k not in _NOT_IN_ROW}
    out.update(base=_key(row.get("base_row")), own=_key(row.get("own_row")), model=model_record(row, rows),
               has_samples=bool(row["samples"]), simulated_accept=simulated_accept(row.get("plan") or {}))
    return out


def simulated_accept(plan: Mapping[str, Any]) -> str | None:
    """``VAR=value`` when the plan's engine simulated the accept length (its facts' ``simulated_accept_length``,
    set through ``simulated_accept_length_setting``, e.g. ``env.SGLANG_SIMULATE_ACC_LEN``), else None."""
    facts = plan.get("facts") or {}
    if facts.get("simulated_accept_length") is None:
        return None
    section, _, key = (facts.get("simulated_accept_length_setting") or "").partition(".")
    return f"{key}={(plan.get(section) or {}).get(key, facts['simulated_accept_length'])}"


def _expected_failure_warnings(rows: Sequence[dict[str, Any]]) -> None:
    for r in rows:
        if r["expect"] == Expect.FAILURE and r["status"] != Status.FAILED:
            r["warnings"] = [*r["warnings"],
                             "expected to fail (a known-failing case) but did not: re-check what changed"]


def method_record() -> dict[str, Any]:
    """How the verdicts, intervals and the crossing were computed (the Methods of report.md)."""
    return {"metric": PRIMARY_VERDICT, "baseline_tok_s": BASELINE_TOK_S, "verdict": BLOCKED_METHOD,
            "trend": TREND_METHOD, "verdict_level": VERDICT_LEVEL, "power": POWER_METHOD, "power_level": POWER,
            "percentiles": PERCENTILE_METHOD_NAME,
            "end_to_end_ci": {"method": CI_METHOD, "level": CI_LEVEL, "resamples": BOOTSTRAP_RESAMPLES},
            "crossing": CROSSING_METHOD, "break_even": BREAK_EVEN_FORMULA}


def design_record(design: Mapping[str, Any] | None, rounds: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Which measurement design ran and why (``workflow.round_inputs.measurement_design``: ``design``, ``why``,
    ``rounds`` settings), how many rounds ran (``rounds_run``) and what ended them (``ended_by``,
    ``ended_why``: the last round's judgement). None without a design (a report from before rounds)."""
    if not design:
        return None
    judgements = (rounds or {}).get("judgements") or []
    last = judgements[-1] if judgements else None
    return {**design, "rounds_run": len(judgements) if last is not None else None,
            "ended_by": None if last is None else last.get("ended_by"),
            "ended_why": None if last is None else last.get("why")}


def burn_in_record(rounds: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The burn-in before round 1 (round 1's judgement holds its record), None when none was recorded."""
    judgements = (rounds or {}).get("judgements") or []
    return (judgements[0].get("burn_in") or None) if judgements else None


def analyze_sweep(summaries: Sequence[ConfigSummary], baseline: str | None, sweep: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """report.json of ``summaries`` (the configurations' summary.json, ``ConfigSummary.load``); ``sweep``
    holds each configuration's description and expect label (``descriptions``, ``expects``), the grids, the
    planned launch order, whether the A/A control was planned, the positive control, the smallest effect to
    resolve, the named own baselines, the measurement design (``workflow.inputs.report_params``), every
    round's plan and judgement (``rounds``) and a race's screen (``screen``: ``analysis.screen.screen``'s
    record)."""
    sweep = sweep or {}
    grids = sweep.get("grids") or {}
    effect = sweep.get("smallest_effect")
    round_plans = (sweep.get("rounds") or {}).get("plans") or []
    points = explode_points(summaries, sweep.get("descriptions"), sweep.get("expects"))
    rows, base = config_rows(points, baseline, effect, rounds_of_plans(round_plans))
    annotate(rows, base, own_baselines({r["config"]: r["plan"] for r in rows}, sweep.get("own_baselines")),
             compare_primary)
    _expected_failure_warnings(rows)
    sizes = verify_sizes(rows)
    race = race_record(rows, (sweep.get("rounds") or {}).get("judgements") or [], effect,
                       bool(sweep.get("aa_control", True)), sweep.get("screen"))
    return {
        "format_version": REPORT_FORMAT_VERSION,
        "baseline": {"name": baseline, "row": _key(base)},
        "method": method_record(),
        "smallest_effect": effect,
        "verdicts": rule_records(rows, baseline, effect),
        "controls": {"aa": aa_record(rows, baseline, bool(sweep.get("aa_control", True))),
                     "positive": positive_record(rows, sweep.get("positive_control"), compare_rows)},
        "external": external_record(rows),
        "launches": launches_record(summaries, sweep.get("launch_order"), round_plans),
        "deploy": deploy(rows, base, baseline, compare_primary),
        "rows": [row_record(r, rows) for r in rows],
        "curves": [curve_record(g) for g in break_even_groups(rows, grids)],
        "budget": budget_records(budget_points(rows)),
        "grids": [winner_record(w, sizes) for w in best_of_grids(rows, grids, compare_rows,
                                                                 race["winner"] if race else None)],
        "pairwise": pairwise_records(rows, baseline, compare_rows),
        "failures": [{"config": r["config"], "point": r["point"], "status": r["status"], "stage": r["stage"],
                      "reason": r["reason"], "detail": r["detail"], "log_tail": r["log_tail"],
                      "expect": r["expect"], "expected_failure": r.get("expected_failure")}
                     for r in rows if r["status"] != Status.OK],
        "warnings": [{"config": r["config"], "point": r["point"], "message": m} for r in rows for m in r["warnings"]],
        "burn_in": burn_in_record(sweep.get("rounds")),
        "design": design_record(sweep.get("design"), sweep.get("rounds")),
        "race": race,
    }


def dumps_report(report: Mapping[str, Any]) -> str:
    """report.json's text: indented, keys in the order written (the order of a grid's axes and of the
    rows is meaningful), NaN and infinities refused (a value that cannot be computed is null)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def write_report(path: Path | str, report: Mapping[str, Any]) -> None:
    write_text_atomic(path, dumps_report(report))


def load_report(path: Path | str) -> dict[str, Any]:
    """report.json, refused with the file named when its format is not one this version reads."""
    data = json.loads(Path(path).read_text())
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != REPORT_FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {version!r}, this specsweep reads {REPORT_FORMAT_VERSION}; "
                         "rerun the analyze_sweep rule")
    return data
