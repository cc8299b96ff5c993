"""The answer a user came for: what to deploy on this host, whether speculation pays on each
communication backend against that backend's own no-speculation run, the cost model beside the
measurement, and the all-reduce latency at which speculation starts to pay.

* Own baselines (``own_baselines``): a speculative configuration's counterpart without
  speculation, named by its ``own_baseline`` label or found automatically: the one configuration
  without speculation whose plan (engine, runtime, image, GPUs, server flags, environment) equals
  this one's once the speculation settings (the plan's ``facts``: ``speculation_settings``, as its
  engine resolved them) are removed. A faster all-reduce also speeds up decoding without
  speculation, so "does speculation pay" has an answer per backend.
* The best setup overall (``deploy``): per workload point, the configuration significantly
  faster than the global baseline by the largest ratio (the verdict's own ratio of medians,
  ``stats.compare_to_baseline`` through the report's ``compare``); none: the baseline.
* The cost model and the budget (``analysis.costmodel``) for every row whose parts were
  measured: the engine's timing and, where there is communication, the micro-benchmark's latency
  (``profile.enabled`` runs it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from specsweep.analysis.costmodel import (
    StepParts,
    accept_needed,
    latency_budget_us,
    missed_part,
    own_crossover,
    predicted_ms,
    predicted_tok_s,
    residual,
)
from specsweep.analysis.metrics import BASELINE_TOK_S, METRIC_COLUMNS
from specsweep.analysis.rows import row_label
from specsweep.contracts.vocabulary import Status, Verdict
from specsweep.engines.reference import STEP_DELAY_ENV, STEP_SLOWDOWN_ENV
from specsweep.files import canonical_json

#: A configuration with a test-only fault (a positive control) is never what to deploy.
TEST_FAULT_ENV = (STEP_DELAY_ENV, STEP_SLOWDOWN_ENV)
#: Plan keys that must agree for an automatic own baseline (besides flags and environment).
_SAME_KEYS = ("engine", "runtime", "image", "gpus")
#: summary.csv columns this module fills (after render's comparison columns).
ANSWER_COLUMNS = ("own_baseline", "own_verdict", "own_ratio", "own_ratio_ci_low", "own_ratio_ci_high",
                  "model_measured_ms", "model_predicted_ms", "model_residual_share", "model_predicted_tok_s",
                  "model_measured_tok_s", "model_predicted_speedup", "measured_speedup", "model_latency_us",
                  "latency_budget_us")


def _facts(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the plan's engine said its settings mean (``contracts.plan.FACT_KEYS``)."""
    return plan.get("facts") or {}


def _speculation_keys(plan: Mapping[str, Any], section: str) -> set[str]:
    """The keys of ``section`` (``server_args``, ``env``) that only speculation reads (the facts' settings)."""
    return {s.partition(".")[2] for s in _facts(plan).get("speculation_settings") or [] if s.startswith(f"{section}.")}


def _spec(plan: Mapping[str, Any]) -> str | None:
    return _facts(plan).get("speculative_algorithm")


def _without_speculation(plan: Mapping[str, Any]) -> str:
    args = {k: v for k, v in (plan.get("server_args") or {}).items()
            if k not in _speculation_keys(plan, "server_args")}
    env = {k: v for k, v in (plan.get("env") or {}).items() if k not in _speculation_keys(plan, "env")}
    return canonical_json({"args": args, "env": env, **{k: plan.get(k) for k in _SAME_KEYS}})


def own_baselines(plans: Mapping[str, Mapping[str, Any]], named: Mapping[str, str] | None = None
                  ) -> dict[str, dict[str, str]]:
    """``{speculative config: {"name": its own baseline, "how": "named"|"found"}}``, or ``{"why": ...}``
    when none is named and none or several match (module docstring)."""
    named = named or {}
    plain = {n: _without_speculation(p) for n, p in plans.items()
             if _spec(p) is None}
    out: dict[str, dict[str, str]] = {}
    for name, plan in sorted(plans.items()):
        if _spec(plan) is None:
            continue
        if named.get(name):
            out[name] = {"name": named[name], "how": "named"}
            continue
        key = _without_speculation(plan)
        match = sorted(n for n, k in plain.items() if k == key)
        if len(match) == 1:
            out[name] = {"name": match[0], "how": "found"}
        elif match:
            out[name] = {"why": f"several configurations without speculation match: {match}; name one (own_baseline)"}
        else:
            out[name] = {"why": "no configuration without speculation differs from it only in speculation settings"}
    return out


# ------------------------------------------------------------------ the cost model of one row


def _tp(row: Mapping[str, Any]) -> int:
    return int(_facts(row.get("plan") or {}).get("tp_size") or 1)


def _bench(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The configuration's micro-benchmark (its first point's profile holds it)."""
    for r in rows:
        if r["config"] == row["config"] and r.get("profile"):
            return {**(r["profile"].get("bench") or {"absent": "no micro-benchmark in the profile"}),
                    "comm": r["profile"].get("comm") or {}}
    return None


def verify_bytes(row: Mapping[str, Any], bench: Mapping[str, Any]) -> int | None:
    """Bytes of one target-forward all-reduce at this row's point: the micro-benchmark's bytes per token x
    tokens per forward (draft tokens, 1 without speculation) x the point's concurrency."""
    if "absent" in bench or not bench.get("tokens"):
        return None
    per_token = bench["bytes"] / bench["tokens"]
    draft_tokens = int((bench.get("comm") or {}).get("draft_tokens") or 1)
    return int(round(per_token * draft_tokens * max(1, int(row.get("concurrency") or 1))))


def row_parts(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The measured parts of one row (``StepParts`` plus what the residual needs), or ``{"absent": why}``."""
    if row["status"] in (Status.FAILED, Status.CONTAMINATED):
        return {"absent": f"status {row['status']}"}
    comm_absent = _tp(row) <= 1
    spec = bool(row.get("spec"))
    if spec:
        need = ("cycle_time_ms", "accept_length", "draft_ms", "verify_ms", "verify_comm_ms", "verify_compute_ms")
    else:
        need = ("decode_tok_s_run", "target_forward_ms", "target_forward_comm_ms")
    missing = [k for k in need + (() if comm_absent else ("allreduce_per_forward",)) if row.get(k) is None]
    if missing:
        why = {c.name: (row.get("absent") or {}).get(c.metric) for c in METRIC_COLUMNS}
        return {"absent": "not measured: " + "; ".join(f"{k} ({why[k]})" if why.get(k) else k for k in missing)}
    latency, note, timing = None, None, None
    if not comm_absent:
        bench = _bench(row, rows)
        if bench is None:
            return {"absent": "no all-reduce micro-benchmark (profile.enabled off)"}
        if "absent" in bench:
            return {"absent": bench["absent"]}
        latency = float(bench["median_us"])
        # profiling._bench: how the latency was timed (old results: back_to_back), and the loop's figure beside it
        timing = {"timing": bench["timing"], "back_to_back_us": bench.get("back_to_back_us")}
        size = verify_bytes(row, bench)
        if size is not None and size != bench["bytes"]:
            note = f"latency measured at {bench['bytes']} B, this point's all-reduce is {size} B"
    n = 0.0 if comm_absent else float(row["allreduce_per_forward"])
    if spec:
        parts = StepParts(row["draft_ms"] + row["verify_compute_ms"], n, latency, float(row["accept_length"]))
        measured, phases, comm = row["cycle_time_ms"], row["draft_ms"] + row["verify_ms"], row["verify_comm_ms"]
    else:
        parts = StepParts(row["target_forward_ms"] - row["target_forward_comm_ms"], n, latency, 1.0)
        measured, phases, comm = 1e3 / row["decode_tok_s_run"], row["target_forward_ms"], row["target_forward_comm_ms"]
    pred = predicted_ms(parts)
    return {"parts": parts, "measured_ms": measured, "predicted_ms": pred, "comm_absent": comm_absent,
            "residual": residual(measured, pred, phases, comm, parts.comm_ms), "note": note, "timing": timing,
            "backend": _backend(row)}


def _backend(row: Mapping[str, Any]) -> str:
    return str(_facts(row.get("plan") or {}).get("all_reduce_backend")
               or ((row.get("profile") or {}).get("bench") or {}).get("backend") or row["config"])


# ------------------------------------------------------------------ annotate the report's rows


def annotate(rows: Sequence[dict[str, Any]], base: dict[str, Any] | None, pairs: Mapping[str, Mapping[str, str]],
             compare: Callable[[dict, dict], dict]) -> None:
    """Set each row's own-baseline verdict, model and budget (``ANSWER_COLUMNS`` and ``answer``)."""
    by_point = {(r["config"], canonical_json(r["workload"])): r for r in rows}
    for r in rows:
        r["model"] = m = row_parts(r, rows)
        # Measured the way the model predicts: tokens per step / the measured step (accept / cycle time).
        r["model_measured_tok_s"] = m["parts"].tokens / m["measured_ms"] * 1e3 if "parts" in m else None
    for r in rows:
        point = canonical_json(r["workload"])
        pair = pairs.get(r["config"]) or {}
        own = by_point.get((pair.get("name"), point)) if pair.get("name") else None
        r["own_row"], r["own_pair"], r["own_comparison"] = own, pair, None
        r["own_baseline"] = pair.get("name")
        if own is not None and r["status"] == Status.OK and own["status"] == Status.OK:
            r["own_comparison"] = compare(r, own)
        v = r["own_comparison"] or {}
        r["own_verdict"], r["own_ratio"] = v.get("verdict"), v.get("ratio")
        r["own_ratio_ci_low"], r["own_ratio_ci_high"] = v.get("ratio_ci") or [None, None]
        m = r["model"]
        r["model_measured_ms"] = m.get("measured_ms")
        r["model_predicted_ms"] = m.get("predicted_ms")
        r["model_residual_share"] = (m.get("residual") or {}).get("residual_share")
        r["model_predicted_tok_s"] = predicted_tok_s(m["parts"]) if "parts" in m else None
        r["model_latency_us"] = m["parts"].latency_us if "parts" in m else None
        pb = r.get("base_row")
        bm = (pb or {}).get("model") or {}
        r["model_predicted_speedup"] = (r["model_predicted_tok_s"] / predicted_tok_s(bm["parts"])
                                        if r["model_predicted_tok_s"] is not None and "parts" in bm else None)
        r["measured_speedup"] = (r["model_measured_tok_s"] / pb["model_measured_tok_s"]
                                 if pb is not None and pb.get("model_measured_tok_s") and r["model_measured_tok_s"]
                                 else None)
        r["latency_budget_us"] = None
        if r.get("spec") and "parts" in m and baseline_rate(pb):
            r["latency_budget_us"] = latency_budget_us(m["parts"], baseline_rate(pb))


def baseline_rate(base_row: Mapping[str, Any] | None) -> float | None:
    """The baseline's decode rate B of the budget, tok/s: the one baseline tok/s of the report
    (``metrics.BASELINE_TOK_S``), the rate the break-even uses."""
    return None if base_row is None else base_row.get(BASELINE_TOK_S)


def _points(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["point_index"]):
        out.setdefault(r["point"], []).append(r)
    return list(out.items())


# ------------------------------------------------------------------ what to deploy


def deploy(rows: Sequence[dict[str, Any]], base: dict[str, Any] | None, baseline: str | None,
           compare: Callable[[dict, dict], dict]) -> dict[str, Any]:
    """What to deploy on this host, per workload point: the configuration significantly faster than the
    baseline by the largest ratio (never a test fault), the configurations it is not significantly faster
    than (``compare(a, b)``: the report's primary verdict of row a against row b) and its settings against the
    baseline's; with none faster, the highest ratio measured. ``answered`` False without a baseline that
    ended ok."""
    if base is None or base["status"] != Status.OK:
        return {"baseline": baseline, "answered": False, "points": []}
    return {"baseline": baseline, "answered": True,
            "points": [_deploy_at(point, prow, base, compare) for point, prow in _points(rows)]}


def _deploy_at(point: str, prow: Sequence[dict[str, Any]], base: dict[str, Any],
               compare: Callable[[dict, dict], dict]) -> dict[str, Any]:
    real = [r for r in prow if r["status"] == Status.OK and not _test_fault(r)]
    faster = [r for r in real if r.get("verdict") == Verdict.FASTER]
    top = max((r for r in real if r.get("ratio") is not None), key=lambda r: r["ratio"], default=None)
    out: dict[str, Any] = {"point": point, "deploy": None, "highest": None}
    if faster:
        best = max(faster, key=lambda r: r["ratio"])
        out["deploy"] = {
            "config": best["config"], "speculation": bool(best.get("spec")), "comparison": best["comparison"],
            "own_baseline": best.get("own_baseline"), "own_verdict": best.get("own_verdict"),
            "own_comparison": best.get("own_comparison"), "settings": settings_against(best, base),
            "ties": [r["config"] for r in faster if r is not best and compare(best, r)["verdict"] != Verdict.FASTER]}
    elif top is not None:
        out["highest"] = {"config": top["config"], "ratio": top["ratio"], "verdict": top["verdict"]}
    return out


def _test_fault(row: Mapping[str, Any]) -> bool:
    return any(k in ((row.get("plan") or {}).get("env") or {}) for k in TEST_FAULT_ENV)


def settings_against(row: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, list[str]]:
    """The winner's server flags and environment that differ from the baseline's, as a user applies them:
    ``flags`` (``--k v``), ``dropped`` (the baseline's flags it runs without), ``changed`` (``K=V``), ``unset``
    (the baseline's variables it does not set), ``what_if`` (a simulated accept length, ``K=V``)."""
    plan, bplan = row.get("plan") or {}, base.get("plan") or {}
    args, bargs = plan.get("server_args") or {}, bplan.get("server_args") or {}
    env, benv = plan.get("env") or {}, bplan.get("env") or {}
    simulated = _speculation_keys(plan, "env")  # what speculation alone reads: a what-if, not a setting

    def off(v: Any) -> bool:  # a flag omitted from the argv (engines.argv: false/null); 0 is a value
        return v is None or v is False

    return {"flags": [f"--{k}" + ("" if v is True else f" {v}") for k, v in sorted(args.items())
                      if bargs.get(k) != v and not off(v)],
            "dropped": [f"--{k}" for k in sorted(bargs) if not off(bargs[k]) and (k not in args or off(args[k]))],
            "changed": [f"{k}={v}" for k, v in sorted(env.items()) if benv.get(k) != v and k not in simulated],
            "unset": [k for k in sorted(benv) if k not in env],
            "what_if": [f"{k}={env[k]}" for k in sorted(simulated) if k in env]}


# ------------------------------------------------------------------ the cost model and the budget, per row


def model_record(row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``row["model"]`` as report.json holds it: the parts as numbers, the part the model misses
    (``costmodel.missed_part``), and the profiler trace's wait for the slower rank of the configuration."""
    m = dict(row["model"])
    if "parts" not in m:
        return m
    m["parts"] = asdict(m["parts"])
    m["missed_part"] = missed_part(m["residual"])
    m["trace_rank_skew_ms"] = next((x.get("trace_rank_skew_ms") for x in rows if x["config"] == row["config"]
                                    and x.get("trace_rank_skew_ms") is not None), None)
    return m


def budget_points(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload point: the baseline's decode rate and every modelled speculative row (for the text and plot)."""
    out = []
    for point, prow in _points(rows):
        spec = [r for r in prow if r.get("spec") and "parts" in (r.get("model") or {})]
        base = next((r["base_row"] for r in prow if r.get("base_row") is not None), None)
        if not spec or not baseline_rate(base):
            continue
        out.append({"point": point, "baseline": base["config"], "baseline_tok_s": baseline_rate(base),
                    "rows": [{"label": row_label(r), "backend": r["model"]["backend"], "parts": r["model"]["parts"],
                              "comm_absent": r["model"]["comm_absent"], "accept": r["accept_length"],
                              "budget_us": r["latency_budget_us"], "own": r.get("own_row"),
                              "in_server_us": _in_server_us(r), "residual": r["model"]["residual"]} for r in spec]})
    return out


def _in_server_us(row: Mapping[str, Any]) -> float | None:
    """One all-reduce as the engine timed it inside the verify, us: verify_comm_ms / all-reduces per verify
    (the micro-benchmark's latency plus what its loop does not see)."""
    n = row.get("allreduce_per_forward")
    if row["model"].get("comm_absent") or not n or row.get("verify_comm_ms") is None:
        return None
    return row["verify_comm_ms"] / n * 1e3


def budget_records(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``budget_points`` as report.json holds them: per row the parts as numbers, the accept length needed at
    the measured latency and at each modelled backend's latency (``latencies``, in the order of the rows),
    and where speculation equals its own counterpart (``costmodel.own_crossover``)."""
    out = []
    for pt in points:
        b = pt["baseline_tok_s"]
        latencies = [{"backend": r["backend"], "latency_us": r["parts"].latency_us} for r in pt["rows"]
                     if not r["comm_absent"]]
        latencies = list({x["backend"]: x for x in latencies}.values())
        rows = []
        for r in pt["rows"]:
            p = r["parts"]
            own_model = (r["own"] or {}).get("model") or {}
            own = None
            if "parts" in own_model and not r["comm_absent"]:
                own = own_crossover(p, own_model["parts"])
            elif "parts" in own_model:
                pays = predicted_tok_s(p) > predicted_tok_s(own_model["parts"])
                own = {"pays": "always" if pays else "never", "latency_us": None, "no_communication": True}
            rows.append({"label": r["label"], "backend": r["backend"], "parts": asdict(p),
                         "comm_absent": r["comm_absent"], "accept": r["accept"], "budget_us": r["budget_us"],
                         "own": None if r["own"] is None else r["own"]["config"], "in_server_us": r["in_server_us"],
                         "residual": r["residual"], "accept_needed": accept_needed(p, b),
                         "accept_needed_at": [accept_needed(p, b, x["latency_us"] if not r["comm_absent"] else None)
                                              for x in latencies],
                         "own_crossover": own})
        out.append({"point": pt["point"], "baseline": pt["baseline"], "baseline_tok_s": b, "latencies": latencies,
                    "rows": rows})
    return out


def verify_sizes(rows: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Bytes of the verify's all-reduce at every point of each configuration (where the micro-benchmark ran)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        bench = _bench(r, rows)
        size = verify_bytes(r, bench) if bench is not None else None
        if size is not None:
            out.setdefault(r["config"], []).append(size)
    return {k: sorted(set(v)) for k, v in out.items()}
