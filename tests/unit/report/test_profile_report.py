"""The report's verify-path profile: the trace's split beside the engine's, the micro-benchmark figure, the plot."""

from __future__ import annotations

import csv
import shutil

from specsweep.analysis.profiling import profile_section
from specsweep.analysis.summary import build_summary
from specsweep.records import new_record
from specsweep.report.figures import PLOT_FILES
from specsweep.testing.doubles import engine_facts
from specsweep.testing.reports import OK, WORKLOAD, render_summaries
from specsweep.testing.workflow import REPO

MS = 1_000_000


def records(run: str, gap_ms: float, per_chunk: int, spec: bool) -> list[dict]:
    """Sequential requests of 33 tokens: first token at 50 ms, then a chunk every ``gap_ms``."""
    out, t = [], 0
    for rep in range(2):
        for i in range(12):
            chunks, toks = [t + 50 * MS], [1]
            while sum(toks) < 33:
                chunks.append(chunks[-1] + int(gap_ms * (1 + 0.01 * ((i + len(toks)) % 3)) * MS))
                toks.append(min(per_chunk, 33 - sum(toks)))
            out.append(new_record(run_id=run, request_id=f"{run}{rep}{i}", phase="measured", repeat=rep, index=i,
                                  endpoint="generate", input_len=8, output_len=33, send_ns=t, chunk_ns=chunks,
                                  chunk_tokens=toks, end_ns=chunks[-1], http_status=200, completion_tokens=33,
                                  spec_verify_ct=len(chunks) - 1 if spec else None, status="ok"))
            t = chunks[-1] + MS
    return out


def plan(name: str, spec: bool) -> dict:
    args = {"speculative-algorithm": "EAGLE3"} if spec else {}
    return {"name": name, "engine": "reference", "image": None, "server_args": args, "workload": WORKLOAD,
            "facts": engine_facts("reference", args)}


KERNELS = REPO / "tests/fixtures/traces/kernels"


def test_profile_table_plot_and_csv(tmp_path):
    d = tmp_path / "profile"
    d.mkdir()
    shutil.copy(KERNELS / "custom_allreduce-TP-0.trace.json", d / "r-TP-0.trace.json")
    p = plan("prof", True)
    p["profile"] = {"enabled": True, "requests": 2}
    bench = {"enabled": True, "status": "ok", "seconds": 9.0,
             "comm": {"allreduces_per_layer": 2, "allreduces_outside_layers": 0, "note": ""},
             "result": {"runner": "torch", "backend": "nccl", "world_size": 2, "device": "cuda", "dtype": "bfloat16",
                        "model": {"num_hidden_layers": 4, "hidden_size": 7168},
                        "sizes": [{"tokens": 4, "bytes": 57344, "median_us": 25.0, "p10_us": 20.0, "p90_us": 30.0,
                                   "iters": 200}]}}
    section = profile_section(p, {"enabled": True, "status": "ok", "seconds": 6.5, "files": ["r-TP-0.trace.json"]},
                              bench, d, ["custom_allreduce"])
    prof = build_summary(p, None, OK, [], records("p", 12.0, 2, True), None, profile=section)
    base = build_summary(plan("base", False), None, OK, [], records("b", 12.0, 1, False), None)
    out = tmp_path / "out"
    render_summaries([base, prof], "base", out / "summary.csv", out / "report.md", out / "plots")
    md = (out / "report.md").read_text()
    assert "## Verify-path profile" in md
    section_md = md.split("## Verify-path profile", 1)[1]
    row = next(line for line in section_md.splitlines() if line.startswith("| prof |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "ok" and cells[2] == "0.23" and cells[3] == "0.08"  # 235 us span, 80 us comm
    assert cells[7] == "8 (8)" and cells[8] == "custom_allreduce"
    assert cells[10] == "25.0 x 8 = 0.20" and cells[11] == "6.5"
    assert "122 for Kimi-K2.5's 61 layers" in md
    assert (out / "plots" / PLOT_FILES["comm_split"]).stat().st_size > 10_000
    rows = {r["config"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert rows["prof"]["trace_allreduce_impl"] == "custom_allreduce"
    assert float(rows["prof"]["allreduce_bench_ms_per_verify"]) == 0.2
    assert rows["base"]["trace_verify_ms"] == ""  # profiling off: absent, never 0
