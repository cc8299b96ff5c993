"""Synthetic measured records of a known speed, for the report's and the sweep's tests."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.analysis.launches import LaunchFiles, build_config_summary
from specsweep.analysis.sweep import analyze_sweep, load_report, write_report
from specsweep.contracts.summary import SUMMARY_FORMAT_VERSION, ConfigSummary
from specsweep.contracts.vocabulary import RequestStatus, Status
from specsweep.records import DEFAULT_POINT, new_record
from specsweep.report import plots
from specsweep.report.render import HtmlPages, render_report
from specsweep.testing.doubles import engine_facts

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


def launches_summary(name: str, gap_ms: float, launches: Mapping[str, tuple[float, float]], seed: int,
                     jitter: float = 0.02) -> ConfigSummary:
    """The summary.json of a configuration without speculation measured in ``launches`` (launch id -> (start
    minute, decode-time factor)): each launch WORKLOAD's ``sequential_records`` at ``gap_ms`` x its factor
    (seeded ``seed`` + its index), started at its minute and ended 50 s later, summarised as summarize_config
    does (``analysis.launches.build_config_summary``)."""
    plan = {"name": name, "engine": "reference", "image": None, "gpus": 0, "workload": WORKLOAD,
            "server_args": {"speculative-algorithm": "NONE"}, "env": {},
            "facts": engine_facts("reference", {"speculative-algorithm": "NONE"})}
    files = []
    for k, (lid, (minute, factor)) in enumerate(launches.items()):
        run = f"{name}-{lid}"
        records = [dict(r, point=DEFAULT_POINT) for r in
                   sequential_records(run, gap_ms * factor, 1, False, seed + k, jitter=jitter)]
        files.append(LaunchFiles(launch=lid, record={"ready_s": 1.0}, warmup=[], measured=records, server_log="",
                                 outcome={**OK, "run_id": run, "launch": lid, "started_at": 1.7e9 + 60 * minute,
                                          "ended_at": 1.7e9 + 60 * minute + 50}, run_id=run))
    return build_config_summary(plan, files, lambda _: None)


def config_summary(summary: Mapping[str, Any] | ConfigSummary) -> ConfigSummary:
    """The summary.json of a configuration measured in one launch at its one point, from that launch's
    summary (``analysis.summary.build_summary``; a ``ConfigSummary`` is returned as it is): the point named
    ``records.DEFAULT_POINT`` with the plan's workload, no launch sections."""
    if isinstance(summary, ConfigSummary):
        return summary
    point = {"point": DEFAULT_POINT, "workload": summary["plan"]["workload"], "launches": [], **summary}
    return ConfigSummary.from_dict({"format_version": SUMMARY_FORMAT_VERSION, "config": summary["config"],
                                    "status": summary["status"], "plan": summary["plan"], "launches": [],
                                    "points": [point]})


def render_summaries(summaries: Sequence[Mapping[str, Any] | ConfigSummary], baseline: str | None, csv_path: Path,
                     md_path: Path, plots_dir: Path, sweep: dict | None = None, best_dir: Path | None = None,
                     html: HtmlPages | None = None) -> dict:
    """What the two rules do in turn: analyze_sweep (report.json beside ``md_path``, returned as written)
    and render_report from that file; ``summaries`` as ``config_summary`` takes them."""
    report_path = Path(md_path).with_name("report.json")
    write_report(report_path, analyze_sweep([config_summary(s) for s in summaries], baseline, sweep))
    render_report(load_report(report_path), csv_path, md_path, plots_dir, best_dir, html)
    return load_report(report_path)


@contextlib.contextmanager
def kept_figures(laid_out: bool = False) -> Iterator[list[Any]]:
    """The figures the report's plot functions would save (every one goes through ``report.plots._save``),
    kept open for inspection instead of written, and closed at the end; ``laid_out``: each laid out and drawn
    first, as ``_save`` lays a figure out before saving it (for tests of where its artists land).

    A figure's path must be absolute (a test's ``tmp_path``): a relative one is the current directory, the
    checkout, where a plot function that is not kept here (or ``_nothing``, which deletes it) would write."""
    figures: list[Any] = []

    def keep(fig: Any, path: Path) -> None:
        if not Path(path).is_absolute():
            raise AssertionError(f"{path}: a figure path relative to the current directory (the checkout); "
                                 "give one under tmp_path")
        if laid_out:
            if fig.get_layout_engine() is None:
                fig.tight_layout()
            fig.canvas.draw()
        figures.append(fig)

    saved = plots._save
    plots._save = keep
    try:
        yield figures
    finally:
        plots._save = saved
        for fig in figures:
            plots.plt.close(fig)
