"""The answer a user came for: what to deploy on this host, whether speculation pays on each
communication backend against that backend's own no-speculation run, the cost model beside the
measurement, and the all-reduce latency at which speculation starts to pay.

* Own baselines (``own_baselines``): a speculative configuration's counterpart without
  speculation, named by its ``own_baseline`` label or found automatically: the one configuration
  without speculation whose plan (engine, runtime, image, GPUs, server flags, environment) equals
  this one's once the speculation settings (the plan's ``facts``: ``speculation_settings``, as its
  engine resolved them) are removed. A faster all-reduce also speeds up decoding without
  speculation, so "does speculation pay" has an answer per backend.
* The best setup overall (``best_lines``): per workload point, the configuration significantly
  faster than the global baseline by the largest ratio (the verdict's own ratio of medians,
  ``stats.compare_to_baseline`` through the report's ``compare``); none: the baseline.
* The cost model and the budget (``analysis.costmodel``) for every row whose parts were
  measured: the engine's timing and, where there is communication, the micro-benchmark's latency
  (``profile.enabled`` runs it).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specsweep.analysis.costmodel import (
    RESIDUAL_LARGE,
    RESIDUAL_PARTS,
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
from specsweep.contracts.vocabulary import CALLED, Status, Verdict
from specsweep.engines.reference import STEP_DELAY_ENV, STEP_SLOWDOWN_ENV
from specsweep.files import canonical_json
from specsweep.report.markdown import table_head, table_row
from specsweep.report.sweep import row_label

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
    args = {k: v for k, v in (plan.get("server_args") or {}).items() if k not in _speculation_keys(plan, "server_args")}
    env = {k: v for k, v in (plan.get("env") or {}).items() if k not in _speculation_keys(plan, "env")}
    return canonical_json({"args": args, "env": env, **{k: plan.get(k) for k in _SAME_KEYS}})


def own_baselines(plans: Mapping[str, Mapping[str, Any]], named: Mapping[str, str] | None = None
                  ) -> dict[str, dict[str, str]]:
    """``{speculative config: {"name": its own baseline, "how": "named"|"found"}}``, or ``{"why": ...}``
    when none is named and none or several match (module docstring)."""
    named = named or {}
    plain = {n: _without_speculation(p) for n, p in plans.items() if _spec(p) is None}
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


def _verdict(v: Mapping[str, Any] | None, missing: str) -> str:
    if not v:
        return missing
    if "ratio" not in v:
        return v["verdict"]
    lo, hi = v["ratio_ci"]
    return f"{v['verdict']} (x{v['ratio']:.3f} [{lo:.3f}, {hi:.3f}])"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f} %"


def _points(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["point_index"]):
        out.setdefault(r["point"], []).append(r)
    return list(out.items())


# ------------------------------------------------------------------ the report's first lines


def best_lines(rows: Sequence[dict[str, Any]], base: dict[str, Any] | None, baseline: str | None,
               compare: Callable[[dict, dict], dict]) -> str:
    """"On this host, deploy X (+Y % over the baseline)" (one paragraph; with several workload points a list,
    one line per point), with the configurations the winner is not significantly faster than
    (``compare(a, b)``: the report's primary verdict of row a against row b)."""
    if base is None or base["status"] != Status.OK:
        return ("**On this host:** what to deploy is not answered: no baseline that ended ok to compare with "
                f"({'none named' if baseline is None else baseline}).\n\n")
    points = _points(rows)
    lines = [_best_at(prow, base, baseline, compare, "On this host, " if len(points) == 1 else f"at {point}, ")
             for point, prow in points]
    if len(lines) == 1:
        return lines[0] + "\n\n"
    return "**On this host, by workload point:**\n" + "".join(f"- {line}\n" for line in lines) + "\n"


def _best_at(prow: Sequence[dict[str, Any]], base: dict[str, Any], baseline: str | None,
             compare: Callable[[dict, dict], dict], lead: str) -> str:
    out = io.StringIO()
    real = [r for r in prow if r["status"] == Status.OK and not _test_fault(r)]
    faster = [r for r in real if r.get("verdict") == Verdict.FASTER]
    top = max((r for r in real if r.get("ratio") is not None), key=lambda r: r["ratio"], default=None)
    if faster:
        best = max(faster, key=lambda r: r["ratio"])
        v = best["comparison"]
        spec = "with speculation" if best.get("spec") else "without speculation"
        out.write(f"**{lead}deploy `{best['config']}`** ({spec}): {_pct(v['ratio'])} over `{baseline}`, the "
                  f"baseline without speculation (x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}], "
                  f"{v['verdict']}).")
        if best.get("own_verdict") and best.get("own_baseline") != baseline:
            out.write(f" Against its own backend without speculation (`{best['own_baseline']}`): "
                      f"{_verdict(best['own_comparison'], 'n/a')}.")
        out.write(_settings_text(best, base))
        ties = [r["config"] for r in faster if r is not best and compare(best, r)["verdict"] != Verdict.FASTER]
        if ties:
            out.write(f" It is not significantly faster than {', '.join(f'`{t}`' for t in ties)} (same verdict "
                      "method): any of them will do.")
    else:
        out.write(f"**{lead}keep `{baseline}`** (no configuration was significantly faster than it")
        if top is not None:
            out.write(f"; the highest median, `{top['config']}`, was {_pct(top['ratio'])}, {top['verdict']}")
        out.write(").")
    return out.getvalue()


def _test_fault(row: Mapping[str, Any]) -> bool:
    return any(k in ((row.get("plan") or {}).get("env") or {}) for k in TEST_FAULT_ENV)


def _settings_text(row: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """The winner's server flags and environment that differ from the baseline's, as a user applies them."""
    plan, bplan = row.get("plan") or {}, base.get("plan") or {}
    args, bargs = plan.get("server_args") or {}, bplan.get("server_args") or {}
    env, benv = plan.get("env") or {}, bplan.get("env") or {}

    def off(v: Any) -> bool:  # a flag omitted from the argv (engines.argv: false/null); 0 is a value
        return v is None or v is False

    flags = [f"--{k}" + ("" if v is True else f" {v}") for k, v in sorted(args.items())
             if bargs.get(k) != v and not off(v)]
    dropped = [f"--{k}" for k in sorted(bargs) if not off(bargs[k]) and (k not in args or off(args[k]))]
    simulated = _speculation_keys(plan, "env")  # what speculation alone reads: a what-if, not a setting
    what_if = [f"{k}={env[k]}" for k in sorted(simulated) if k in env]
    changed = [f"{k}={v}" for k, v in sorted(env.items()) if benv.get(k) != v and k not in simulated]
    unset = [k for k in sorted(benv) if k not in env]
    parts = []
    if flags or dropped:
        parts.append("server flags " + " ".join(f"`{f}`" for f in flags)
                     + (f" (without {' '.join(f'`{d}`' for d in dropped)})" if dropped else ""))
    if changed or unset:
        parts.append("environment " + " ".join(f"`{c}`" for c in changed)
                     + (f" (unset {' '.join(f'`{u}`' for u in unset)})" if unset else ""))
    text = f" Against the baseline it sets {'; '.join(parts)}." if parts else " It has the baseline's settings."
    if what_if:
        text += (f" Measured with {', '.join(f'`{w}`' for w in what_if)}: a simulated accept length, a what-if "
                 "to leave unset (the real draft model's accept length decides).")
    return text


# ------------------------------------------------------------------ sections after the results


def backend_section(rows: Sequence[dict[str, Any]], baseline: str | None) -> str:
    """Per backend: speculation against its own baseline, next to the comparison with the global one."""
    spec = [r for r in rows if r.get("spec") and r.get("own_pair")]
    if not spec:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Does speculation pay on each backend?\n\n")
    w("Each speculative configuration against its own counterpart without speculation (the same server and "
      "all-reduce, speculation off: named with `own_baseline`, or found as the one plan that differs only in "
      f"speculation settings), next to the comparison with the global baseline `{baseline}`. A faster all-reduce "
      "speeds up decoding without speculation too, so the two can disagree. Same verdict method and noise floor "
      "as the results table.\n\n")
    w("| config | own baseline | speculation vs own baseline | vs global baseline | own baseline vs global |\n")
    w("|---|---|---|---|---|\n")
    for r in spec:
        pair = r["own_pair"]
        own = r.get("own_row")
        if "why" in pair:
            own_cell, vs_own, own_vs = f"none ({pair['why']})", "n/a", "n/a"
        else:
            own_cell = f"{pair['name']} ({pair['how']})"
            vs_own = (_verdict(r["own_comparison"], "n/a") if own is not None
                      else "n/a (no row at this point)")
            if r["own_comparison"] and r["own_verdict"] in CALLED:
                vs_own = f"{'pays' if r['own_verdict'] == Verdict.FASTER else 'does not pay'}: {vs_own}"
            own_vs = _verdict((own or {}).get("comparison"), (own or {}).get("verdict", "n/a"))
        cells = [row_label(r), own_cell, vs_own, _verdict(r.get("comparison"), r.get("verdict", "n/a")), own_vs]
        w(table_row(cells))
    w("\n")
    return out.getvalue()


def _allreduce_cell(parts: StepParts, timing: Mapping[str, Any]) -> str:
    """``20 x 61.8 (in_forward; back to back 7.5)``: all-reduces x the latency, how it was timed, the loop's figure."""
    loop = timing["back_to_back_us"]
    return (f"{parts.allreduces:.0f} x {parts.latency_us:.1f} ({timing['timing']}"
            + ("" if loop is None else f"; back to back {loop:.1f}") + ")")


def model_section(rows: Sequence[dict[str, Any]]) -> str:
    """The cost model beside the measurement, with the residual and the part it misses."""
    modelled = [r for r in rows if r.get("model")]
    if not modelled:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Cost model against the measurement\n\n")
    w("Predicted step = draft steps + verify compute + all-reduces per verify x the micro-benchmark's latency at "
      "the verify's message size (without speculation: decode compute + all-reduces per step x the latency at its "
      "size). Draft, compute and the all-reduce count are the engine's own timing; the latency is the "
      "micro-benchmark run before the server started, timed as the cell says: `in_forward` between the layers of "
      "the configuration's own model (the reference engine), `back_to_back` in a loop alone (SGLang). "
      "Measured = the client's cycle time (decode time / verify "
      "steps; without speculation 1 / the run decode rate). Predicted tok/s = accept length / predicted step; "
      "speedups are against the global baseline's predicted and measured decode rates. The residual "
      "(measured - predicted) splits into time outside the engine's phases and communication the "
      f"micro-benchmark does not see; beyond {RESIDUAL_LARGE:.0%} the last column names the larger part.\n\n")
    head = ["config", "draft + compute ms", "all-reduces x us", "predicted ms", "measured ms", "residual",
            "predicted tok/s", "measured tok/s (tokens / step)", "speedup predicted / measured",
            "what the model misses"]
    w(table_head(head))
    for r in modelled:
        m = r["model"]
        if "absent" in m:
            w(f"| {row_label(r)} | n/a ({m['absent']}) |" + " |" * (len(head) - 2) + "\n")
            continue
        p, res = m["parts"], m["residual"]
        ar = "none (TP=1: communication absent)" if m["comm_absent"] else _allreduce_cell(p, m["timing"])
        part = missed_part(res)
        misses = "within the model" if part is None else (
            f"{RESIDUAL_PARTS[part]}: {res[part]:+.2f} ms")
        skew = next((x.get("trace_rank_skew_ms") for x in modelled
                     if x["config"] == r["config"] and x.get("trace_rank_skew_ms") is not None), None)
        if part == "comm_missed_ms" and skew is not None:
            misses += f"; the profiler trace's wait for the slower rank: {skew:.2f} ms per forward"
        if m.get("note"):
            misses += f" ({m['note']})"
        sp = r.get("model_predicted_speedup")
        ms = r.get("measured_speedup")
        cells = [row_label(r), f"{p.fixed_ms:.2f}", ar, f"{m['predicted_ms']:.2f}", f"{m['measured_ms']:.2f}",
                 f"{res['residual_ms']:+.2f} ms ({res['residual_share']:+.1%})", f"{r['model_predicted_tok_s']:.1f}",
                 f"{r['model_measured_tok_s']:.1f}",
                 f"{'n/a' if sp is None else f'x{sp:.2f}'} / {'n/a' if ms is None else f'x{ms:.2f}'}", misses]
        w(table_row(cells))
    w("\nResidual parts of every modelled row (ms): " + "; ".join(
        f"{row_label(r)}: outside {r['model']['residual']['outside_ms']:+.2f}, comm missed "
        f"{r['model']['residual']['comm_missed_ms']:+.2f}" for r in modelled if "residual" in r["model"]) + ".\n\n")
    return out.getvalue()


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


def budget_section(points: Sequence[dict[str, Any]], plot_rel: str | None = None) -> str:
    """The communication budget per workload point, in words and a table."""
    if not points:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Communication budget: the all-reduce latency at which speculation pays\n\n")
    w("From the cost model: speculation beats the baseline's measured decode rate B when "
      "`accept_length / (draft + verify compute + all-reduces x latency) > B`, so at the measured accept length "
      "it pays while one all-reduce (at the verify's message size) takes less than "
      "`(accept_length / B - draft - verify compute) / all-reduces`. The accept length needed at a latency L is "
      "`B x (draft + verify compute + all-reduces x L)`. Against its own counterpart on the same link both sides pay "
      "L (the baseline on every token, speculation once per accepted run), so there speculation can gain as the "
      "link slows. The draft's own all-reduces (one draft layer: 2 a step) stay in its measured time; only the "
      "target forward's are priced at L.\n\n")
    for pt in points:
        latencies = {r["backend"]: r["parts"].latency_us for r in pt["rows"] if not r["comm_absent"]}
        w(f"**{pt['point']}** (baseline `{pt['baseline']}`, decode {pt['baseline_tok_s']:.1f} tok/s)\n\n")
        if all(r["comm_absent"] for r in pt["rows"]):
            w("Communication is absent here (TP=1: no all-reduce), so there is no latency budget: the accept "
              "length needed is fixed by draft + verify compute alone.\n\n")
        head = ["config", "accept length", "budget: one all-reduce below (us)",
                "measured latency us: micro-benchmark / in the server",
                *[f"accept needed at {b} ({lat:.1f} us)" for b, lat in latencies.items()],
                "against its own baseline"]
        w(table_head(head))
        for r in pt["rows"]:
            p = r["parts"]
            if r["comm_absent"]:
                budget = f"no all-reduce (accept needed {accept_needed(p, pt['baseline_tok_s']):.2f})"
            elif r["budget_us"] is None:
                # annotate() sets no budget for a row without a baseline decode rate of its own
                # (e.g. a workload the baseline did not run), or with no all-reduce to price.
                budget = "n/a (no baseline decode rate for this row)"
            elif r["budget_us"] < 0:
                budget = "none: draft + verify compute alone exceed accept / B"
            else:
                budget = f"{r['budget_us']:.1f}"
            needed = [f"{accept_needed(p, pt['baseline_tok_s'], lat if not r['comm_absent'] else None):.2f}"
                      for lat in latencies.values()]
            own_text = "n/a"
            own_model = (r["own"] or {}).get("model") or {}
            if "parts" in own_model and not r["comm_absent"]:
                cross = own_crossover(p, own_model["parts"])
                own_text = _crossover_text(cross)
            elif "parts" in own_model:
                own_text = ("pays" if predicted_tok_s(p) > predicted_tok_s(own_model["parts"]) else "does not pay") + \
                    " (no communication)"
            inside_cell = "n/a" if r["in_server_us"] is None else f"{r['in_server_us']:.1f}"
            cells = [r["label"], f"{r['accept']:.2f}", budget,
                     "n/a (none)" if r["comm_absent"] else f"{p.latency_us:.1f} / {inside_cell}", *needed, own_text]
            w(table_row(cells))
        w("\n")
        for r in pt["rows"]:
            if not r["comm_absent"] and r["budget_us"] is not None and r["budget_us"] >= 0:
                lat, inside = r["parts"].latency_us, r["in_server_us"]
                line = (f"- `{r['label']}`: speculation pays here when an all-reduce of the verify's size takes less "
                        f"than {r['budget_us']:.1f} us (the micro-benchmark measured {lat:.1f} us: "
                        f"{'within' if lat < r['budget_us'] else 'over'} the budget")
                if inside is not None:
                    line += (f"; in the server one took {inside:.1f} us, "
                             f"{'within' if inside < r['budget_us'] else 'over'} it")
                line += ")."
                if abs(r["residual"]["residual_share"]) > RESIDUAL_LARGE:
                    line += (f" The model misses {r['residual']['residual_share']:+.0%} of this cycle (see the cost "
                             "model above): the budget holds for the micro-benchmark's latency only as far as the "
                             "model does.")
                w(line + "\n")
        w("\n")
    if plot_rel:
        w(f"![budget]({plot_rel})\n\n")
    return out.getvalue()


def _crossover_text(cross: Mapping[str, Any]) -> str:
    if cross["pays"] in ("always", "never"):
        return "pays at any latency" if cross["pays"] == "always" else "pays at no latency"
    side = "more" if cross["pays"] == "above" else "less"
    return f"pays when one all-reduce takes {side} than {cross['latency_us']:.1f} us"


def verify_sizes(rows: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Bytes of the verify's all-reduce at every point of each configuration (where the micro-benchmark ran)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        bench = _bench(r, rows)
        size = verify_bytes(r, bench) if bench is not None else None
        if size is not None:
            out.setdefault(r["config"], []).append(size)
    return {k: sorted(set(v)) for k, v in out.items()}
