"""Metrics computed from raw request records, one small function each (``analysis.metrics.METRICS`` lists them).

Every function states its formula and unit (the profile-kind metrics, read from
the summary's profile section rather than from records, are ``profile_formulas``).
A value that cannot be computed
is returned as ``Absent(reason)``, never as 0. Only records with
``phase == "measured"`` and ``status == "ok"`` of the run being summarised
enter the metrics (``analysis.compute.select_measured``); the others are counted.

Time stamps are ``time.perf_counter_ns`` integers from the client. A
*token chunk* is a stream chunk that carried at least one new token
(``chunk_tokens`` > 0, or ``None`` = the endpoint does not say, which an
OpenAI text delta with non-empty text is); chunks with 0 new tokens (e.g. a
final meta-only chunk) do not move TTFT or ITL.

First token convention: the first token chunk ends the prefill (TTFT). The
decode time of a request is ``t_last_token_chunk - t_first_token_chunk``
(= e2e - TTFT with e2e measured to the last token chunk), and
``spec_verify_ct`` verify cycles are assumed to lie in it: the first token
is produced by the prefill forward, not by a verify. When the first chunk
already carries several tokens (prefill and a verify merged), that verify's
time is attributed to TTFT and the cycle time is slightly underestimated.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, NamedTuple

from specsweep.analysis.stats import launch_estimate
from specsweep.records import NS_PER_S

NS_PER_MS = 1e6


class Absent(NamedTuple):
    """A metric that cannot be computed, and why."""

    reason: str


Value = float | Absent


def _token_chunks(rec: dict[str, Any]) -> list[int]:
    """Arrival times (ns) of the chunks that carried new tokens."""
    return [t for t, n in zip(rec["chunk_ns"], rec["chunk_tokens"]) if n is None or n > 0]


# --------------------------------------------------------------- per request


def ttft_ms(rec: dict[str, Any]) -> Value:
    """Time to first token, ms: ``(t_first_token_chunk - send_ns) / 1e6``."""
    chunks = _token_chunks(rec)
    if not chunks:
        return Absent("no chunk carried a token")
    return (chunks[0] - rec["send_ns"]) / NS_PER_MS


def itl_ms(rec: dict[str, Any]) -> list[float]:
    """Inter-chunk latencies, ms: gaps between consecutive token chunks.

    With speculation a chunk carries several tokens, so this is the latency
    between deliveries as the user sees it, not per token (see ``tpot_ms``).
    A request with fewer than two token chunks contributes no gap.
    """
    chunks = _token_chunks(rec)
    return [(b - a) / NS_PER_MS for a, b in zip(chunks, chunks[1:])]


def decode_ms(rec: dict[str, Any]) -> Value:
    """Decode time, ms: ``(t_last_token_chunk - t_first_token_chunk) / 1e6`` (= e2e - TTFT)."""
    chunks = _token_chunks(rec)
    if not chunks:
        return Absent("no chunk carried a token")
    return (chunks[-1] - chunks[0]) / NS_PER_MS


def tpot_ms(rec: dict[str, Any]) -> Value:
    """Time per output token after the first, ms: ``decode_ms / (completion_tokens - 1)``."""
    ct = rec.get("completion_tokens")
    if ct is None:
        return Absent("server reported no completion_tokens")
    if ct < 2:
        return Absent(f"completion_tokens = {ct} < 2")
    d = decode_ms(rec)
    return d if isinstance(d, Absent) else d / (ct - 1)


def e2e_ms(rec: dict[str, Any]) -> Value:
    """End-to-end latency, ms: ``(end_ns - send_ns) / 1e6``, end = the ``[DONE]`` terminator."""
    if rec.get("end_ns") is None:
        return Absent("no end time")
    return (rec["end_ns"] - rec["send_ns"]) / NS_PER_MS


def output_tok_s(rec: dict[str, Any]) -> Value:
    """Per-request output throughput, tok/s: ``completion_tokens / e2e_s`` (includes TTFT)."""
    ct = rec.get("completion_tokens")
    if ct is None:
        return Absent("server reported no completion_tokens")
    e2e = e2e_ms(rec)
    if isinstance(e2e, Absent):
        return e2e
    if e2e <= 0:
        return Absent("non-positive e2e latency")
    return ct / (e2e / 1e3)


def decode_tok_s(rec: dict[str, Any]) -> Value:
    """Decode rate, tok/s: ``(completion_tokens - 1) / decode_s`` = 1000 / TPOT_ms."""
    t = tpot_ms(rec)
    if isinstance(t, Absent):
        return t
    if t <= 0:
        return Absent("decode time is 0 (all tokens in one chunk)")
    return 1e3 / t


def accept_length(rec: dict[str, Any]) -> Value:
    """Accept length of one request, tokens/verify: ``completion_tokens / spec_verify_ct``."""
    ct, vc = rec.get("completion_tokens"), rec.get("spec_verify_ct")
    if ct is None:
        return Absent("server reported no completion_tokens")
    if vc is None:
        return Absent("server reported no spec_verify_ct")
    if vc <= 0:
        return Absent(f"spec_verify_ct = {vc}")
    return ct / vc


def cycle_time_ms(rec: dict[str, Any]) -> Value:
    """Speculation cycle time, ms: ``decode_ms / spec_verify_ct`` (draft steps + one verify)."""
    vc = rec.get("spec_verify_ct")
    if vc is None:
        return Absent("server reported no spec_verify_ct")
    if vc <= 0:
        return Absent(f"spec_verify_ct = {vc}")
    d = decode_ms(rec)
    return d if isinstance(d, Absent) else d / vc


# ------------------------------------------------------------------ aggregate


def aggregate_output_tok_s(records: Sequence[dict[str, Any]]) -> Value:
    """Aggregate output throughput of one round, tok/s:
    ``sum(completion_tokens) / (max(end_ns) - min(send_ns)) * 1e9``."""
    if not records:
        return Absent("no ok requests")
    if any(r.get("completion_tokens") is None for r in records):
        return Absent("a request lacks completion_tokens")
    span = max(r["end_ns"] for r in records) - min(r["send_ns"] for r in records)
    if span <= 0:
        return Absent("non-positive time span")
    return sum(r["completion_tokens"] for r in records) / (span / NS_PER_S)


def accept_length_weighted(records: Sequence[dict[str, Any]]) -> Value:
    """Run accept length, tokens/verify: ``sum(completion_tokens) / sum(spec_verify_ct)``.

    Absent unless every request reports both counts (a partial sum would be a
    silently different population).
    """
    if not records:
        return Absent("no ok measured requests")
    lacking = sum(r.get("spec_verify_ct") is None or r.get("completion_tokens") is None for r in records)
    if lacking:
        return Absent(f"{lacking} of {len(records)} requests lack spec_verify_ct or completion_tokens")
    verify = sum(r["spec_verify_ct"] for r in records)
    if verify <= 0:
        return Absent("sum of spec_verify_ct is 0")
    return sum(r["completion_tokens"] for r in records) / verify


def cycle_time_weighted_ms(records: Sequence[dict[str, Any]]) -> Value:
    """Run cycle time, ms: ``sum(decode_ms) / sum(spec_verify_ct)``.

    Requests with 0 completion tokens had no decode and are left out of both
    sums; every other request must report ``spec_verify_ct``.
    """
    decoding = [r for r in records if r.get("completion_tokens")]
    if not decoding:
        return Absent("no ok measured request produced tokens")
    lacking = sum(r.get("spec_verify_ct") is None for r in decoding)
    if lacking:
        return Absent(f"{lacking} of {len(decoding)} requests lack spec_verify_ct")
    decode = [decode_ms(r) for r in decoding]
    if any(isinstance(d, Absent) for d in decode):
        return Absent("a request with completion tokens had no token chunk")
    verify = sum(r["spec_verify_ct"] for r in decoding)
    if verify <= 0:
        return Absent("sum of spec_verify_ct is 0")
    return sum(decode) / verify  # type: ignore[arg-type]


def decode_tok_s_weighted(records: Sequence[dict[str, Any]]) -> Value:
    """Run decode rate, tok/s: ``sum(completion_tokens - 1) / sum(decode_s)`` over requests
    with at least 2 tokens. The same run-total aggregation as ``accept_length_weighted``
    and ``cycle_time_weighted_ms``, so that ``accept / cycle`` and this rate agree."""
    if any(r.get("completion_tokens") is None for r in records):
        return Absent("a request lacks completion_tokens")
    decoding = [r for r in records if r["completion_tokens"] >= 2]
    if not decoding:
        return Absent("no ok measured request produced 2 or more tokens")
    decode = [decode_ms(r) for r in decoding]
    if any(isinstance(d, Absent) for d in decode):
        return Absent("a request with completion tokens had no token chunk")
    total = sum(decode)  # type: ignore[arg-type]
    if total <= 0:
        return Absent("total decode time is 0")
    return sum(r["completion_tokens"] - 1 for r in decoding) / (total / 1e3)


def decode_rate(records: Sequence[dict[str, Any]]) -> Value:
    """A configuration's decode rate, tok/s: the geometric mean over its launches (records grouped by
    ``run_id``, one per launch) of each launch's median per-request ``decode_tok_s``; one launch: that
    median (``stats.launch_estimate``). The statistic the verdicts compare, and the baseline tok/s
    of the break-even (``BASELINE_TOK_S``)."""
    values, runs = [], []
    for r in records:
        v = decode_tok_s(r)
        if not isinstance(v, Absent):
            values.append(v)
            runs.append(r.get("run_id"))
    if not values:
        return Absent("no ok measured request had a decode time (2 or more tokens in 2 or more chunks)")
    est = launch_estimate(values, runs)
    return Absent("no positive decode rate") if est is None else est


def _timing_records(records: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]] | Absent:
    if not records:
        return Absent("no ok measured requests")
    missing = sum(not isinstance(r.get("timing"), dict) or r["timing"].get(key) is None for r in records)
    if missing == len(records):
        return Absent(f"engine reported no timing.{key}")
    if missing:
        return Absent(f"{missing} of {len(records)} requests lack timing.{key}")
    return list(records)


def timing_per_cycle_ms(records: Sequence[dict[str, Any]], key: str) -> Value:
    """Engine-reported time per speculation cycle, ms:
    ``sum(timing[key]) / sum(spec_verify_ct) * 1e3`` for ``key`` in
    ``draft_s``, ``verify_s``, ``verify_comm_s``."""
    recs = _timing_records(records, key)
    if isinstance(recs, Absent):
        return recs
    if any(r.get("spec_verify_ct") is None for r in recs):
        return Absent("a request lacks spec_verify_ct")
    verify = sum(r["spec_verify_ct"] for r in recs)
    if verify <= 0:
        return Absent("sum of spec_verify_ct is 0")
    return sum(r["timing"][key] for r in recs) / verify * 1e3


def verify_compute_per_cycle_ms(records: Sequence[dict[str, Any]]) -> Value:
    """Verify compute per cycle, ms: ``verify_ms_per_cycle - verify_comm_ms_per_cycle``
    (communication is part of the verify time)."""
    v = timing_per_cycle_ms(records, "verify_s")
    c = timing_per_cycle_ms(records, "verify_comm_s")
    if isinstance(v, Absent):
        return v
    if isinstance(c, Absent):
        return c
    if c > v:
        return Absent(f"verify_comm ({c:.3f} ms) exceeds verify ({v:.3f} ms): inconsistent timing")
    return v - c


def _timing_ratio(records: Sequence[dict[str, Any]], numerator: str, denominator: str) -> Value:
    """``sum(timing.<numerator>) / sum(timing.<denominator>)``; absent when either is missing or the sum is 0."""
    for key in (denominator, numerator):
        recs = _timing_records(records, key)
        if isinstance(recs, Absent):
            return recs
    total = sum(r["timing"][denominator] for r in records)
    if total <= 0:
        return Absent(f"sum of timing.{denominator} is 0")
    return sum(r["timing"][numerator] for r in records) / total


def verify_comm_share(records: Sequence[dict[str, Any]]) -> Value:
    """Share of verify time spent communicating, fraction 0..1:
    ``sum(timing.verify_comm_s) / sum(timing.verify_s)``."""
    return _timing_ratio(records, "verify_comm_s", "verify_s")


def target_forward_ms(records: Sequence[dict[str, Any]], key: str = "verify_s") -> Value:
    """Engine-reported time per target forward (a verify under speculation, a decode step without), ms:
    ``sum(timing[key]) / sum(timing.forward_ct) x 1e3`` for ``key`` in ``verify_s``, ``verify_comm_s``.
    Unlike the per-cycle metrics it needs no ``spec_verify_ct``, so a configuration without speculation
    has it too (the cost model's no-speculation step)."""
    ratio = _timing_ratio(records, key, "forward_ct")
    return ratio if isinstance(ratio, Absent) else ratio * 1e3


def target_forward_comm_ms(records: Sequence[dict[str, Any]]) -> Value:
    """Engine-reported communication per target forward, ms:
    ``sum(timing.verify_comm_s) / sum(timing.forward_ct) x 1e3``."""
    return target_forward_ms(records, "verify_comm_s")


def allreduce_per_forward(records: Sequence[dict[str, Any]]) -> Value:
    """All-reduces per target forward, count: ``sum(timing.allreduce_ct) / sum(timing.forward_ct)``."""
    return _timing_ratio(records, "allreduce_ct", "forward_ct")


def prompt_tokens(rec: dict[str, Any]) -> Value:
    """Prompt length as served, tokens: the server's ``prompt_tokens`` (meta_info / usage)."""
    n = rec.get("prompt_tokens")
    return Absent("server reported no prompt_tokens") if n is None else float(n)


#: A served prompt length may differ from the intended one by this many tokens, or this share of it
#: (whichever is larger), before it is a warning: a BOS token or a merge across a cut is not a mismatch.
PROMPT_LEN_TOLERANCE_TOKENS = 2
PROMPT_LEN_TOLERANCE_SHARE = 0.02


def prompt_length_mismatches(records: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """(intended, served) of every request whose served ``prompt_tokens`` differs from its intended
    ``input_len`` by more than ``max(PROMPT_LEN_TOLERANCE_TOKENS, PROMPT_LEN_TOLERANCE_SHARE x intended)``.
    Requests without an intended length (random words sent as text) or without a served one are not checked."""
    out = []
    for r in records:
        want, got = r.get("input_len"), r.get("prompt_tokens")
        if want is None or got is None:
            continue
        if abs(got - want) > max(PROMPT_LEN_TOLERANCE_TOKENS, PROMPT_LEN_TOLERANCE_SHARE * want):
            out.append((int(want), int(got)))
    return out


# ------------------------------------------------- acceptance per draft position


def accept_histogram(records: Sequence[dict[str, Any]]) -> Value:
    """Verify steps by accepted draft tokens, count per bin: ``h[j] = sum over requests of
    spec_correct_drafts_histogram[j]``, j = draft tokens one verify accepted (bonus excluded).

    The engine's per-request histogram (SGLang's ``spec_correct_drafts_histogram``,
    which grows only as far as the longest run seen; the reference engine's
    always has k + 1 bins) is summed bin by bin over this run's requests.
    """
    if not records:
        return Absent("no ok measured requests")
    hists = [r.get("spec_correct_drafts_histogram") for r in records]
    lacking = sum(h is None for h in hists)
    if lacking == len(hists):
        return Absent("engine reported no spec_correct_drafts_histogram")
    if lacking:
        return Absent(f"{lacking} of {len(hists)} requests lack spec_correct_drafts_histogram")
    width = max(len(h) for h in hists)
    return [float(sum(h[j] for h in hists if j < len(h))) for j in range(width)]  # type: ignore[return-value]


def accept_rate_by_position(records: Sequence[dict[str, Any]]) -> Value:
    """Acceptance rate of draft position p (p = 1, 2, ...), fraction: ``sum(h[p:]) / sum(h)``, the share
    of verify steps that accepted at least p draft tokens (``h`` = ``accept_histogram``). Positions
    past the histogram's last bin are not listed (an SGLang histogram grows only as far as it saw)."""
    h = accept_histogram(records)
    if isinstance(h, Absent):
        return h
    total = sum(h)  # type: ignore[arg-type]
    if total <= 0:
        return Absent("the acceptance histogram counts no verify step")
    return [sum(h[p:]) / total for p in range(1, max(2, len(h)))]  # type: ignore[return-value, index, arg-type]


# ------------------------------------------------------ output agreement


#: Reasons for an agreement that is not a number because outputs cannot be compared start with this.
NOT_COMPARABLE = "not comparable: "


def _pairs(records: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> tuple[list, int] | Absent:
    """(this output, baseline output) for every request whose ``prompt_key`` the baseline also measured.

    Pairing: same ``prompt_key`` = same endpoint, prompt and output_len
    (``serve.payloads.prompt_key``), which holds when both ran the same
    dataset, seed and lengths. The baseline's first output of a key is the
    reference. Returns the pairs and how many requests had no partner.
    """
    if not records:
        return Absent("no ok measured requests")
    lacking = sum(r.get("output_ids") is None for r in records)
    if lacking:
        return Absent(f"{lacking} of {len(records)} requests carry no output_ids (the endpoint returned none)")
    base: dict[str, list[int]] = {}
    for b in baseline:
        if b.get("prompt_key") and b.get("output_ids") is not None:
            base.setdefault(b["prompt_key"], b["output_ids"])
    if not base:
        return Absent("the baseline's measured requests carry no output_ids")
    pairs = [(r["output_ids"], base[r["prompt_key"]]) for r in records if r.get("prompt_key") in base]
    if not pairs:
        return Absent("no measured prompt in common with the baseline (pairing needs the same endpoint, "
                      "prompts and output_len: the same dataset, seed and lengths)")
    return pairs, len(records) - len(pairs)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def output_match_share(records: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> Value | dict:
    """Share of paired requests whose output token ids equal the baseline's for the same prompt,
    fraction 0..1: ``#(output_ids == baseline output_ids) / #paired`` (pairing: ``_pairs``)."""
    got = _pairs(records, baseline)
    if isinstance(got, Absent):
        return got
    pairs, unpaired = got
    return {"value": sum(a == b for a, b in pairs) / len(pairs), "paired": len(pairs), "unpaired": unpaired,
            "matching": sum(a == b for a, b in pairs)}


def output_common_prefix_tokens(records: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> Value | dict:
    """Mean common prefix of a paired request's output and the baseline's, tokens:
    ``mean(len(common prefix of output_ids and baseline output_ids))``; equal outputs count their length."""
    got = _pairs(records, baseline)
    if isinstance(got, Absent):
        return got
    pairs, unpaired = got
    return {"value": statistics.fmean(_common_prefix(a, b) for a, b in pairs), "paired": len(pairs),
            "unpaired": unpaired, "mean_baseline_tokens": statistics.fmean(len(b) for _, b in pairs)}


def break_even_accept_length(cycle_time_ms_value: float, baseline_tok_s: float) -> float:
    """Accept length at which speculation equals the baseline, tokens/verify:
    ``cycle_time_s x baseline_tok_s`` (DOMAIN: 0.030 s x 82 tok/s = 2.46).

    Speculation pays iff ``accept_length > break_even``, because its decode
    rate is ``accept_length / cycle_time_s``. ``baseline_tok_s`` is the
    baseline's ``decode_rate`` (``BASELINE_TOK_S``: tok/s excluding TTFT),
    matching a cycle time that counts decode only.
    """
    return cycle_time_ms_value / 1e3 * baseline_tok_s
