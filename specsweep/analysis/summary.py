"""The summary of one launch at one workload point: status, metrics, warmup, provenance.

``analysis.launches`` pools these per point over a configuration's launches
into summary.json (``SUMMARY_FORMAT_VERSION`` 2). Shape of one (as
summary.json was in format 1)::

    {"format_version": 1, "config": name, "status": "ok"|"failed"|"fallback",
     "stage": str|null, "reason": str|null, "detail": str|null, "log_tail": str|null,
     "engine": str, "image": str|null, "plan": {...},
     "metrics": {...specsweep.analysis.metrics.compute_metrics...},
     "warmup": {"requests", "windows_tok_s", "converged", "tolerance", "window",
                "min_windows", "max_requests", "criterion", "failed"},
     "provenance": {... launch["provenance"], "launch": {rest of launch.json}},
     "variant": evidence | null, "speculative_algorithm": str|null, "warnings": [str]}

Status rules, in order: the server job failed (``outcome.status !=
"ok"``) -> ``failed`` with the job's stage/reason/detail/log_tail; no
successful measured request, or a required metric absent -> ``failed`` with
stage ``summarize`` and reason ``no_successful_requests`` /
``missing_metric`` (a missing metric is an error, not a zero: under
speculation ``accept_length`` and ``cycle_time_ms`` are required (``metrics.METRICS``), and every
ok request must carry ``completion_tokens``); the engine's log shows the
requested variant fell back (``evidence["fell_back"]`` non-empty) ->
``fallback``; otherwise ``ok``.

Accept length and every other metric are computed from this run's measured
records only (``analysis.metrics.select_measured``), never from server-lifetime
counters such as ``/server_info`` ``avg_spec_accept_length``.
"""

from __future__ import annotations

from typing import Any

from specsweep.analysis.metrics import compute_metrics, required_metrics, warmup_report
from specsweep.analysis.stats import WARMUP_CRITERION
from specsweep.records import validate_record

# Format history of results/<config>/summary.json:
#   1  the shape in the module docstring (one launch, one point).
#   2  points x launches (analysis.launches): {"format_version", "config",
#      "status", "plan", "launches": [...], "points": [<the shape of 1 without
#      format_version, plus point, workload, launches>]}.
SUMMARY_FORMAT_VERSION = 2

_SPEC_KEYS = ("speculative-algorithm", "speculative_algorithm")


def speculative_algorithm(server_args: dict[str, Any]) -> str | None:
    """The plan's speculative algorithm, or ``None`` when speculation is off."""
    for key in _SPEC_KEYS:
        value = server_args.get(key)
        if value is None or value is False:
            continue
        text = str(value).strip()
        if text and text.upper() != "NONE":
            return text
    return None


def _warmup_section(plan: dict[str, Any], records: list[dict[str, Any]], run_id: str | None) -> dict[str, Any]:
    if run_id is not None:
        records = [r for r in records if r.get("run_id") == run_id]
    return warmup_report(records, plan["workload"]["warmup"])


def _provenance(launch: dict[str, Any] | None) -> dict[str, Any]:
    if launch is None:
        return {"absent": "no launch record"}
    prov = dict(launch.get("provenance") or {})
    if not launch.get("provenance"):
        prov["absent"] = "launch record has no provenance"
    prov["launch"] = {k: v for k, v in launch.items() if k != "provenance"}
    return prov


def _missing_metrics(metrics: dict[str, Any], spec: str | None) -> list[str]:
    missing = [f"{name} ({metrics['absent'].get(name, 'absent')})" for name in required_metrics(bool(spec))
               if name not in metrics]
    n = metrics["counts"].get("ok_without_completion_tokens", 0)
    if n:
        missing.insert(0, f"completion_tokens ({n} ok requests without it in the final meta_info/usage)")
    return missing


def _warnings(
    metrics: dict[str, Any], warmup: dict[str, Any], measured: list[dict[str, Any]], run_id: str | None
) -> list[str]:
    out: list[str] = []
    c = metrics["counts"]
    if c["error"] or c["incomplete"]:
        out.append(f"{c['error']} error and {c['incomplete']} incomplete of {c['measured']} measured requests")
    if c["other_run_excluded"]:
        out.append(f"{c['other_run_excluded']} measured records of another run excluded")
    if warmup["requests"] and not warmup["converged"]:
        out.append(f"warmup did not converge within {warmup['max_requests']} requests ({WARMUP_CRITERION})")
    short = [
        r for r in measured
        if r.get("run_id") == run_id and r.get("phase") == "measured" and r["status"] == "ok"
        and r.get("completion_tokens") is not None and r["completion_tokens"] != r["output_len"]
    ]
    if short:
        out.append(
            f"{len(short)} ok requests returned completion_tokens != output_len "
            f"(e.g. {short[0]['completion_tokens']} vs {short[0]['output_len']}) despite ignore_eos"
        )
    return out


def build_summary(
    plan: dict,
    launch: dict | None,
    outcome: dict,
    warmup: list[dict],
    measured: list[dict],
    evidence: dict | None,
) -> dict:
    """The summary.json dict of one configuration (shape and status rules: module docstring)."""
    seed = int(plan["workload"]["seed"])
    metrics = compute_metrics(measured, seed=seed)
    run_id = metrics["run_id"]
    if run_id is None and warmup:
        run_id = warmup[-1].get("run_id")
    warm = _warmup_section(plan, warmup, run_id)
    spec = speculative_algorithm(plan.get("server_args") or {})
    summary: dict[str, Any] = {
        "format_version": SUMMARY_FORMAT_VERSION,
        "config": plan["name"],
        "status": "ok",
        "stage": None,
        "reason": None,
        "detail": None,
        "log_tail": None,
        "engine": plan.get("engine"),
        "image": plan.get("image"),
        "plan": plan,
        "metrics": metrics,
        "warmup": warm,
        "provenance": _provenance(launch),
        "variant": evidence,
        "speculative_algorithm": spec,
        "warnings": _warnings(metrics, warm, measured, run_id),
    }
    fell_back = list((evidence or {}).get("fell_back") or [])
    invalid = [(r.get("request_id"), p) for r in [*warmup, *measured] for p in validate_record(r)]

    if outcome.get("status") != "ok":
        summary.update(
            status="failed",
            stage=outcome.get("stage"),
            reason=outcome.get("reason"),
            detail=outcome.get("detail"),
            log_tail=outcome.get("log_tail"),
        )
    elif invalid:
        summary.update(status="failed", stage="summarize", reason="invalid_records",
                       detail=f"{len(invalid)} schema problems, first: {invalid[:3]}")
    elif metrics["counts"]["ok"] == 0:
        summary.update(status="failed", stage="summarize", reason="no_successful_requests",
                       detail=f"0 of {metrics['counts']['measured']} measured requests succeeded; "
                              f"errors: {metrics['errors']}")
    elif missing := _missing_metrics(metrics, spec):
        detail = f"required metric absent: {'; '.join(missing)}"
        if spec:
            detail += f" (speculative algorithm {spec})"
        if fell_back:
            detail += f"; the variant also fell back: {fell_back}"
        summary.update(status="failed", stage="summarize", reason="missing_metric", detail=detail)
    elif fell_back:
        summary.update(
            status="fallback",
            stage="launch",
            reason="variant_fallback",
            detail="; ".join(
                f"{f.get('variant', f)}: {f.get('line', '')}" if isinstance(f, dict) else str(f) for f in fell_back
            ),
        )
    return summary
