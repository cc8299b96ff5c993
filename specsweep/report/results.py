"""report.md's results and what follows them, rendered from report.json: the baseline, when speculation
pays, the results table, the methods, output agreement, acceptance per draft position, the verify-path
profile, the configurations, failures, warnings and absent metrics."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.formulas import NOT_COMPARABLE
from specsweep.analysis.metrics import BASELINE_TOK_S, METRICS, PRIMARY_VERDICT, SPEC_ONLY_METRICS, VERDICT_METRICS
from specsweep.analysis.profiling import COMM_SHARE_TOLERANCE
from specsweep.analysis.rows import row_label
from specsweep.contracts.acceptance import SIMULATE_ACC_LEN
from specsweep.contracts.vocabulary import Expect, Status, Verdict
from specsweep.records import DEFAULT_POINT
from specsweep.report.linked import Context
from specsweep.report.markdown import OUTPUTS_DIFFER, table_head, table_row
from specsweep.report.markdown import f as _f
from specsweep.report.markdown import pct as _pct

#: The output-agreement metrics (their absence is explained in their own section).
PAIRED_METRICS = frozenset(name for name, m in METRICS.items() if m.kind == "paired")


def agreement_cell(r: dict[str, Any]) -> str:
    """The 'outputs vs baseline' cell: the match share, or why there is none."""
    a = r.get("agreement") or {}
    if r["verdict"] == Verdict.BASELINE:
        return "baseline"
    if a.get("match_share") is not None:
        prefix = r.get("output_common_prefix")
        text = f"{a['match_share']:.0%} ({a['matching']}/{a['paired']})"
        if prefix is not None:
            text += f", prefix {prefix:.1f}"
        return f"**{OUTPUTS_DIFFER}**: {text}" if a.get("flagged") else text
    reason = a.get("reason") or r["absent"].get("output_match_share") or "n/a"
    if reason.startswith(NOT_COMPARABLE):
        return "not comparable (" + ("simulated acceptance" if "simulated" in reason else "sampling") + ")"
    return "n/a"


def _expected_failure_note(r: dict[str, Any]) -> str:
    """A known-failing case is expected only when its own failure signature matched (summary ``expected_failure``)."""
    ef = r.get("expected_failure")
    if r["expect"] != Expect.FAILURE or r["status"] != Status.FAILED or ef is None:
        return ""
    if ef.get("expected"):
        return f" (expected: the known failure, {ef['matched'][0]['signature']} in the log)"
    seen = ", ".join(f["signature"] for f in ef.get("seen") or []) or "none of the known failure lines"
    return (f" (SURPRISE failure: known-failing case, but its own signature ({', '.join(ef.get('wanted') or [])}) "
            f"is not in the log; seen: {seen})")


def comparison_text(v: dict[str, Any] | None, smallest_effect: float | None = None) -> str:
    """A verdict with the interval and the threshold it was judged by: ``faster (x1.595 [1.514, 1.682], +-5.3 %)``;
    a difference not called that the design could not have seen says what would (``smallest_effect``)."""
    if not v:
        return "n/a"
    if "ratio" not in v:
        return v["verdict"] + (f" ({v['note']})" if v.get("note") else "")
    lo, hi = v["ratio_ci"]
    text = f"{v['verdict']} (x{v['ratio']:.3f} [{lo:.3f}, {hi:.3f}], called beyond +-{v['threshold'] * 100:.1f} %"
    if v.get("family"):
        text += f", Holm over {v['family']}"
    text += ")"
    if v["verdict"] == Verdict.NO_DIFFERENCE and v.get("detectable") is not None:
        text += f"; sees >= {_pct(v['detectable'])} (80 % power)"
    return text


def _verdict_cell(r: dict[str, Any], smallest_effect: float | None = None) -> str:
    v = r.get("comparison")
    if v is None or "ratio" not in v:
        return r["verdict"] if v is None else comparison_text(v)
    text = comparison_text(v)
    if r.get("launches_needed") is not None and v["verdict"] == Verdict.NO_DIFFERENCE:
        text += f"; {r['launches_needed']} launches each would see {_pct(smallest_effect)}"
    return text


def _secondary_cell(r: dict[str, Any], metric: str, value: str) -> str:
    v = r["comparisons"].get(metric)
    if r["verdict"] == Verdict.BASELINE or v is None or "ratio" not in v:
        return value
    return f"{value}: {v['verdict']} (x{v['ratio']:.3f}, +-{v['threshold'] * 100:.1f} %)"


def baseline_section(ctx: Context) -> str:
    base, baseline = ctx.report.base, ctx.report.baseline
    if base is None:
        return ("Baseline: **none** "
                f"({'not named in config.yaml' if baseline is None else f'{baseline!r} has no summary'}); "
                "no verdicts and no break-even.\n\n")
    return (f"Baseline: **{base['config']}** (status {base['status']}): baseline tok/s = its decode rate, "
            f"{_f(base[BASELINE_TOK_S])} tok/s (defined under *Methods*); its end-to-end median "
            f"{_f(base['tok_s_median'])} tok/s (TTFT included) is judged on its own.\n\n")


def when_pays_section(ctx: Context) -> str:
    return ("## When speculation pays\n\n"
            "Single-stream throughput of speculative decoding is `accept_length / cycle_time_s` (a cycle = the draft "
            "steps + one verify), so speculation pays only when\n\n"
            f"    {ctx.report.data['method']['break_even']}\n\n"
            "Break-even accept length = cycle time x baseline tok/s (e.g. 0.030 s x 82 tok/s = 2.46). "
            "Here cycle time = "
            "decode time / spec_verify_ct measured by the client (decode time = last token chunk - first token chunk; "
            "the first token comes from prefill), and baseline tok/s = the baseline's decode rate (the geometric mean "
            "over its launches of each launch's median per-request decode tok/s), TTFT excluded because the cycle time "
            "counts decode only. The same number is the baseline of the verdicts, of `pays?` and of every plot.\n\n")


def _decode_cell(r: Mapping[str, Any]) -> str:
    """``74.0 [41.9, 130.6]``: the decode rate with its interval."""
    tok = _f(r[BASELINE_TOK_S])
    if r[BASELINE_TOK_S] is not None and r["decode_rate_ci_low"] is not None:
        tok += f" [{r['decode_rate_ci_low']:.1f}, {r['decode_rate_ci_high']:.1f}]"
    return tok


def verdicts_section(ctx: Context) -> str:
    """The verdicts at a glance, under the deploy line and the controls: each row's decode rate and its verdict
    against the baseline (the first columns of the Results table, in the same words)."""
    rows, baseline, smallest_effect = ctx.report.rows, ctx.report.baseline, ctx.report.data["smallest_effect"]
    if not rows:
        return ""
    out = io.StringIO()
    out.write("## Verdicts\n\n")
    out.write(table_head(["config", "status", "decode tok/s [95% CI]",
                          "decode verdict vs baseline (ratio [CI], threshold)"]))
    for r in rows:
        out.write(table_row([f"**{row_label(r)}**" if r["config"] == baseline else row_label(r), r["status"],
                             _decode_cell(r), _verdict_cell(r, smallest_effect)]))
    out.write("\nEvery column of every row: the *Results* table of the report.\n\n")
    return out.getvalue()


def results_section(ctx: Context) -> str:
    rows, baseline, smallest_effect = ctx.report.rows, ctx.report.baseline, ctx.report.data["smallest_effect"]
    out = io.StringIO()
    w = out.write
    w("## Results\n\n")
    w("The verdict that answers \"does this configuration make decoding faster\" is on the decode rate (per request: "
      "tokens after the first / decode time): speculation and communication change decode, while prefill is the "
      "same work with or without them. End-to-end tok/s and TTFT are judged on their own, each against the "
      "baseline's, by the same method.\n\n")
    secondary = {label: metric for metric, label, _ in VERDICT_METRICS if metric != PRIMARY_VERDICT}
    head = ["config", "status", "decode tok/s [95% CI]", "decode verdict vs baseline (ratio [CI], threshold)",
            "cycle ms", "accept length", "break-even accept", "pays?", "end-to-end tok/s: verdict",
            "TTFT p50 / p99 ms: verdict", "verify ms", "comm share", "ITL p50/p99 ms", "outputs vs baseline",
            "ok/err/inc"]
    w(table_head(head))
    for r in rows:
        tok = _decode_cell(r)
        pays = "n/a" if r["speculation_pays"] is None else ("yes" if r["speculation_pays"] else "no")
        be = (_f(r["break_even_accept_length"], "{:.2f}") if r["break_even_accept_length"] is not None
              else f"n/a ({r['break_even_why']})")
        cells = [
            f"**{row_label(r)}**" if r["config"] == baseline else row_label(r), r["status"], tok,
            _verdict_cell(r, smallest_effect), _f(r["cycle_time_ms"], "{:.2f}"), _f(r["accept_length"], "{:.2f}"),
            be, pays, _secondary_cell(r, secondary.get("end-to-end", ""), _f(r["tok_s_median"])),
            _secondary_cell(r, secondary.get("TTFT", ""), f"{_f(r['ttft_p50_ms'])} / {_f(r['ttft_p99_ms'])}"),
            _f(r["verify_ms"], "{:.2f}"),
            _f(r["comm_share"] and r["comm_share"] * 100, "{:.0f}%") if r["comm_share"] is not None else "n/a",
            f"{_f(r['itl_p50_ms'])} / {_f(r['itl_p99_ms'])}", agreement_cell(r),
            f"{r['n_ok']}/{r['n_error']}/{r['n_incomplete']}",
        ]
        w(table_row(cells))
    w("\n`n/a` = the metric could not be computed (never a zero); reasons under *Absent metrics*. "
      "Only measured requests with status ok enter the metrics; ok/err/inc counts all measured requests. "
      "A configuration with several workload points has a row per point (`config @ point`), compared with the "
      "baseline at the same point. *threshold*: a ratio beyond 1 +- it is called (the half-width of the 95 % "
      "interval); *sees >= X*: the smallest difference this design detects with 80 % power.\n\n")
    return out.getvalue()


def methods_section(ctx: Context) -> str:
    method = ctx.report.data["method"]
    ci = method["end_to_end_ci"]
    out = io.StringIO()
    w = out.write
    w("## Methods\n\n")
    w(f"- decode tok/s (the primary verdict's statistic and baseline tok/s): {METRICS[BASELINE_TOK_S].definition}; "
      f"per request {METRICS[PRIMARY_VERDICT].definition}.\n")
    w("- end-to-end tok/s: per-request output throughput = completion tokens (server-reported) / end-to-end "
      "latency (TTFT included), the median over all measured requests of all repeats (its CI: "
      f"{ci['method']}, {ci['level']:.0%}, {ci['resamples']} resamples, seeded with the workload seed). At "
      "concurrency > 1 see also `aggregate_tok_s_median` in summary.csv (median over repeats of total tokens / "
      "wall time).\n")
    w(f"- Percentiles: {method['percentiles']}.\n")
    w(f"- Verdict (decode, end-to-end and TTFT alike, each on its own samples): {method['verdict']}.\n")
    w(f"- Drift over start time (decode rate): {method['trend']}.\n")
    w(f"- Power: {method['power']}.\n")
    w("- ITL = gap between consecutive chunks that carried tokens (several tokens per chunk under speculation); "
      "TPOT = decode time / (completion tokens - 1).\n")
    w("- accept length = sum(completion tokens) / sum(spec_verify_ct) over this run's measured requests "
      "(never a server-lifetime counter); verify ms and comm share are engine-reported (`timing`) per cycle.\n")
    w(methods_lines(method["crossing"]) + "\n")
    return out.getvalue()


def configurations_section(ctx: Context) -> str:
    described = list({r["config"]: r for r in ctx.report.rows if r["description"]}.values())
    if not described:
        return ""
    return "## Configurations\n\n" + "".join(f"- **{r['config']}**: {r['description']}\n" for r in described) + "\n"


def failures_section(ctx: Context) -> str:
    out = io.StringIO()
    w = out.write
    problems = ctx.report.data["failures"]
    w("## Failed and fallen-back configurations\n\n")
    if not problems:
        w("None.\n\n")
    for r in problems:
        w(f"### {row_label(r)}: {r['status']}{_expected_failure_note(r)}\n\n")
        w(f"- stage: `{r['stage']}`\n- reason: `{r['reason']}`\n- detail: {r['detail']}\n\n")
        if r["log_tail"]:
            tail = r["log_tail"] if isinstance(r["log_tail"], str) else "\n".join(map(str, r["log_tail"]))
            w("```\n" + tail.rstrip().replace("```", "'''") + "\n```\n\n")
    return out.getvalue()


def warnings_section(ctx: Context) -> str:
    entries = ctx.report.data["warnings"]
    if not entries:
        return ""
    return "## Warnings\n\n" + "".join(f"- {line}\n" for line in warning_lines(entries)) + "\n"


def absent_section(ctx: Context) -> str:
    out = io.StringIO()
    w = out.write
    w("## Absent metrics\n\n")
    any_absent = False
    for r in ctx.report.rows:
        absent = {k: v for k, v in r["absent"].items()
                  if (r["spec"] or k not in SPEC_ONLY_METRICS) and k not in PAIRED_METRICS}
        if r["status"] == Status.FAILED or not absent:
            continue
        any_absent = True
        items = "; ".join(f"{k}: {v}" for k, v in sorted(absent.items()))
        w(f"- {row_label(r)}: {items}\n")
    if not any_absent:
        w("None.\n")
    w("\n(Speculation-only metrics are not listed for configurations without a speculative algorithm; "
      "output agreement has its own section.)\n")
    return out.getvalue()


def plots_section(ctx: Context) -> str:
    out = io.StringIO()
    w = out.write
    w("\n## Plots\n\n")
    for key, name in ctx.plot_files.items():
        if ctx.figures.get(key) is None:
            w(f"![{name}]({ctx.plots_rel}/{name})\n")
    missing = {ctx.plot_files[k]: why for k, why in ctx.figures.items() if why is not None}
    if missing:
        w("\nNot drawn (nothing to draw, so no file):\n\n")
        for name, why in missing.items():
            w(f"- {name}: {why}\n")
    return out.getvalue()


def agreement_section(ctx: Context) -> str:
    rows = ctx.report.rows
    out = io.StringIO()
    w = out.write
    threshold = next((r["agreement"].get("threshold") for r in rows if r["agreement"].get("threshold") is not None),
                     None)
    w("## Output agreement with the baseline\n\n")
    w(f"Under greedy decoding neither speculation nor the communication setup may change the output. Each measured "
      f"request is paired with the baseline's request of the same prompt (same endpoint, prompt and output length, "
      f"so the same dataset, seed and lengths); *match* = {METRICS['output_match_share'].definition}; *prefix* = "
      f"{METRICS['output_common_prefix_tokens'].definition}. Below "
      f"{'the threshold' if threshold is None else f'{threshold:.0%}'} a configuration is marked "
      f"**{OUTPUTS_DIFFER}** and failed (reason `outputs_differ`): it may be fast, but it computes something "
      f"else. Simulated acceptance (`{SIMULATE_ACC_LEN}`) and sampling make outputs not comparable.\n\n")
    for r in rows:
        if r.get("verdict") == Verdict.BASELINE:
            continue
        a = r["agreement"]
        if a.get("match_share") is not None:
            flag = f" **{OUTPUTS_DIFFER}**" if a.get("flagged") else ""
            prefix = r.get("output_common_prefix")
            prefix_text = "" if prefix is None else f", mean common prefix {prefix:.1f} tokens"
            extra = f"; {a['unpaired']} requests had no partner" if a.get("unpaired") else ""
            w(f"- {row_label(r)}:{flag} {a['matching']} of {a['paired']} paired requests match "
              f"({a['match_share']:.0%}){prefix_text}{extra}\n")
        else:
            w(f"- {row_label(r)}: {a.get('reason') or r['absent'].get('output_match_share') or 'n/a'}\n")
    w("\n")
    return out.getvalue()


def acceptance_section(ctx: Context) -> str:
    spec = [r for r in ctx.report.rows if r["spec"] and r["status"] != Status.FAILED or r.get("accept_histogram")]
    if not spec:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Acceptance per draft position\n\n")
    w(f"Histogram: {METRICS['accept_histogram'].definition}. Rate: {METRICS['accept_rate_by_position'].definition}. "
      "From the engine's per-request `spec_correct_drafts_histogram` (SGLang 0.5.23: `meta_info` on /generate, "
      "`sglext.spec_tokens_details` on the OpenAI endpoints).\n\n")
    w("| config | verify steps | accepted drafts 0, 1, 2, ... (share of verify steps) | rate by position 1, 2, ... |\n")
    w("|---|---|---|---|\n")
    for r in spec:
        h, rates = r.get("accept_histogram"), r.get("accept_rates")
        if h is None:
            why = r["absent"].get("accept_histogram", "n/a")
            w(f"| {row_label(r)} | n/a | n/a ({why}) | n/a |\n")
            continue
        total = sum(h)
        shares = ", ".join(f"{n / total:.0%}" for n in h) if total else "n/a"
        rate_text = ", ".join(f"{v:.2f}" for v in rates) if isinstance(rates, list) else "n/a"
        w(f"| {row_label(r)} | {int(total)} | {shares} | {rate_text} |\n")
    w("\n")
    return out.getvalue()


def profile_section(ctx: Context) -> str:
    """The verify-path profile: the trace's split beside the engine's and the micro-benchmark's prediction."""
    profiled = [r for r in ctx.report.rows if r.get("profile")]
    if not profiled:
        return ""
    out = io.StringIO()
    w = out.write
    w("## Verify-path profile\n\n")
    w("For configurations with `profile.enabled`: a PyTorch profiler trace of a few requests of the same workload, "
      "taken after the measured repeats (rank 0; verify forwards, decode forwards without speculation), and an "
      "all-reduce micro-benchmark at the verify's message size run before the server started, in the same "
      "environment (the reference engine times it between its model's layers, SGLang in a loop alone). `engine` = "
      "the engine's own timing of the same profiled requests, where it reports one; "
      "`bench x AR` = micro-benchmark latency x all-reduces per verify, its prediction of the verify's "
      "communication time: the gap to the trace's comm ms is what the micro-benchmark does not see (rank skew, "
      "interleaving with compute, for a loop alone). The all-reduce check compares the trace's count per verify "
      "with layers x 2 "
      "(+ SGLang's embedding all-reduce): 122 for Kimi-K2.5's 61 layers.\n\n")
    head = ["config", "stage", "verify ms", "comm ms", "compute ms", "idle ms", "comm share trace / engine",
            "all-reduces / verify (expected)", "implementation", "rank skew ms", "bench us x AR = ms", "profile s"]
    w(table_head(head))
    for r in profiled:
        p = r["profile"]
        agree = p.get("agreement") or {}
        share = _f(r["trace_comm_share"] and r["trace_comm_share"] * 100, "{:.0f}%") \
            if r["trace_comm_share"] is not None else "n/a"
        if agree.get("engine_comm_share") is not None:
            share += f" / {agree['engine_comm_share'] * 100:.0f}%" + ("" if agree["within_tolerance"] else " (!)")
        check = p.get("allreduce_check") or {}
        ar = _f(r["trace_allreduce_per_verify"], "{:.0f}")
        if check.get("expected") is not None:
            ar += f" ({check['expected']}{'' if check.get('matches') else ' (!)'})"
        bench = (p.get("bench") or {})
        bench_cell = (f"{bench['median_us']:.1f} x {r['trace_allreduce_per_verify']:.0f} = "
                      f"{r['allreduce_bench_ms_per_verify']:.2f}"
                      if r["allreduce_bench_ms_per_verify"] is not None else
                      f"n/a ({bench.get('absent', 'no count')})")
        stage = p.get("status") if "absent" not in p else f"{p.get('status')}: {p['absent']}"
        cells = [r["config"], stage, _f(r["trace_verify_ms"], "{:.2f}"), _f(r["trace_verify_comm_ms"], "{:.2f}"),
                 _f(r["trace_verify_compute_ms"], "{:.2f}"), _f(r["trace_verify_idle_ms"], "{:.2f}"), share, ar,
                 r["trace_allreduce_impl"] or "n/a", _f(r["trace_rank_skew_ms"], "{:.2f}"), bench_cell,
                 _f(r["profile_seconds"], "{:.1f}")]
        w(table_row(cells))
    w("\n(!) = outside the stated tolerance (comm share: +-"
      f"{COMM_SHARE_TOLERANCE:.2f} absolute), or a count other than expected; see the configuration's warnings. "
      "The trace's ms include the profiler's own overhead (on the CPU every operator is recorded), so compare "
      "shares, and the trace with the engine for the same profiled requests.\n\n")
    return out.getvalue()


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_LAUNCH_PREFIX = re.compile(r"^launch (?P<launch>[a-z0-9]+): ")
_SLOT = "\x00"  # where a number was, in a warning's template


def warning_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's warnings (report.json's ``warnings``: config, point, message), one line per kind: the same
    message with other numbers (e.g. the host's load during each launch) is one line, with the range of each
    number, how often it was seen and where (configuration, its points and launches); a message seen once stays
    as it is."""
    groups: dict[str, list[tuple[Mapping[str, Any], str | None, list[float], str]]] = {}
    for r in entries:
        msg = r["message"]
        m = _LAUNCH_PREFIX.match(msg)
        text = msg[m.end():] if m else msg
        groups.setdefault(_NUMBER.sub(_SLOT, text), []).append(
            (r, m["launch"] if m else None, [float(x) for x in _NUMBER.findall(text)], msg))
    out = []
    for template, seen in groups.items():
        if len(seen) == 1:
            r, _, _, msg = seen[0]
            out.append(f"{row_label(r)}: {msg}")
            continue
        values = iter(zip(*(nums for _, _, nums, _ in seen)))

        def span(_: re.Match) -> str:
            column = next(values)
            lo, hi = min(column), max(column)
            return _g(lo) if lo == hi else f"{_g(lo)}-{_g(hi)}"

        where: dict[str, list[str]] = {}
        for r, launch, _, _ in seen:
            place = " ".join(p for p in ("" if r["point"] == DEFAULT_POINT else r["point"],
                                         f"launch {launch}" if launch else "") if p)
            where.setdefault(r["config"], []).append(place)
        places = "; ".join(c + (f" ({', '.join(p for p in ps if p)})" if any(ps) else "") for c, ps in where.items())
        out.append(f"{len(seen)} x {re.sub(_SLOT, span, template)}: {places}")
    return out


def _g(value: float) -> str:
    return f"{value:g}"


def methods_lines(crossing_method: str) -> str:
    return ("- Launches: the unit of replication; each launch of a configuration is reduced to its median, a side "
            "of one launch still carries the launch variance the point's model measured over all its launches (with "
            "rounds as blocks: what is left once each round's shared speed is removed), so a configuration measured "
            "once is judged as noisily as the sweep's replicated launches showed.\n"
            f"- Break-even crossing: {crossing_method}.\n")
