"""The summary of one launch at one workload point: status, metrics, warmup, provenance.

``analysis.launches`` pools these per point over a configuration's launches
into summary.json (``contracts.summary``: its records and format history), each
point a ``contracts.summary.PointSummary``. This one-launch summary is that
record's mapping without ``point``, ``workload`` and ``launches``, which the
pooling adds. Shape of one::

    {"config": name, "run_id": str|null,
     "status": "ok"|"failed"|"fallback"|"contaminated",
     "stage": str|null, "reason": str|null, "detail": str|null, "log_tail": str|null,
     "engine": str, "image": str|null, "plan": {...},
     "metrics": {...specsweep.analysis.compute.compute_metrics...},
     "warmup": {"requests", "windows_tok_s", "converged", "tolerance", "window",
                "min_windows", "max_requests", "criterion", "failed"},
     "provenance": {... launch["provenance"], "launch": {rest of launch.json}},
     "variant": evidence | null, "speculative_algorithm": str|null, "warnings": [str],
     "agreement": {"baseline": str|null, "threshold": float, "match_share": float|null,
                   "flagged": bool|null, "reason": str|null, "definition": str},
     "host": {...outcome["host"]: load and other servers seen while the server ran (serve.guard)} | null,
     "profile": {...analysis.profiling.profile_section...} | null,
     "expected_failure": null | {"expected": bool, "wanted": [str], "matched": [{"signature", "line"}],
                                 "seen": [{"signature", "line"}]}}

Status rules, in order: the server job failed (``outcome.status`` neither
``ok`` nor ``contaminated``) -> ``failed`` with the job's
stage/reason/detail/log_tail; another specsweep server ran beside this one
(``outcome.status == "contaminated"``) -> ``contaminated`` (its numbers are
kept for inspection and never compared); no
successful measured request, or a required metric absent -> ``failed`` with
stage ``summarize`` and reason ``no_successful_requests`` /
``missing_metric`` (a missing metric is an error, not a zero: under
speculation ``accept_length`` and ``cycle_time_ms`` are required (``metrics.METRICS``), and every
ok request must carry ``completion_tokens``); the engine's log shows the
requested variant fell back (``evidence["fell_back"]`` non-empty) ->
``fallback``; outputs that differ from the baseline's (``agreement``
below) -> ``failed`` with stage ``summarize`` and reason ``outputs_differ``;
otherwise ``ok``. A requested variant that another requested
variant shadows (``evidence["shadowed"]``: SGLang gives their shared
all-reduce to the other one) is named in ``warnings``: the number is the
other variant's. The profiler trace is evidence too: a variant
whose implementation the verify forwards' kernels do not show (``profile.variant.fell_back``,
``analysis.profiling.trace_variant_evidence``) joins the log's ``fell_back`` list,
marked ``"source": "trace"``.

Output agreement (``AGREEMENT_DEFINITION``): under greedy decoding, speculation
and a different all-reduce must not change the output, so each measured
request is paired with the baseline's request of the same ``prompt_key``
(same endpoint, prompt and output_len: same dataset, seed and lengths) and
their output token ids compared (``formulas.output_match_share``,
``metrics.output_common_prefix_tokens``). A configuration whose match share
is below the threshold (``agreement_threshold`` in config.yaml) is flagged
"outputs differ from the baseline": a numerically broken kernel is never
reported ok. Not comparable, so no number: sampling at a temperature > 0,
or simulated acceptance (``SGLANG_SIMULATE_ACC_LEN`` > 0 in this
configuration's or the baseline's environment: the emitted tokens are then
not the target's greedy tokens). Prompts without a partner (other dataset,
seed or lengths) are counted as ``unpaired``; with none paired the metric is
absent with that reason.

A failed configuration marked ``expect: failure`` gets ``expected_failure``:
``expected`` is true only when the engine's log evidence shows one of the
plan's own ``expect_signature`` failures; any other failure (out of memory, a
bad image, another error) is a surprise failure, reported as such.

Accept length and every other metric are computed from this run's measured
records only (``analysis.compute.select_measured``), never from server-lifetime
counters such as ``/server_info`` ``avg_spec_accept_length``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specsweep.analysis.compute import compute_metrics, select_measured
from specsweep.analysis.formulas import (
    NOT_COMPARABLE,
    PROMPT_LEN_TOLERANCE_SHARE,
    PROMPT_LEN_TOLERANCE_TOKENS,
    Absent,
    prompt_length_mismatches,
)
from specsweep.analysis.metrics import required_metrics
from specsweep.analysis.profiling import profile_warnings
from specsweep.analysis.stats import WARMUP_CRITERION
from specsweep.contracts.acceptance import simulated_acc_len
from specsweep.contracts.vocabulary import Expect, Reason, RequestStatus, Stage, Status
from specsweep.engines.argv import speculative_algorithm
from specsweep.records import is_external, validate_record
from specsweep.warmup import warmup_report

AGREEMENT_DEFINITION = (
    "each measured request is paired with the baseline's measured request of the same prompt_key "
    "(same endpoint, prompt and output_len); match share = paired requests whose output token ids equal "
    "the baseline's / paired requests; flagged 'outputs differ from the baseline' below the threshold; "
    "only under greedy decoding without simulated acceptance")


@dataclass(frozen=True)
class BaselineRun:
    """The baseline as the agreement check needs it (``name`` None: no baseline named)."""

    name: str | None
    plan: dict | None = None
    records: list[dict] | None = None


def _simulated(plan: Mapping[str, Any], env: Mapping[str, Any] | None) -> str | None:
    """``VAR=value`` when ``env`` (a plan's, or its server's as recorded) sets the variable that the plan's engine
    reads for a simulated accept length (its facts' ``simulated_accept_length_setting``) to a value that
    simulates (``contracts.acceptance.simulated_acc_len``)."""
    section, _, key = ((plan.get("facts") or {}).get("simulated_accept_length_setting") or "").partition(".")
    value = (env or {}).get(key) if section == "env" else None
    return f"{key}={value}" if simulated_acc_len(value) is not None else None


def agreement_reference(plan: dict, launch: dict | None, baseline: BaselineRun | None) -> list[dict] | Absent:
    """The baseline's ok measured records to compare outputs with, or why outputs cannot be compared."""
    if baseline is None or baseline.name is None:
        return Absent("no baseline named in config.yaml")
    if baseline.name == plan["name"]:
        return Absent("this configuration is the baseline")
    if baseline.plan is None or baseline.records is None:
        return Absent(f"the baseline {baseline.name!r} has no requests")
    for who, p in (("this configuration", plan), (f"the baseline {baseline.name!r}", baseline.plan)):
        temperature = float((p.get("workload") or {}).get("temperature", 0.0))
        if temperature > 0:
            return Absent(f"{NOT_COMPARABLE}{who} samples at temperature {temperature} (agreement needs greedy "
                          "decoding)")
    envs = [("this configuration", plan, plan.get("env")),
            ("this configuration's server", plan, ((launch or {}).get("provenance") or {}).get("env")),
            (f"the baseline {baseline.name!r}", baseline.plan, baseline.plan.get("env"))]
    for who, p, env in envs:
        setting = _simulated(p, env)
        if setting is not None:
            return Absent(f"{NOT_COMPARABLE}acceptance is simulated ({setting} in {who}): the emitted "
                          "tokens are not the target's greedy tokens")
    return select_measured(baseline.records)["ok"]


def agreement_section(metrics: dict[str, Any], baseline: BaselineRun | None, threshold: float | None) -> dict[str, Any]:
    """The agreement section; ``threshold`` None never flags (the workflow always passes config's value)."""
    match = metrics.get("output_match_share")
    out: dict[str, Any] = {"baseline": baseline.name if baseline else None, "threshold": threshold,
                           "definition": AGREEMENT_DEFINITION, "match_share": None, "flagged": None,
                           "reason": metrics["absent"].get("output_match_share")}
    if match is not None:
        flagged = None if threshold is None else match["value"] < threshold
        out.update(match_share=match["value"], flagged=flagged, reason=None,
                   paired=match["paired"], matching=match["matching"], unpaired=match["unpaired"])
    return out


def agreement_message(agreement: dict[str, Any], metrics: dict[str, Any]) -> str:
    prefix = metrics.get("output_common_prefix_tokens") or {}
    return (f"outputs differ from the baseline ({agreement['baseline']}): {agreement['matching']} of "
            f"{agreement['paired']} paired prompts match ({agreement['match_share']:.0%}, threshold "
            f"{agreement['threshold']:.0%}); mean common prefix {prefix.get('value', float('nan')):.1f} of "
            f"{prefix.get('mean_baseline_tokens', float('nan')):.1f} tokens")


#: What a summary keeps of an external server's /server_info (SGLang's and the reference engine's
#: names: ``server_args.resolved_dict()``, underscored).
SERVER_INFO_KEYS = ("model_path", "tp_size", "speculative_algorithm", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens", "version")


def external_server(plan: dict[str, Any], launch: dict[str, Any] | None) -> dict[str, Any] | None:
    """For runtime external, what the server said it runs (its ``/server_info`` in ``launch.json``):
    the plan has no server flags, so the speculative algorithm and the TP size are the server's word.
    None for a launched server; ``{"url"}`` alone when the job never got the server's info."""
    if not is_external(plan):
        return None
    info = (launch or {}).get("server_info") or {}
    return {"url": plan.get("url"), **{k: info[k] for k in SERVER_INFO_KEYS if k in info}}


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
        if r.get("run_id") == run_id and r.get("phase") == "measured" and r["status"] == RequestStatus.OK
        and r.get("completion_tokens") is not None and r["completion_tokens"] != r["output_len"]
    ]
    if short:
        out.append(
            f"{len(short)} ok requests returned completion_tokens != output_len "
            f"(e.g. {short[0]['completion_tokens']} vs {short[0]['output_len']}) despite ignore_eos"
        )
    ok = [r for r in measured
          if r.get("run_id") == run_id and r.get("phase") == "measured" and r["status"] == RequestStatus.OK]
    mismatched = prompt_length_mismatches(ok)
    if mismatched:
        want, got = mismatched[0]
        out.append(
            f"prompt length: {len(mismatched)} of {len(ok)} requests were served with prompt_tokens differing from "
            f"the intended length by more than max({PROMPT_LEN_TOLERANCE_TOKENS} tokens, "
            f"{PROMPT_LEN_TOLERANCE_SHARE:.0%}) (e.g. intended {want}, served {got}): the server tokenizes "
            "otherwise than the tokenizer that selected the prompts"
        )
    return out


def _host_warnings(host: dict[str, Any] | None) -> list[str]:
    """Load beyond the CPUs while the server ran: recorded and said, but no server, so no contamination."""
    if not host or not host.get("samples") or not host.get("cpus"):
        return []
    if host["running_max"] > host["cpus"]:
        return [f"up to {host['running_max']} runnable tasks on {host['cpus']} CPUs while the server ran "
                f"(load1 up to {host['load1_max']:.1f}): other work competed for the CPUs"]
    return []


def expected_failure(labels: Mapping[str, Any], evidence: dict | None) -> dict[str, Any]:
    """Whether a failed ``expect: failure`` configuration failed the known way (its labels' own signature)."""
    wanted = labels.get("expect_signature") or []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    seen = list((evidence or {}).get("failures") or [])
    matched = [f for f in seen if f.get("signature") in wanted]
    return {"expected": bool(matched), "wanted": wanted, "matched": matched, "seen": seen}


def build_summary(
    plan: dict,
    launch: dict | None,
    outcome: dict,
    warmup: list[dict],
    measured: list[dict],
    evidence: dict | None,
    baseline: BaselineRun | None = None,
    agreement_threshold: float | None = None,
    labels: Mapping[str, Any] | None = None,
    profile: dict | None = None,
) -> dict:
    """The summary of one launch of a configuration at one point (shape and status rules: module docstring).

    ``labels``: how to read the result (``plan.resolve.build_labels``: ``expect``,
    ``expect_signature``), which are not part of the plan.
    """
    seed = int(plan["workload"]["seed"])
    metrics = compute_metrics(measured, seed=seed, baseline=agreement_reference(plan, launch, baseline),
                              profile=profile)
    run_id = metrics["run_id"]
    if run_id is None and warmup:
        run_id = warmup[-1].get("run_id")
    warm = _warmup_section(plan, warmup, run_id)
    server = external_server(plan, launch)
    # what the engine resolved the plan's flags to mean; an external server's own account where it gave one
    spec = (speculative_algorithm(server) if server is not None
            else (plan.get("facts") or {}).get("speculative_algorithm"))
    summary: dict[str, Any] = {
        "config": plan["name"],
        "run_id": outcome.get("run_id"),
        "status": Status.OK,
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
        "warnings": (_warnings(metrics, warm, measured, run_id) + _host_warnings(outcome.get("host"))
                     + profile_warnings(profile)),
        "agreement": agreement_section(metrics, baseline, agreement_threshold),
        "host": outcome.get("host"),
        "profile": profile,
    }
    if server is not None:
        summary["server"] = server
    fell_back = list((evidence or {}).get("fell_back") or [])
    trace_fell_back = ((profile or {}).get("variant") or {}).get("fell_back") or []
    if trace_fell_back:
        fell_back += trace_fell_back
        summary["variant"] = {**(evidence or {}), "fell_back": fell_back}
    summary["warnings"] += [
        f"variant {s['variant']} is shadowed by {s['by']}: {s['why']}" for s in (evidence or {}).get("shadowed") or []
    ]
    summary["expected_failure"] = None
    invalid = [(r.get("request_id"), p) for r in [*warmup, *measured] for p in validate_record(r)]

    if outcome.get("status") == Status.CONTAMINATED:
        summary.update(status=Status.CONTAMINATED, stage=outcome.get("stage"), reason=outcome.get("reason"),
                       detail=outcome.get("detail"))
    elif outcome.get("status") != Status.OK:
        summary.update(
            status=Status.FAILED,
            stage=outcome.get("stage"),
            reason=outcome.get("reason"),
            detail=outcome.get("detail"),
            log_tail=outcome.get("log_tail"),
        )
    elif invalid:
        summary.update(status=Status.FAILED, stage=Stage.SUMMARIZE, reason=Reason.INVALID_RECORDS,
                       detail=f"{len(invalid)} schema problems, first: {invalid[:3]}")
    elif metrics["counts"]["ok"] == 0:
        summary.update(status=Status.FAILED, stage=Stage.SUMMARIZE, reason=Reason.NO_SUCCESSFUL_REQUESTS,
                       detail=f"0 of {metrics['counts']['measured']} measured requests succeeded; "
                              f"errors: {metrics['errors']}")
    elif missing := _missing_metrics(metrics, spec):
        detail = f"required metric absent: {'; '.join(missing)}"
        if spec:
            detail += f" (speculative algorithm {spec})"
        if fell_back:
            detail += f"; the variant also fell back: {fell_back}"
        summary.update(status=Status.FAILED, stage=Stage.SUMMARIZE, reason=Reason.MISSING_METRIC, detail=detail)
    elif summary["agreement"]["flagged"]:
        summary.update(status=Status.FAILED, stage=Stage.SUMMARIZE, reason=Reason.OUTPUTS_DIFFER,
                       detail=agreement_message(summary["agreement"], metrics))
    elif fell_back:
        summary.update(
            status=Status.FALLBACK,
            stage=Stage.LAUNCH,
            reason=Reason.VARIANT_FALLBACK,
            detail="; ".join(
                f"{f.get('variant', f)}: {f.get('line', '')}" if isinstance(f, dict) else str(f) for f in fell_back
            ),
        )
    labels = labels or {}
    if summary["status"] == Status.FAILED and labels.get("expect") == Expect.FAILURE:
        summary["expected_failure"] = expected_failure(labels, evidence)
    return summary
