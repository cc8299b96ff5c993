"""Screening a race's grid by the cost model: configurations predicted too slow are set aside before any launch.

Configurations that differ only in their communication setting (``screen.settings``: the plan settings that
make it, named as grid axes name them, e.g. ``server_args.all-reduce-backend`` or ``env.NCCL_ALGO``) share every
part of a step but the all-reduces' latency. The cost model (``analysis.costmodel``) predicts their step::

    predicted_ms    = fixed_ms + allreduces x latency_us / 1e3
    predicted_tok_s = tokens / predicted_ms x 1e3

* **groups** (``plan.screen.groups``): configurations whose plans are equal once the settings are removed. A group's
  ``fixed_ms``, ``allreduces`` and ``tokens`` (the accept length; 1 without speculation) come from a member
  already measured: its report row's cost model (``analysis.answer.row_parts``; report.json's
  ``rows[].model.parts``). A group with no measured member is not predicted, and none of it is set aside.
* **latency**: the all-reduce micro-benchmark (``serve/allreduce_bench.py``) run once per distinct setting
  (``plan.screen.bench_settings``: one run per group and setting, at the group's message size), its median in
  microseconds (``latencies``, keyed by configuration).
* **the model's error on this host** (``model_error``): the largest ``|residual_share|``, (measured - predicted)
  / measured, over every configuration measured so far whose cost model could be computed (report.json's
  ``rows[].model.residual``), at each configuration's first point. Never a constant: with no such row, or an
  error beyond ``screen.max_error``, the model is not validated and nothing is set aside (``validated`` false,
  ``why`` says which).
* **set aside** (``screen``): a configuration whose predicted decode rate is below the predicted best's by more
  than the error allows, ``best / it > (1 + m) / (1 - m)`` (``m`` the error): even if every prediction were
  off by ``m`` in the direction that favours it, it would still be slower than the best.

The record (report.json's ``race.screen``, ``SCREEN_FORMAT``) keeps every prediction, the margin and what was set
aside; ``analysis.race`` gives each set-aside configuration the history ``screened out``.

**The check run** (``screen.check``): every set-aside configuration is launched once anyway, in round 1, outside the
race, and ``check_record`` (report.json's ``race.screen_check``) sets each prediction against what was measured:

    off_by       = (measured_tok_s - predicted_tok_s) / measured_tok_s      (the residual's sign: + = faster)
    slower_by    = winner's decode_rate / its decode_rate - 1
    really_slower: slower_by > 0 (one launch: a point estimate; the race's verdict of the winner against it,
                   ``verdict``, where the model can give one)

``measured_tok_s`` is measured the way the model predicts (tokens per step / the measured step: the row's
``model_measured_tok_s``, ``analysis.answer.annotate``); ``decode_rate`` is the verdicts' statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.contracts.vocabulary import Status

# Format history of the screen record (report.json's race.screen):
#   1  enabled, settings, validated, why, margin, max_error, threshold, error_from (config, residual_share),
#      best, predictions (config, group, measured_from, latency_us, predicted_ms, predicted_tok_s, slower,
#      set_aside, why), set_aside, benches.
SCREEN_FORMAT = 1

# Format history of the screen's check (report.json's race.screen_check, a list):
#   1  config, predicted_tok_s, measured_tok_s, off_by, launches, decode_rate, winner, winner_decode_rate,
#      slower_by, really_slower, verdict, why (null, or why a figure is missing).
CHECK_FORMAT = 1

SCREEN_METHOD = (
    "configurations that differ only in the communication setting share the cost model's fixed part, all-reduces "
    "and tokens per step, taken from a measured member of their group; each one's step is predicted at the "
    "all-reduce latency its own setting measured in the micro-benchmark (predicted_ms = fixed_ms + all-reduces x "
    "latency); m, the model's error on this host, is the largest |measured - predicted| / measured over every "
    "configuration measured so far; a configuration is set aside when the predicted best's decode rate over its "
    "own exceeds (1 + m) / (1 - m); with no measured configuration, or m beyond screen.max_error, nothing is set "
    "aside"
)


def _first_points(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r.get("point_index", 0)):
        out.setdefault(r["config"], r)
    return out


def _parts(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A report.json row's cost-model parts (``model_record``), None where the model could not be computed."""
    model = row.get("model") or {}
    parts = model.get("parts")
    if not parts or row.get("status") != Status.OK:
        return None
    return parts if isinstance(parts, Mapping) else vars(parts)


def model_error(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The cost model's error on this host from the configurations measured so far (report.json's rows):
    ``{"margin": max |residual_share| or None, "error_from": [{"config", "residual_share"}, ...]}``."""
    shown = []
    for name, row in sorted(_first_points(rows).items()):
        share = ((row.get("model") or {}).get("residual") or {}).get("residual_share")
        if _parts(row) is not None and share is not None:
            shown.append({"config": name, "residual_share": share})
    return {"margin": max((abs(s["residual_share"]) for s in shown), default=None), "error_from": shown}


def threshold(margin: float) -> float:
    """How much slower than the predicted best a prediction must be to be set aside: (1 + m) / (1 - m) - 1."""
    return (1 + margin) / (1 - margin) - 1


def screen(groups: Mapping[str, Sequence[str]], settings: Sequence[str], rows: Sequence[Mapping[str, Any]],
           latencies: Mapping[str, float | None], max_error: float, benches: int | None = None,
           sources: Mapping[str, str] | None = None, keep: Sequence[str] = ()) -> dict[str, Any]:
    """The screen of a grid (module docstring): ``groups`` its configurations that differ only in the
    communication ``settings`` (``plan.screen.groups``), ``rows`` the report rows measured so far (report.json's,
    or ``analysis.answer.annotate``'s), ``latencies`` each configuration's micro-benchmark median (us; None or
    missing: not measured), ``max_error`` the largest error the model may show and still screen, ``benches``
    how many micro-benchmark runs measured the latencies; ``sources``: each group's measured configuration,
    ``{group: config of rows}``, found by plan (its plan the group's but for the settings: ``plan.screen.group_key``,
    whatever its name; a summary of a member's name but of another plan is none); None: a member of the group
    measured under its own name; ``keep``: never set aside (the baseline, which every verdict of the report is
    against), though predicted."""
    error = model_error(rows)
    margin = error["margin"]
    measured = _first_points(rows)
    out: dict[str, Any] = {"format_version": SCREEN_FORMAT, "enabled": True, "settings": list(settings),
                           "validated": False, "why": None, "margin": margin, "max_error": max_error,
                           "threshold": None, "error_from": error["error_from"], "best": None, "predictions": [],
                           "set_aside": [], "benches": benches, "method": SCREEN_METHOD}
    for group, members in groups.items():
        named = members if sources is None else [sources.get(group)]
        source = next((m for m in named if m in measured and _parts(measured[m]) is not None), None)
        for name in members:
            entry = {"config": name, "group": group, "measured_from": source, "latency_us": latencies.get(name),
                     "predicted_ms": None, "predicted_tok_s": None, "slower_by": None, "set_aside": False, "why": None}
            parts = _parts(measured[source]) if source else None
            if parts is None:
                entry["why"] = "no configuration of its group (the same but for the communication setting) measured"
            elif parts["allreduces"] and entry["latency_us"] is None:
                entry["why"] = "no micro-benchmark of its setting"
            else:
                step = parts["fixed_ms"] + parts["allreduces"] * (entry["latency_us"] or 0.0) / 1e3
                entry.update(predicted_ms=step, predicted_tok_s=parts["tokens"] / step * 1e3)
            out["predictions"].append(entry)
    predicted = [p for p in out["predictions"] if p["predicted_tok_s"] is not None]
    if predicted:
        best = max(predicted, key=lambda p: (p["predicted_tok_s"], p["config"] == p["measured_from"]))
        out["best"] = best["config"]
        for p in predicted:
            p["slower_by"] = best["predicted_tok_s"] / p["predicted_tok_s"] - 1
    if margin is None:
        out["why"] = "no configuration measured yet with its cost model (profile.enabled): the model's error on " \
                     "this host is unknown, so nothing is set aside"
    elif margin >= max_error:
        out["why"] = (f"the cost model's error on this host, {margin * 100:.1f} % (the largest |residual| of "
                      f"{len(error['error_from'])} measured configurations), is beyond screen.max_error "
                      f"({max_error * 100:g} %): nothing is set aside")
    elif not predicted:
        out["why"] = "no configuration could be predicted: nothing is set aside"
    else:
        out["validated"] = True
        out["threshold"] = threshold(margin)
        for p in predicted:
            if p["slower_by"] > out["threshold"] and p["config"] in keep:
                p["why"] = (f"predicted {p['slower_by'] * 100:.1f} % slower than {out['best']}, but kept: the baseline "
                            "every verdict is against")
            elif p["slower_by"] > out["threshold"]:
                p["set_aside"] = True
                p["why"] = (f"predicted {p['slower_by'] * 100:.1f} % slower than {out['best']}, beyond the model's "
                            f"error ({margin * 100:.1f} % each way: {out['threshold'] * 100:.1f} %)")
        out["set_aside"] = [p["config"] for p in predicted if p["set_aside"]]
    return out


def check_record(screen: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]], winner: str | None,
                 against: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The screen's check run (module docstring): each set-aside configuration's prediction against its launch
    at the first point (``rows``: report.json's), and whether it really was slower than ``winner``, the race's
    (``against``: the race's verdicts of the winner against each configuration). One entry per set-aside
    configuration; one never launched (``screen.check`` off) says so. Empty without a screen or a set-aside one."""
    at = _first_points(rows)
    won = at.get(winner) if winner else None
    best_rate = won.get(BASELINE_TOK_S) if won else None
    verdicts = {a["config"]: a for a in against}
    out = []
    for p in (screen or {}).get("predictions") or []:
        if not p.get("set_aside"):
            continue
        row = at.get(p["config"])
        entry: dict[str, Any] = {"config": p["config"], "predicted_tok_s": p["predicted_tok_s"],
                                 "measured_tok_s": None, "off_by": None, "launches": 0, "decode_rate": None,
                                 "winner": winner, "winner_decode_rate": best_rate, "slower_by": None,
                                 "really_slower": None, "verdict": (verdicts.get(p["config"]) or {}).get("verdict"),
                                 "why": None}
        if row is None:
            entry["why"] = "never launched (screen.check: false)"
            out.append(entry)
            continue
        measured, rate = row.get("model_measured_tok_s"), row.get(BASELINE_TOK_S)
        entry.update(launches=len(row.get("launch_entries") or []), measured_tok_s=measured, decode_rate=rate)
        if measured and p["predicted_tok_s"] is not None:
            entry["off_by"] = (measured - p["predicted_tok_s"]) / measured
        if rate and best_rate:
            entry["slower_by"] = best_rate / rate - 1
            entry["really_slower"] = entry["slower_by"] > 0
        missing = [what for what, value in (("its cost model", measured), ("its decode rate", rate),
                                            ("the winner's decode rate", best_rate)) if not value]
        if missing:
            entry["why"] = (f"status {row.get('status')}: " if row.get("status") != Status.OK else "") + \
                "not measured: " + ", ".join(missing)
        out.append(entry)
    return out
