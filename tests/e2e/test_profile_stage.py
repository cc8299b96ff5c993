"""The profiling stage's trace against a real reference engine on CPU (TP 2): every rank's trace lands."""

from __future__ import annotations

import gzip
import io
import json
import os

from specsweep.contracts.plan import Plan
from specsweep.files import read_json, read_jsonl
from specsweep.serve import profile as prof
from specsweep.serve.launch import server_environment
from specsweep.serve.server import Server, free_port
from specsweep.testing.refengine import ref_plan
from specsweep.testing.workflow import REPO


def test_trace_stage_against_the_reference_engine(tmp_path):
    """/start_profile, two requests, /stop_profile: every rank's trace lands, with the profiled requests."""
    plan = Plan.from_dict(ref_plan())
    port = free_port("127.0.0.1")
    log_file = (tmp_path / "server.log").open("wb")
    server = Server(argv=[*plan.argv, "--host", "127.0.0.1", "--port", str(port)],
                    env=server_environment(plan.env, {**os.environ, "PYTHONPATH": str(REPO)}), host="127.0.0.1",
                    port=port, ready_path="/ready", log_file=log_file)
    pj = tmp_path / "profile.json"
    prof.reset(plan, pj, tmp_path / "allreduce_bench.json")
    server.start()
    try:
        server.wait_ready(180)
        rec = prof.after_measure(server, plan, pj, io.StringIO())
    finally:
        server.stop()
    assert rec == read_json(pj)
    assert rec["status"] == "ok", rec
    assert sorted(f.split("-TP-")[1] for f in rec["files"]) == ["0.trace.json.gz", "1.trace.json.gz"]
    assert rec["requests_ok"] == 2 and rec["seconds"] >= rec["requests_s"] > 0
    records = read_jsonl(tmp_path / rec["requests"])
    assert [r["phase"] for r in records] == ["profile", "profile"] and records[0]["timing"]["verify_comm_s"] > 0
    assert rec["start_body"]["output_dir"] == str((tmp_path / "profile").resolve())
    assert rec["start_body"]["with_stack"] is False and "num_steps" not in rec["start_body"]
    events = json.loads(gzip.open(tmp_path / "profile" / rec["files"][0]).read())["traceEvents"]
    assert any(e.get("name") == "refengine.verify" for e in events)
