"""Side-by-side rounds (``serve.sidebyside``): windows in the client's loop, the strict rotation between
processes (a dead partner skipped), the barrier (a partner that never comes, the deadline), the partner-aware
guard, and whole server jobs of one round against real (loopback) server processes."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from specsweep.contracts.rounds import RoundPlan
from specsweep.contracts.vocabulary import Reason, Status
from specsweep.files import read_json, read_jsonl
from specsweep.serve import guard, phases, quiet, rounddir, sidebyside
from specsweep.serve.drive import Gate, drive
from specsweep.testing.doubles import plan_dict
from specsweep.testing.rounds import (
    bare_job,
    launch_dir,
    overlaps,
    start_round_jobs,
    wait_all,
    window_spans,
    write_round_plan,
)
from specsweep.testing.workflow import REPO

# ------------------------------------------------------------ windows in the client's loop


def test_a_window_is_two_requests_at_concurrency_one_else_one_repeat():
    assert sidebyside.window_requests({"concurrency": 1, "request_rate": None, "num_prompts": 8}) == 2
    assert sidebyside.window_requests({"concurrency": 4, "request_rate": None, "num_prompts": 8}) == 8
    assert sidebyside.window_requests({"concurrency": 1, "request_rate": 2.0, "num_prompts": 5}) == 5


@pytest.mark.parametrize("concurrency", [1, 3])
def test_drive_sends_every_request_inside_a_window_and_drains_it_before_the_next(concurrency):
    events: list[tuple[str, int | str]] = []

    @asynccontextmanager
    async def enter(label):
        events.append(("open", label))
        yield
        events.append(("close", label))

    async def send(i, _scheduled):
        events.append(("send", i))
        await asyncio.sleep(0.001)
        events.append(("done", i))
        return {"i": i}

    asyncio.run(drive(send, limit=7, concurrency=concurrency, request_rate=None, arrival_seed="s",
                      should_stop=lambda: False, on_done=lambda rec: None, gate=Gate(3, enter), label="measured"))
    windows, current = [], None
    for kind, what in events:
        if kind == "open":
            assert current is None, "a window opened inside another"
            current = []
        elif kind == "close":
            windows.append(current)
            current = None
        else:
            assert current is not None, f"{kind} {what} outside a window"
            current.append((kind, what))
    assert [sorted(i for k, i in w if k == "send") for w in windows] == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(sorted(i for k, i in w if k == "done") == sorted(i for k, i in w if k == "send") for w in windows)


def test_drive_without_a_gate_is_one_span_and_a_stopped_phase_opens_no_window():
    opened = []

    @asynccontextmanager
    async def enter(label):
        opened.append(label)
        yield

    sent = []

    async def send(i, _scheduled):
        sent.append(i)
        return {}

    asyncio.run(drive(send, limit=5, concurrency=1, request_rate=None, arrival_seed="s",
                      should_stop=lambda: len(sent) >= 2, on_done=lambda rec: None, gate=Gate(2, enter),
                      label="warmup"))
    assert sent == [0, 1] and opened == ["warmup"]


def test_a_warmup_window_after_a_pause_is_timed_from_its_first_send():
    from specsweep.warmup import warmup_windows_tok_s

    s = 1_000_000_000
    recs = [{"window": 0, "send_ns": 0, "end_ns": 1 * s, "status": "ok", "completion_tokens": 100},
            # the other servers' windows: 5 s in which this client sent nothing
            {"window": 1, "send_ns": 6 * s, "end_ns": 7 * s, "status": "ok", "completion_tokens": 100}]
    assert warmup_windows_tok_s(recs, 1) == pytest.approx([100.0, 100.0])


# ------------------------------------------------------------ the rotation, between processes

WORKER = r"""
import asyncio, json, os, subprocess, sys, time
from pathlib import Path
from specsweep.contracts.plan import Point
from specsweep.contracts.rounds import RoundPlan
from specsweep.serve.sidebyside import SideBySide
from specsweep.testing.doubles import plan_dict
from specsweep.testing.rounds import bare_job
name, launch, lock_dir, out, plan_path, windows, die_after = sys.argv[1:8]
windows, die_after = int(windows), int(die_after)
server = subprocess.Popen(["sleep", "120"], start_new_session=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)  # its "server": an idle process group
try:
    job = bare_job(plan_dict(name=name), launch, Path(lock_dir), Path(out), sys.stderr)
    side = SideBySide(job, RoundPlan.load(plan_path), Path(plan_path))
    side.join(); side.started(server.pid); side.ready()
    side.barrier(30)
    async def main():
        for i in range(windows):
            async with side.gate(Point("default", {"concurrency": 1, "num_prompts": 2})).enter("measured"):
                await asyncio.sleep(0.03)
                if i == die_after:
                    os._exit(3)  # dies inside its window: the lock goes with it, its entry stays behind
    asyncio.run(main())
    side.leave()
    Path(out, "windows.json").write_text(json.dumps({"windows": side.windows, "summary": side.summary()}))
finally:
    server.kill()
"""

ORDER = [("a", "1"), ("b", "1"), ("c", "1")]


def run_workers(tmp_path: Path, windows: int, die_after: dict[str, int] | None = None) -> dict[str, dict]:
    plan_path = write_round_plan(tmp_path / "round.json", ORDER)
    procs = {name: subprocess.Popen([sys.executable, "-c", WORKER, name, launch, str(tmp_path / "locks"),
                                     str(tmp_path / name), str(plan_path), str(windows),
                                     str((die_after or {}).get(name, -1))],
                                    cwd=REPO, stderr=subprocess.PIPE, text=True)
             for name, launch in ORDER}
    out = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        if (die_after or {}).get(name, -1) >= 0:
            assert proc.returncode == 3, err[-2000:]
            continue
        assert proc.returncode == 0, err[-2000:]
        out[name] = json.loads((tmp_path / name / "windows.json").read_text())
    return out


def owners_in_time_order(result: dict[str, dict]) -> list[str]:
    return [who for _, who in sorted((w["start_ns"], who) for who, r in result.items() for w in r["windows"])]


def test_three_processes_take_their_windows_in_the_rounds_order_never_two_at_once(tmp_path):
    result = run_workers(tmp_path, windows=4)
    assert overlaps({who: [(w["start_ns"], w["end_ns"]) for w in r["windows"]] for who, r in result.items()}) == []
    assert owners_in_time_order(result) == ["a", "b", "c"] * 4
    for who, r in result.items():
        assert r["summary"]["windows"] == 4
        assert sorted(r["summary"]["partners_up"]) == sorted(f"{n}@1" for n in "abc" if n != who)
        assert r["summary"]["partner_cpu_share"] < sidebyside.PARTNER_CPU_SHARE_MAX  # idle `sleep`s


def test_a_partner_that_dies_is_skipped_and_the_others_go_on_in_turn(tmp_path):
    result = run_workers(tmp_path, windows=5, die_after={"b": 1})
    order = owners_in_time_order(result)
    # b's two windows left no record (it died inside the second); a and c alternate throughout
    assert order == ["a", "c"] * 5
    assert overlaps({who: [(w["start_ns"], w["end_ns"]) for w in r["windows"]] for who, r in result.items()}) == []


def test_a_job_waiting_for_its_turn_sleeps_and_wakes_when_the_turn_comes(tmp_path):
    """Waiting costs no CPU (a watch on the round's directory, not a poll), and the hand-over is prompt."""
    order = [("a", "1"), ("b", "1")]
    a, b = _side(tmp_path, "a", order), _side(tmp_path, "b", order)
    for s in (a, b):
        s.join()
        s.ready()
        s.barrier(timeout_s=10)
    assert a.watch is not None and a.watch.fd is not None  # inotify on this host

    async def main():
        async def b_window():
            async with b.gate(_point()).enter("measured"):
                return time.monotonic()

        first = a.gate(_point()).enter("measured")  # a's turn first (position 1): held for 2 s
        await first.__aenter__()
        waiting = asyncio.create_task(b_window())
        cpu0 = time.process_time()
        await asyncio.sleep(2.0)
        cpu = time.process_time() - cpu0
        assert not waiting.done()
        released = time.monotonic()
        await first.__aexit__(None, None, None)
        return cpu, await waiting - released

    cpu, handover_s = asyncio.run(main())
    assert cpu / 2.0 < 0.01, f"{cpu:.3f} CPU s in 2 s of waiting"
    assert handover_s < 0.3


def test_next_turn_goes_round_the_members_in_order():
    assert rounddir.next_turn([1, 2, 3], 0) == 1
    assert rounddir.next_turn([1, 2, 3], 3) == 1
    assert rounddir.next_turn([1, 3], 1) == 3  # 2 left the rotation
    assert rounddir.next_turn([3, 1], 3) == 1
    assert rounddir.next_turn([2], 2) == 2


# ------------------------------------------------------------ the barrier


def _side(tmp_path: Path, name: str, order, grace_s: float = sidebyside.REGISTER_GRACE_S):
    plan_path = tmp_path / "round.json"
    if not plan_path.exists():
        write_round_plan(plan_path, order)
    job = bare_job(plan_dict(name=name), "1", tmp_path / "locks", tmp_path / name, io.StringIO())
    return sidebyside.SideBySide(job, RoundPlan.load(plan_path), plan_path, register_grace_s=grace_s)


def test_a_partner_that_never_registers_is_dropped_after_the_grace(tmp_path):
    side = _side(tmp_path, "a", [("a", "1"), ("b", "1")], grace_s=0.5)
    side.join()
    t0 = time.monotonic()
    record = side.barrier(timeout_s=30)
    assert 0.4 < time.monotonic() - t0 < 5
    assert record["partners"] == [{"config": "b", "launch": "1", "state": "dropped", "run_id": None,
                                   "why": "never registered within 0.5 s (not started in this run)"}]


def test_a_partner_that_never_gets_ready_is_dropped_at_the_deadline_and_one_that_failed_at_once(tmp_path):
    order = [("a", "1"), ("b", "1"), ("c", "1")]
    a, b, c = (_side(tmp_path, n, order) for n in "abc")
    for s in (a, b, c):
        s.join()
    c.leave(sidebyside.FAILED)  # c's server failed before it was ready
    t0 = time.monotonic()
    record = a.barrier(timeout_s=1.0)  # b stays "starting"
    assert 0.9 < time.monotonic() - t0 < 5
    states = {p["config"]: (p["state"], p["why"]) for p in record["partners"]}
    assert states == {"b": ("dropped", "not ready within the ready timeout (1 s)"), "c": ("ended", "its job failed")}


def test_the_barrier_waits_for_a_partner_that_becomes_ready(tmp_path):
    order = [("a", "1"), ("b", "1")]
    a, b = _side(tmp_path, "a", order), _side(tmp_path, "b", order)
    a.join()
    b.join()
    a.ready()
    loop_done = []

    def later():
        time.sleep(0.6)
        b.ready()
        loop_done.append(True)

    import threading

    threading.Thread(target=later).start()
    t0 = time.monotonic()
    record = a.barrier(timeout_s=30)
    assert loop_done and 0.5 < time.monotonic() - t0 < 5
    assert record["partners"][0]["state"] == "ready" and record["partners"][0]["run_id"] == b.job.run_id


def test_an_earlier_runs_entry_does_not_count_as_a_partner_of_this_one(tmp_path):
    order = [("a", "1"), ("b", "1")]
    old = _side(tmp_path, "b", order)
    old.join()
    old.leave(sidebyside.ENDED)
    entry = old.registry.read("b", "1")
    entry.update(registered_at=time.time() - 3600, job_pid=1, job_start=-1)  # long ago, its job gone
    old.registry.write("b", "1", entry)
    a = _side(tmp_path, "a", order, grace_s=0.3)
    a.join()
    record = a.barrier(timeout_s=30)
    assert record["partners"][0]["state"] == "dropped"
    assert "never registered" in record["partners"][0]["why"]


def test_a_launch_measured_with_no_partner_up_says_so(tmp_path):
    """A rerun of one configuration: its partners were measured earlier and never come."""
    side = _side(tmp_path, "a", [("a", "1"), ("b", "1"), ("c", "1")], grace_s=0.2)
    side.join()
    side.ready()
    record = side.barrier(timeout_s=30)
    assert [p["state"] for p in record["partners"]] == ["dropped", "dropped"]

    async def windows():
        for _ in range(2):
            async with side.gate(_point()).enter("measured"):
                await asyncio.sleep(0.01)

    asyncio.run(windows())
    summary = side.summary()
    assert summary["partners_up"] == [] and summary["windows"] == 2 and summary["partner_cpu_share"] == 0.0


# ------------------------------------------------------------ the partner-aware guard


def labelled(run_id: str, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, env={**os.environ, guard.RUN_ENV: run_id, guard.CONFIG_ENV: "x"},
                            start_new_session=True)


def test_a_registered_partner_is_known_and_any_other_server_is_not(tmp_path):
    order = [("a", "1"), ("b", "1")]
    a, b = _side(tmp_path, "a", order), _side(tmp_path, "b", order)
    a.join()
    b.join()
    partner = labelled(b.job.run_id, ["sleep", "60"])
    stranger = labelled("f0re1gnf0re1", ["sleep", "60"])
    try:
        time.sleep(0.2)
        a.sample()
        record = a.foreign(a.host_record())
    finally:
        for p in (partner, stranger):
            p.kill()
            p.wait()
    # (other work on this host may run servers of its own: only these two are looked at)
    others = {o["run_id"] for o in record["others_seen"]}
    assert "f0re1gnf0re1" in others and b.job.run_id not in others
    assert [o["run_id"] for o in record["partners_seen"]] == [b.job.run_id]
    _, verdict = phases.contaminate({"default": {"status": Status.OK}}, {"status": Status.OK}, record)
    assert verdict["status"] == Status.CONTAMINATED and verdict["reason"] == Reason.OTHER_SERVER
    alone = a.foreign(guard.summarize([{**a.samples[0], "others": [o for o in a.samples[0]["others"]
                                                                    if o["run_id"] == b.job.run_id]}]))
    assert alone["others_seen"] == [] and len(alone["partners_seen"]) == 1


BUSY = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 60: pass\n"


def test_a_partner_server_using_cpu_in_a_window_contaminates_the_result(tmp_path):
    order = [("a", "1"), ("b", "1")]
    a, b = _side(tmp_path, "a", order), _side(tmp_path, "b", order)
    a.join()
    b.join()
    busy = subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True)
    try:
        b.started(busy.pid)
        b.ready()
        a.ready()
        a.barrier(timeout_s=10)

        async def one_window():
            async with a.gate(_point()).enter("measured"):
                await asyncio.sleep(1.0)

        asyncio.run(one_window())
    finally:
        busy.kill()
        busy.wait()
    summary = a.summary()
    assert summary["windows"] == 1 and summary["partners_up"] == ["b@1"]
    # a busy loop: up to a whole core; on two cores shared with other work, at least five times the limit
    assert summary["partner_cpu_share"] > 5 * sidebyside.PARTNER_CPU_SHARE_MAX
    points, verdict = sidebyside.contaminate_partners({"default": {"status": Status.OK}}, {"status": Status.OK},
                                                      summary)
    assert verdict["status"] == Status.CONTAMINATED and verdict["reason"] == Reason.PARTNER_BUSY
    assert points["default"]["reason"] == Reason.PARTNER_BUSY
    # below the limit: nothing changes; a failed point stays failed
    quiet = {**summary, "partner_cpu_share": 0.001, "partner_cpu_share_busiest": 0.001}
    points, verdict = sidebyside.contaminate_partners({"default": {"status": Status.FAILED}}, {"status": Status.OK},
                                                      quiet)
    assert verdict["status"] == Status.OK and points["default"]["status"] == Status.FAILED


def test_many_idle_partners_that_tick_now_and_then_are_idle_and_one_busy_partner_is_not():
    # All partners together may use 2 % of each core the measured server leaves free; each one 2 % of a core.
    assert sidebyside.partners_cpu_limit(2, cores=2) == sidebyside.PARTNER_CPU_SHARE_MAX  # the 2-core CPU, TP=2
    assert sidebyside.partners_cpu_limit(1, cores=16) == 15 * sidebyside.PARTNER_CPU_SHARE_MAX  # a GPU host
    ok = ({"default": {"status": Status.OK}}, {"status": Status.OK})
    # an H100 round: 16 idle partners, 2.04 % of a core together over one launch's windows, each a tick or two
    sixteen_idle = {"partner_cpu_share": 0.0204, "partner_cpu_share_busiest": 0.0037,
                    "partner_cpu_share_limit": sidebyside.partners_cpu_limit(1, cores=16)}
    assert sidebyside.contaminate_partners(*ok, sixteen_idle)[1]["status"] == Status.OK
    one_busy = {**sixteen_idle, "partner_cpu_share": 0.05, "partner_cpu_share_busiest": 0.04}
    assert sidebyside.contaminate_partners(*ok, one_busy)[1]["reason"] == Reason.PARTNER_BUSY
    on_two_cores = {**sixteen_idle, "partner_cpu_share_limit": sidebyside.partners_cpu_limit(2, cores=2)}
    assert sidebyside.contaminate_partners(*ok, on_two_cores)[1]["reason"] == Reason.PARTNER_BUSY


def _point():
    from specsweep.contracts.plan import Point

    return Point("default", {"concurrency": 1, "num_prompts": 2})


#: Two processes of one group (a fork), each burning 0.25 s of its own CPU, then stopping itself.
# Each burns 0.3 s: /proc counts whole clock ticks (10 ms), so two of exactly 0.25 s read as 0.49 once; one
# alone stays under the 0.5 s the test asks of the group's sum.
TWO_BURNERS = """import os, signal, time
os.fork()
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_group_cpu_sums_every_process_of_the_group_and_is_none_without_one():
    burners = subprocess.Popen([sys.executable, "-c", TWO_BURNERS], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            group = [rounddir._stat(pid) for pid in os.listdir("/proc") if pid.isdigit()]
            members = [f for f in group if f and int(f[2]) == burners.pid]
            if len(members) == 2 and all(f[0] == "T" for f in members):
                break
            assert time.monotonic() < deadline, members
            time.sleep(0.05)
        assert 0.5 <= rounddir.group_cpu_s(burners.pid) < 5
    finally:
        os.killpg(burners.pid, signal.SIGKILL)
        burners.wait()
    deadline = time.monotonic() + 10
    while rounddir.group_cpu_s(burners.pid) is not None:  # the forked child: collected by init
        assert time.monotonic() < deadline
        time.sleep(0.05)


# ------------------------------------------------------------ whole jobs of one round (loopback servers)


def loopback_plan(name: str) -> dict:
    return plan_dict(
        name=name, engine="reference", runtime="local",
        argv=[sys.executable, "-m", "specsweep.testing.loopback", "--ttft-ms", "5", "--itl-ms", "2"],
        workload={"endpoint": "generate", "num_prompts": 4, "input_len": 8, "output_len": 8,
                  "concurrency": 1, "request_rate": None, "repeats": 2, "seed": 0, "temperature": 0.0,
                  "request_timeout_s": 30,
                  "warmup": {"window": 2, "tolerance": 10.0, "min_windows": 1, "max_requests": 2}})


def test_two_server_jobs_of_a_side_by_side_round_measure_in_turn(tmp_path):
    order = [("loop-b", "1"), ("loop-a", "1")]
    results = tmp_path / "results"
    round_plan = write_round_plan(results / "rounds" / "round-1.json", order)
    procs = start_round_jobs(results, tmp_path / "locks", {n: loopback_plan(n) for n, _ in order}, order, round_plan)
    wait_all(procs, timeout_s=180)
    launches = {n: read_json(launch_dir(results, n, "1") / "launch.json") for n, _ in order}
    outcomes = {n: read_json(launch_dir(results, n, "1") / "outcome.json") for n, _ in order}
    for name, launch in launches.items():
        assert outcomes[name]["status"] == Status.OK, outcomes[name]
        assert outcomes[name]["format_version"] == 3
        assert (launch["round"], launch["design"]) == (1, "side-by-side")
        assert launch["position"] == [n for n, _ in order].index(name) + 1
        assert [p["state"] for p in launch["partners"]] == ["ready"]
        assert launch["partners_up"] == [f"{o}@1" for o, _ in order if o != name]
        # 1 warmup window (2 requests) and 2 repeats x 2 windows of 2
        assert launch["windows"] == 5 == len(launch["window_log"])
        assert launch["partner_cpu_share"] < sidebyside.PARTNER_CPU_SHARE_MAX
        assert outcomes[name]["side_by_side"]["windows"] == 5
        assert "host.lock" not in " ".join(launch["host_lock"]["paths"])  # the host was not held for its life
    spans = {n: window_spans(launch) for n, launch in launches.items()}
    assert overlaps(spans) == []
    # the round's order: loop-b's window first, then they alternate
    firsts = sorted((s, n) for n, ss in spans.items() for s, _, _ in ss)
    assert [n for _, n in firsts] == ["loop-b", "loop-a"] * 5
    # every request lies inside one of its own launch's windows
    for name, _ in order:
        records = read_jsonl(launch_dir(results, name, "1") / "warmup.jsonl") + \
            read_jsonl(launch_dir(results, name, "1") / "requests.jsonl")
        assert len(records) == 10
        for r in records:
            assert any(s <= r["send_ns"] and r["end_ns"] <= e for s, e, _ in spans[name]), r["request_id"]


def test_a_sequential_round_keeps_the_host_for_the_jobs_life_and_records_its_place(tmp_path):
    order = [("loop-a", "1"), ("loop-b", "1")]
    results = tmp_path / "results"
    round_plan = write_round_plan(results / "round-1.json", order, design="sequential", round_no=2)
    procs = start_round_jobs(results, tmp_path / "locks", {"loop-b": loopback_plan("loop-b")}, [("loop-b", "1")],
                             round_plan)
    wait_all(procs, timeout_s=120)
    launch = read_json(launch_dir(results, "loop-b", "1") / "launch.json")
    outcome = read_json(launch_dir(results, "loop-b", "1") / "outcome.json")
    assert outcome["status"] == Status.OK and "side_by_side" not in outcome
    assert (launch["round"], launch["position"], launch["design"]) == (2, 2, "sequential")
    assert any(p.endswith("host.lock") for p in launch["host_lock"]["paths"])
    assert "window_log" not in launch


def test_a_round_plan_without_this_launch_or_side_by_side_for_a_profiled_plan_is_refused_before_anything(tmp_path):
    from specsweep.contracts.rounds import RoundPlanError
    from specsweep.serve.job import run_config
    from specsweep.serve.jobspec import JobHost
    from specsweep.serve.lock import LockSettings

    out = tmp_path / "out"
    job = bare_job(loopback_plan("loop-a"), "1", tmp_path / "locks", out, io.StringIO())
    host = JobHost(lock=LockSettings(tmp_path / "locks", 1), workdir=tmp_path)
    plan_path = write_round_plan(tmp_path / "round.json", [("other", "1")])
    with pytest.raises(RoundPlanError, match=r"round 1: order has no entry \['loop-a', '1'\]"):
        run_config(loopback_plan("loop-a"), job.paths, None, io.StringIO(), host=host, round_plan=plan_path)
    profiled = {**loopback_plan("loop-a"), "profile": {"enabled": True}}
    plan_path = write_round_plan(tmp_path / "round2.json", [("loop-a", "1"), ("x", "1")])
    with pytest.raises(RoundPlanError, match="design side-by-side, but profiling on"):
        run_config(profiled, job.paths, None, io.StringIO(), host=host, round_plan=plan_path)
    assert not out.joinpath("outcome.json").exists()


def test_kill_of_a_side_by_side_job_takes_its_server_and_its_turn(tmp_path):
    """A job killed mid-round: its server goes (the reaper), its partner finishes alone, in its own turns."""
    order = [("loop-a", "1"), ("loop-b", "1")]
    results = tmp_path / "results"
    round_plan = write_round_plan(results / "round-1.json", order)
    plans = {n: loopback_plan(n) for n, _ in order}
    plans["loop-b"]["workload"]["repeats"] = 20
    procs = start_round_jobs(results, tmp_path / "locks", plans, order, round_plan)
    log = launch_dir(results, "loop-a", "1") / "logs" / "job.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "barrier passed" in log.read_text()):
        assert time.monotonic() < deadline and procs[0].poll() is None
        time.sleep(0.1)
    time.sleep(0.5)
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    wait_all(procs[1:], timeout_s=180)
    outcome = read_json(launch_dir(results, "loop-b", "1") / "outcome.json")
    assert outcome["status"] == Status.OK, outcome


def wait_for_line(log: Path, text: str, procs: list[subprocess.Popen], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not (log.exists() and text in log.read_text()):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            log.read_text() if log.exists() else f"no {log}"
        time.sleep(0.1)


def test_a_sequential_job_waits_for_a_side_by_side_round_without_holding_the_host_lock(tmp_path):
    """Another Snakemake invocation's (or checkout's) side-by-side round is up and about to measure when a
    sequential job arrives. Each of the round's windows needs the host lock: a job that held it while waiting
    for the round's servers to go would wait for jobs that wait for it, until the lock's wait (here 60 s), and
    then one of them fails ``host_busy``. Real jobs, real locks: the round's second launch is this test,
    registered and not ready until the sequential job is seen waiting for the host."""
    locks, wait_s = tmp_path / "locks", 60.0
    round_plan = write_round_plan(tmp_path / "b" / "round-1.json", [("loop-a", "1"), ("late", "1")])
    registry = rounddir.Registry(locks, REPO, round_plan, 1)
    late = {"config": "late", "launch": "1", "position": 2, "run_id": "1a7e1a7e1a7e", "job_pid": os.getpid(),
            "job_start": rounddir.start_time(os.getpid()), "server_pgid": None, "state": sidebyside.STARTING,
            "registered_at": time.time()}
    registry.write("late", "1", late)
    side = start_round_jobs(tmp_path / "b", locks, {"loop-a": loopback_plan("loop-a")}, [("loop-a", "1")],
                            round_plan, wait_s=wait_s)
    wait_for_line(launch_dir(tmp_path / "b", "loop-a", "1") / "logs" / "job.log", "waiting for partners", side)
    seq = start_round_jobs(tmp_path / "a", locks, {"loop-s": loopback_plan("loop-s")}, [("loop-s", "1")], None,
                           wait_s=wait_s)
    wait_for_line(launch_dir(tmp_path / "a", "loop-s", "1") / "logs" / "job.log",
                  "waiting: other specsweep servers run on this host", seq)
    registry.write("late", "1", {**late, "state": sidebyside.ENDED, "updated_at": time.time()})  # the round measures
    t0 = time.monotonic()
    wait_all([*side, *seq], timeout_s=240)
    took = time.monotonic() - t0
    launch_b = read_json(launch_dir(tmp_path / "b", "loop-a", "1") / "launch.json")
    outcome_b = read_json(launch_dir(tmp_path / "b", "loop-a", "1") / "outcome.json")
    launch_a = read_json(launch_dir(tmp_path / "a", "loop-s", "1") / "launch.json")
    outcome_a = read_json(launch_dir(tmp_path / "a", "loop-s", "1") / "outcome.json")
    assert outcome_b["status"] == Status.OK and launch_b["windows"] == 5, outcome_b
    assert outcome_a["status"] == Status.OK, outcome_a
    assert launch_a["host_before_launch"]["host_lock_released"] >= 1
    # the sequential server started once the round's server had ended, and nobody waited out the lock
    assert outcome_b["server_stopped_at"] < outcome_a["server_started_at"]
    assert took < wait_s, took


def test_a_side_by_side_job_does_not_launch_while_a_job_outside_its_round_holds_the_host_lock(tmp_path):
    """A sequential job holds the host lock from its look at the host until its server has ended: a side-by-side
    server started in between would run beside it. A partner's window or teardown holding it does not count."""
    import threading

    from specsweep.serve.jobspec import JobHost
    from specsweep.serve.lock import LockSettings, acquire

    locks = tmp_path / "locks"
    held = acquire(LockSettings(locks, 0), {"config": "seq", "run_id": "5e95e95e95e9"})
    assert quiet.foreign_lock_holder(locks, lambda: {"5e95e95e95e9"}) is None  # a partner's window
    assert quiet.foreign_lock_holder(locks, lambda: set())["config"] == "seq"
    host = JobHost(lock=LockSettings(locks, 60), workdir=tmp_path, guard_interval_s=0.5)
    log = io.StringIO()
    threading.Timer(2.0, held.release).start()
    t0 = time.monotonic()
    seen = quiet.wait_for_quiet_host("0e0e0e0e0e0e", host, 30, log, "side", known=lambda: set(), lock_free=True)
    assert time.monotonic() - t0 >= 1.9 and seen["waited_s"] >= 1.9
    assert "waiting: the host lock is held by pid" in log.getvalue() and "'seq'" in log.getvalue()
    assert quiet.foreign_lock_holder(locks, lambda: set()) is None


def test_a_window_s_host_lock_names_its_checkout_for_a_job_waiting_for_the_host(tmp_path):
    """What another job waiting for the host prints names whose run holds it, as for a sequential job's lock
    (a window's holder had no checkout: 'configuration 'a' of None')."""
    from specsweep.serve.lock import describe_holder, read_holder

    a = _side(tmp_path, "a", [("a", "1")])
    mine, held = a.take_turn()
    assert mine and held is not None
    try:
        holder = read_holder(held.paths[0])
        assert holder["checkout"] == a.job.identity[guard.CHECKOUT_ENV] and holder["round_window"] == a.name
        assert f"(configuration 'a' of {holder['checkout']}, run {a.job.run_id}, since " in describe_holder(holder)
    finally:
        held.release()
    assert " of None" not in describe_holder({"pid": 1, "config": "a", "run_id": "r", "since": 0.0})
