"""Synthetic measured records of a known speed, for the report's and the sweep's tests."""

from __future__ import annotations

import random
from pathlib import Path

from specsweep.analysis.sweep import analyze_sweep, load_report, write_report
from specsweep.contracts.vocabulary import RequestStatus, Status
from specsweep.records import new_record
from specsweep.report.render import HtmlPages, render_report

MS = 1_000_000
#: The workload of every synthetic run: 2 repeats x 12 sequential requests of 33 tokens.
WORKLOAD = {
    "endpoint": "generate", "num_prompts": 12, "input_len": 8, "output_len": 33, "concurrency": 1,
    "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0, "request_timeout_s": 10,
    "warmup": {"window": 2, "tolerance": 0.1, "min_windows": 2, "max_requests": 8},
}
#: The outcome of a launch that ended ok.
OK = {"status": Status.OK, "stage": None, "reason": None, "detail": None, "log_tail": None}


def sequential_records(run: str, gap_ms: float, per_chunk: int, spec: bool, seed: int, jitter: float,
                       timing: bool = False) -> list[dict]:
    """WORKLOAD's requests: first token at 50 ms, then a chunk of ``per_chunk`` tokens every ``gap_ms``
    (times a uniform factor in [1 - jitter, 1 + jitter], seeded); one verify per chunk when ``spec``.

    ``timing``: speculative records also carry the engine's ``timing`` (draft 2 ms, verify
    ``gap_ms`` - 2 ms of which ``gap_ms`` - 7 ms communication, 122 all-reduces per verify).
    """
    rng, out, t = random.Random(seed), [], 0
    for rep in range(2):
        for i in range(12):
            chunks, toks = [t + 50 * MS], [1]
            while sum(toks) < 33:
                chunks.append(chunks[-1] + int(gap_ms * rng.uniform(1 - jitter, 1 + jitter) * MS))
                toks.append(min(per_chunk, 33 - sum(toks)))
            verify = len(chunks) - 1
            engine_timing = {"draft_s": 0.002 * verify, "verify_s": (gap_ms - 2) / 1e3 * verify,
                             "verify_comm_s": (gap_ms - 7) / 1e3 * verify, "allreduce_ct": 122 * verify,
                             "forward_ct": verify} if spec and timing else None
            out.append(new_record(
                run_id=run, request_id=f"{run}{rep}{i}", phase="measured", repeat=rep, index=i, endpoint="generate",
                input_len=8, output_len=33, send_ns=t, chunk_ns=chunks, chunk_tokens=toks, end_ns=chunks[-1],
                http_status=200, completion_tokens=33, spec_verify_ct=verify if spec else None, timing=engine_timing,
                status=RequestStatus.OK))
            t = chunks[-1] + MS
    return out


def render_summaries(summaries: list[dict], baseline: str | None, csv_path: Path, md_path: Path, plots_dir: Path,
                     sweep: dict | None = None, best_dir: Path | None = None, html: HtmlPages | None = None) -> dict:
    """What the two rules do in turn: analyze_sweep (report.json beside ``md_path``, returned as written)
    and render_report from that file."""
    report_path = Path(md_path).with_name("report.json")
    write_report(report_path, analyze_sweep(summaries, baseline, sweep))
    render_report(load_report(report_path), csv_path, md_path, plots_dir, best_dir, html)
    return load_report(report_path)
