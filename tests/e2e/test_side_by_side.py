"""A side-by-side round with the reference engine on this CPU: three real servers up at once, measured in
turn through the server job's own code, and an idle server that really uses no CPU.

What must hold: the jobs' windows interleave in the round's order and never overlap (from the windows'
and the request records' own timestamps, ``perf_counter_ns``, CLOCK_MONOTONIC: one clock for every
process of the host), every request lies inside one of its launch's windows, each partner was up, and
the partners' CPU share over each launch's windows stayed below ``PARTNER_CPU_SHARE_MAX``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from specsweep.contracts.vocabulary import Status
from specsweep.engines.registry import get_engine
from specsweep.files import read_json, read_jsonl
from specsweep.serve import rounddir, sidebyside
from specsweep.serve.server import Server, free_port
from specsweep.testing.refengine import ref_plan
from specsweep.testing.rounds import launch_dir, overlaps, start_round_jobs, wait_all, window_spans, write_round_plan

pytestmark = pytest.mark.slow

WORKLOAD = {"endpoint": "generate", "num_prompts": 2, "input_len": 16, "output_len": 32, "concurrency": 1,
            "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0, "request_timeout_s": 120,
            "warmup": {"window": 2, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}}


def tiny_plan(name: str, tp: int = 1, **server_args) -> dict:
    """The reference engine's tiny model on the CPU, TP ``tp``, without profiling."""
    plan = ref_plan(tp=tp, name=name, workload=dict(WORKLOAD), ready_timeout_s=180)
    plan.pop("profile")
    if server_args:
        plan["server_args"] = {**plan["server_args"], **server_args}
        plan["argv"] = get_engine("reference").launch_argv("python3", plan["server_args"])
    return plan


def test_an_idle_reference_server_uses_no_cpu(tmp_path):
    """The premise of measuring side by side: the ranks of an idle server block (rank 0 in its event loop,
    the follower on its pipe: ``refengine/worker.py``), so it takes nothing from the one being measured."""
    plan = tiny_plan("idle", tp=2)
    with (tmp_path / "server.log").open("wb") as log:
        engine, port = get_engine("reference"), free_port("127.0.0.1")
        server = Server(argv=plan["argv"] + engine.address_args("127.0.0.1", port), env={**os.environ, **plan["env"]},
                        host="127.0.0.1", port=port, ready_path=engine.ready_path, log_file=log)
        server.start()
        try:
            server.wait_ready(180)
            # one request first: an idle server is one that has served, with its ranks back at rest
            body = json.dumps({"input_ids": [5, 17, 99, 3], "sampling_params": {"max_new_tokens": 8}}).encode()
            urllib.request.urlopen(urllib.request.Request(server.base_url + "/generate", data=body), timeout=60).read()
            time.sleep(0.5)
            before = rounddir.group_cpu_s(server.proc.pid)
            time.sleep(2.0)
            after = rounddir.group_cpu_s(server.proc.pid)
        finally:
            server.stop()
    assert before is not None and after is not None
    used = after - before
    print(f"idle TP=2 reference server: {used:.3f} CPU s in 2.0 s")
    assert used / 2.0 < sidebyside.PARTNER_CPU_SHARE_MAX, f"{used:.3f} CPU s in 2 s idle"


def test_three_reference_servers_side_by_side_take_turns_and_their_partners_stay_idle(tmp_path):
    order = [("eagle3", "1"), ("nospec", "1"), ("eagle3-b", "1")]
    plans = {"eagle3": tiny_plan("eagle3"), "eagle3-b": tiny_plan("eagle3-b"),
             "nospec": tiny_plan("nospec", **{"speculative-algorithm": "NONE"})}
    for p in ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"):
        plans["nospec"]["server_args"].pop(p)
    plans["nospec"]["env"].pop("SGLANG_SIMULATE_ACC_LEN")  # refused without speculation
    plans["nospec"]["argv"] = get_engine("reference").launch_argv("python3", plans["nospec"]["server_args"])
    results = tmp_path / "results"
    round_plan = write_round_plan(results / "rounds" / "round-1.json", order)
    procs = start_round_jobs(results, tmp_path / "locks", plans, order, round_plan)
    wait_all(procs, timeout_s=600)

    launches = {n: read_json(launch_dir(results, n, "1") / "launch.json") for n, _ in order}
    outcomes = {n: read_json(launch_dir(results, n, "1") / "outcome.json") for n, _ in order}
    for name, launch in launches.items():
        print(name, json.dumps({k: launch[k] for k in ("position", "partners_up", "windows", "partner_cpu_share",
                                                       "partner_cpu_share_max", "barrier_s", "ready_s")}))
        assert outcomes[name]["status"] == Status.OK, outcomes[name]
        assert [p["state"] for p in launch["partners"]] == ["ready", "ready"]
        assert sorted(launch["partners_up"]) == sorted(f"{o}@1" for o, _ in order if o != name)
        assert launch["windows"] == 3  # one warmup window of 2 requests, then one window per repeat of 2
        assert launch["partner_cpu_share"] < sidebyside.PARTNER_CPU_SHARE_MAX
        assert outcomes[name]["side_by_side"]["partner_cpu_share"] == launch["partner_cpu_share"]

    spans = {n: window_spans(launch) for n, launch in launches.items()}
    assert overlaps(spans) == []
    starts = sorted((s, n) for n, ss in spans.items() for s, _, _ in ss)
    assert [n for _, n in starts] == [n for n, _ in order] * 3  # the round's order, window after window
    # the requests themselves: each inside its own launch's windows, none inside another launch's
    for name, _ in order:
        records = read_jsonl(launch_dir(results, name, "1") / "warmup.jsonl") + \
            read_jsonl(launch_dir(results, name, "1") / "requests.jsonl")
        assert len(records) == 6 and all(r["status"] == "ok" for r in records)
        for r in records:
            assert any(s <= r["send_ns"] and r["end_ns"] <= e for s, e, _ in spans[name])
            assert not any(s < r["end_ns"] and r["send_ns"] < e for other, ss in spans.items() if other != name
                           for s, e, _ in ss)
