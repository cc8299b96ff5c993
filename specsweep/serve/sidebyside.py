"""A round measured side by side: every server of the round up at once, measured in turn, in short windows.

Why: servers that are up at the same time and measured in turn share the
machine's drift; launches minutes apart do not (``benchmarks/bench_cpu_drift.py``,
docs/measurements/2026-12-06-cpu-quiet: 7.9-9.4 % between rounds, 2.1-3.4 %
between servers measured in alternation). The launch stays the unit of
replication: each job still starts, measures and ends its own server. What
changes is what the host lock guards: the measurement, not the server's life.

A job of a ``side-by-side`` round (``contracts.rounds.RoundPlan``; plan time:
``plan.design``), in the order ``serve.job`` runs it:

1. holds for its life only its own launch's lock (``phases.launch_lock``), so an orphan
   and its rerun never write one file; registers in the round's directory
   (``serve.rounddir.Registry``: ``<lock_dir>/rounds/<key>/``, keyed by the
   checkout, the round plan's path and the round; one small JSON file per launch:
   run id, job pid, the server's process group, its state);
2. once no server but its partners' runs and no job outside the round holds the host lock
   (``phases.quiet_host``), starts its server without the host lock and waits until it is ready;
3. the barrier (``SideBySide.barrier``): waits until every partner's server is
   ready or has ended, so that nobody measures while another server starts; the
   deadline is the plan's ready timeout; a partner that failed, died or never
   registered (``REGISTER_GRACE_S``) is dropped and recorded;
4. warmup and measurement in windows (``client.Gate``): before each window the
   job takes the host lock (and its GPU's) *and* it must be its turn: a strict
   rotation in the round's order over the partners still measuring (``turn.json``
   in the round's directory, written under the lock); partners that ended or
   whose job died are skipped; a job waiting for its turn sleeps until a file of
   the round's directory changes (``serve.rounddir.DirWatch``), so it uses no CPU;
5. in each window it reads the CPU time of every partner's server (utime +
   stime of each process of its process group, ``/proc/<pid>/stat``) at the
   window's start and end, and samples the guard (``guard.sample``) at both ends.

An idle server must use no CPU, and the record shows it: ``partner_cpu_share``
(partners' CPU seconds over this job's window seconds, all windows) decides, with
the other specsweep servers seen, whether the result is ``contaminated``
(``contaminate_partners``); per window and the worst window are kept. A job
that has measured leaves the rotation at once and ends its server holding the
host lock (``SideBySide.ending``): a shutdown uses CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from specsweep.contracts.plan import Point
from specsweep.contracts.rounds import Design, RoundPlan
from specsweep.contracts.vocabulary import Reason, Stage, Status
from specsweep.serve import guard
from specsweep.serve.client import Gate
from specsweep.serve.jobspec import Job
from specsweep.serve.launch import gpu_ids
from specsweep.serve.lock import HostBusy, HostLock, LockSettings, acquire, lock_names
from specsweep.serve.rounddir import DirWatch, Registry, groups_cpu_s, job_alive, next_turn, start_time
from specsweep.serve.server import LaunchError

#: Requests a window holds at concurrency 1: two. The machine's speed moves over seconds (the record above),
#: so a window must be short for neighbours to share it; two requests of the default workload last about one
#: second on the CPU, against a hand-over of a few tens of ms (lock, turn file, two /proc scans), and a pair
#: lines up with the warmup's default window of 2. At a higher concurrency or with Poisson arrivals a window
#: is one measured repeat (``window_requests``): repeats are drained anyway, so the windows change nothing
#: of what is measured.
WINDOW_REQUESTS = 2
#: A partner's CPU share (cores, over this job's windows) at which it was not idle: 2 % of one core. An idle
#: reference-engine server blocks (its followers on a pipe, rank 0 in its event loop) and was measured at 0.000
#: CPU s in 2 s idle in three runs and 0.010 s (one clock tick, 0.5 %) in a fourth (tests/e2e/
#: test_side_by_side.py, TP=2); one clock tick (10 ms at 100 Hz) in one second of windows is 1 %, while a server
#: that serves or starts uses a whole core (100 %).
PARTNER_CPU_SHARE_MAX = 0.02


def partners_cpu_limit(tp_size: int, cores: int | None = None) -> float:
    """All partners together may use ``PARTNER_CPU_SHARE_MAX`` of each core the measured server leaves free
    (one per rank; at least one core's worth): on the 2-core CPU at TP=2, 2 % of a core as before; on a 16-core
    GPU host at TP=1, 30 %. Sixteen idle GPU servers tick now and then, together 0.7-2.0 % of a core over a
    launch's windows on an H100 (each at most one or two 10 ms ticks), which a single limit of 2 % for all of
    them called busy once in 33 launches."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return PARTNER_CPU_SHARE_MAX * max(1, cores - max(1, tp_size))


#: A partner that has not registered this long after this job did is not coming (a rerun of one launch):
#: Snakemake starts a round's jobs together, and each registers before anything slow (its imports, some
#: seconds on a loaded 2-core host, are all that comes first).
REGISTER_GRACE_S = 30.0
#: How often a job whose turn it is tries the host lock while the job before it lets go of it (milliseconds).
TURN_POLL_S = 0.02
#: A waiting job sleeps in the kernel until a file of the round's directory is replaced (``DirWatch``): a turn
#: passed, a partner ready or ended. A partner's death replaces no file, so it also looks this often. Measured
#: on this 2-core VM: a job waiting so used 0.16 % of a core; polling at 50 Hz had cost it 1.5 % (half of it
#: asyncio's own wake-ups), beside the server being measured.
DEATH_CHECK_S = 0.5
BARRIER_POLL_S = 0.25
#: At most this long a job waits for the host lock before ending its server anyway (longer than any window).
TEARDOWN_LOCK_WAIT_S = 120.0

STARTING, READY, MEASURING, ENDED, FAILED = "starting", "ready", "measuring", "ended", "failed"
_IN_ROTATION = (READY, MEASURING)


def window_requests(workload: Mapping[str, Any]) -> int:
    """Requests per window of one point (``WINDOW_REQUESTS``, or one repeat: ``num_prompts``)."""
    if int(workload.get("concurrency", 1)) == 1 and workload.get("request_rate") is None:
        return WINDOW_REQUESTS
    return int(workload["num_prompts"])


def round_record(round_plan: RoundPlan, config: str, launch: str) -> dict[str, Any]:
    """launch.json's part of any round: ``round``, ``position`` (1-based), ``design``, ``design_why``."""
    return {"round": round_plan.round, "position": round_plan.position(config, launch),
            "design": round_plan.design.value, "design_why": round_plan.why}


# ------------------------------------------------------------ the job's part in its round


class SideBySide:
    """One job's membership in a side-by-side round: registration, barrier, turns, CPU of the partners."""

    def __init__(self, job: Job, round_plan: RoundPlan, plan_path: Path,
                 register_grace_s: float = REGISTER_GRACE_S) -> None:
        if round_plan.design != Design.SIDE_BY_SIDE:
            raise ValueError(f"{plan_path}: design is {round_plan.design}, not side-by-side")
        self.job = job
        self.register_grace_s = register_grace_s
        self.key = (job.plan.name, job.launch_id)
        self.name = f"{job.plan.name}@{job.launch_id}"
        self.position = round_plan.position(*self.key)
        self.order = round_plan.order
        self.partners = round_plan.partners(*self.key)
        self.registry = Registry(job.host.lock.lock_dir, job.host.workdir, plan_path, round_plan.round)
        self.locks = lock_names(gpu_ids(job.plan, os.environ))
        self.entry: dict[str, Any] = {}
        self.registered_at = 0.0
        self.registered_mono = 0.0
        self.dropped: dict[tuple[str, str], str] = {}  # partner -> why it was not waited for
        self.barrier_record: list[dict[str, Any]] = []
        self.windows: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.known_run_ids: set[str] = set()  # partners' servers, as registered (never counted as foreign)
        self.up: set[str] = set()  # partners whose server had processes during one of this job's windows
        self.watch: DirWatch | None = None  # the round's directory, watched from registration on

    # -------------------------------------------------------- states

    def join(self) -> None:
        """Register (state ``starting``) before anything slow: partners count from here."""
        self.watch = DirWatch(self.registry.dir)
        self.registered_at, self.registered_mono = time.time(), time.monotonic()
        self.entry = {"config": self.key[0], "launch": self.key[1], "position": self.position,
                      "run_id": self.job.run_id, "job_pid": os.getpid(), "job_start": start_time(os.getpid()),
                      "server_pgid": None, "state": STARTING, "registered_at": self.registered_at}
        self._set(STARTING)

    def _set(self, state: str, **extra: Any) -> None:
        self.entry.update(extra, state=state, updated_at=time.time())
        self.registry.write(*self.key, self.entry)

    def started(self, pgid: int) -> None:
        self._set(STARTING, server_pgid=pgid)

    def ready(self) -> None:
        self._set(READY, ready_at=time.time())

    def leave(self, state: str = ENDED) -> None:
        """Measurement over (or the job failed): out of the rotation, not waited for."""
        if self.entry and self.entry.get("state") not in (ENDED, FAILED):
            self._set(state, ended_at=time.time())
        if self.watch is not None:
            self.watch.close()

    # -------------------------------------------------------- partners

    def current(self, partner: tuple[str, str]) -> dict[str, Any] | None:
        """The partner's entry of this round's run: its job alive, or registered with this one (not an
        earlier run's entry left in the directory)."""
        entry = self.registry.read(*partner)
        if entry is None:
            return None
        if job_alive(entry) or float(entry.get("registered_at") or 0) >= self.registered_at - self.register_grace_s:
            self.known_run_ids.add(str(entry.get("run_id")))
            return entry
        return None

    def known(self) -> set[str]:
        """Run ids of the partners' servers (read now; a server starts only after its job registered)."""
        for partner in self.partners:
            self.current(partner)
        return set(self.known_run_ids)

    def _partner_state(self, partner: tuple[str, str]) -> tuple[str, str | None]:
        """(``waiting`` | ``ready`` | ``ended`` | ``dropped``, why) of a partner, now."""
        entry = self.current(partner)
        if entry is None:
            if time.monotonic() - self.registered_mono >= self.register_grace_s:
                return "dropped", f"never registered within {self.register_grace_s:g} s (not started in this run)"
            return "waiting", None
        state = entry.get("state")
        if state in (ENDED, FAILED):
            return "ended", f"its job {state}"
        if not job_alive(entry):
            return "dropped", "its job died"
        return ("ready", None) if state in _IN_ROTATION else ("waiting", None)

    def barrier(self, timeout_s: float) -> dict[str, Any]:
        """Wait until every partner is ready or has ended (module docstring, 3.); launch.json's ``partners``."""
        t0 = time.monotonic()
        told = False
        while True:
            states = {p: self._partner_state(p) for p in self.partners}
            waiting = [p for p, (s, _) in states.items() if s == "waiting"]
            if not waiting:
                break
            if time.monotonic() - t0 >= timeout_s:
                for p in waiting:
                    states[p] = ("dropped", f"not ready within the ready timeout ({timeout_s:g} s)")
                break
            if not told:
                print(f"side by side: waiting for partners {['@'.join(p) for p in waiting]} (at most "
                      f"{timeout_s:g} s)", file=self.job.log, flush=True)
                told = True
            time.sleep(BARRIER_POLL_S)
        self.barrier_record = [{"config": p[0], "launch": p[1], "state": s, "why": why,
                                "run_id": (self.registry.read(*p) or {}).get("run_id") if s != "dropped" else None}
                               for p, (s, why) in states.items()]
        self._set(MEASURING)
        print(f"side by side: barrier passed after {time.monotonic() - t0:.1f} s: "
              + ", ".join(f"{r['config']}@{r['launch']} {r['state']}" for r in self.barrier_record),
              file=self.job.log, flush=True)
        return {"partners": self.barrier_record, "barrier_s": round(time.monotonic() - t0, 3)}

    def members(self) -> list[int]:
        """Positions in the rotation now: this job and every partner past its readiness and still measuring."""
        out = [self.position]
        for p in self.partners:
            entry = self.current(p)
            if entry and entry.get("state") in _IN_ROTATION and job_alive(entry):
                out.append(self.order.index(p) + 1)
        return out

    def partner_cpu(self) -> dict[str, float | None]:
        """CPU seconds of each partner's server so far (None: no server process, or not started)."""
        pgids = {}
        for p in self.partners:
            entry = self.current(p)
            pgids["@".join(p)] = int(entry["server_pgid"]) if entry and entry.get("server_pgid") else None
        cpu = groups_cpu_s(g for g in pgids.values() if g is not None)
        return {name: cpu[g] if g is not None else None for name, g in pgids.items()}

    # -------------------------------------------------------- windows

    def gate(self, point: Point) -> Gate:
        """The client's gate for one point: windows of ``window_requests``, each one of this job's turns."""
        return Gate(requests=window_requests(point.workload),
                    enter=lambda phase: _Window(self, f"{point.name}/{phase}"))

    def holder(self, **what: str) -> dict[str, Any]:
        """What this job writes into the host lock while it holds it (as a sequential job does: whose
        configuration, checkout and run), for a job waiting for the host to name."""
        return {"config": self.job.plan.name, "checkout": self.job.identity[guard.CHECKOUT_ENV],
                "run_id": self.job.run_id, **what}

    def take_turn(self) -> tuple[bool, HostLock | None]:
        """(whether it is this job's turn, the host lock when it is and the lock was free)."""
        if next_turn(self.members(), self.registry.last_turn()) != self.position:
            return False, None
        try:
            lock = acquire(LockSettings(self.job.host.lock.lock_dir, 0.0),
                           self.holder(round_window=self.name),
                           names=self.locks)
        except HostBusy:
            return True, None
        if next_turn(self.members(), self.registry.last_turn()) != self.position:  # changed before we locked
            lock.release()
            return False, None
        return True, lock

    def sample(self, with_docker: bool = True) -> dict[str, Any]:
        """The guard's look at the host (``guard.sample``), kept for ``host_record``."""
        s = guard.sample(self.job.run_id, self.job.host.docker, with_docker)
        self.samples.append(s)
        return s

    @contextlib.contextmanager
    def ending(self, wait: bool = True) -> Iterator[None]:
        """The host lock while this job's server ends: a server shutting down uses CPU (measured: a third of a
        CPU second in a partner's window), so nobody measures meanwhile. ``wait``: False when interrupted (no
        waiting then; the reaper's bound holds)."""
        try:
            lock = acquire(LockSettings(self.job.host.lock.lock_dir, TEARDOWN_LOCK_WAIT_S if wait else 0.0),
                           self.holder(round_teardown=self.name),
                           names=self.locks)
        except HostBusy as exc:
            print(f"side by side: ending the server without the host lock: {exc}", file=self.job.log, flush=True)
            lock = None
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    # -------------------------------------------------------- what is recorded

    def share(self) -> float | None:
        """Partners' CPU seconds over this job's window seconds, all windows (cores); None without windows."""
        wall = sum(w["wall_s"] for w in self.windows)
        return sum(w["partner_cpu_s_total"] for w in self.windows) / wall if wall > 0 else None

    def busiest(self) -> float | None:
        """The busiest partner's CPU seconds over this job's window seconds (cores); None without windows."""
        wall = sum(w["wall_s"] for w in self.windows)
        used: dict[str, float] = {}
        for w in self.windows:
            for name, cpu_s in w["partner_cpu_s"].items():
                used[name] = used.get(name, 0.0) + (cpu_s or 0.0)
        return max(used.values(), default=0.0) / wall if wall > 0 else None

    def summary(self) -> dict[str, Any]:
        """launch.json's side-by-side part (and outcome.json's ``side_by_side``)."""
        share, busiest = self.share(), self.busiest()
        return {"partners_up": sorted(self.up), "windows": len(self.windows),
                "partner_cpu_share": None if share is None else round(share, 5),
                "partner_cpu_share_max": max((w["partner_cpu_share"] for w in self.windows), default=None),
                "partner_cpu_share_limit": round(partners_cpu_limit(int(self.job.plan.facts.get("tp_size") or 1)), 5),
                "partner_cpu_share_busiest": None if busiest is None else round(busiest, 5),
                "partner_cpu_share_busiest_limit": PARTNER_CPU_SHARE_MAX}

    def host_record(self) -> dict[str, Any]:
        """The guard's summary of the samples at this job's window boundaries (``guard.summarize``)."""
        return guard.summarize(self.samples)

    def foreign(self, host_record: Mapping[str, Any]) -> dict[str, Any]:
        """``host_record`` with only the servers seen that are not this round's partners."""
        known = self.known()
        return {**host_record, "others_seen": [o for o in host_record.get("others_seen") or []
                                               if o.get("run_id") not in known],
                "partners_seen": [o for o in host_record.get("others_seen") or [] if o.get("run_id") in known]}


class _Window:
    """One window (``client.Gate.enter``): the turn and the host lock for its length, the partners' CPU read at
    both ends, the guard sampled at both ends, the turn passed on."""

    def __init__(self, side: SideBySide, label: str) -> None:
        self.side, self.label = side, label
        self.lock: HostLock | None = None

    async def __aenter__(self) -> None:
        side = self.side
        t0 = time.monotonic()
        wait_s = side.job.host.lock.wait_s
        watch = side.watch or DirWatch(None)
        while True:
            watch.drain()  # what changed so far is read below; a change from here on wakes the wait
            mine, lock = side.take_turn()
            if lock is not None:
                break
            if time.monotonic() - t0 >= wait_s:
                raise LaunchError(Stage.BENCHMARK, Reason.HOST_BUSY,
                                  f"not this launch's turn within {wait_s:g} s (SPECSWEEP_LOCK_WAIT_S); "
                                  f"round directory {side.registry.dir}")
            if mine:  # the job before is letting go of the lock (or a job outside the round holds it)
                await asyncio.sleep(TURN_POLL_S)
            else:
                await watch.wait(DEATH_CHECK_S)
        self.lock, self.waited_s = lock, time.monotonic() - t0
        self.sample0 = side.sample()
        self.cpu0 = side.partner_cpu()
        self.t0_ns, self.t0 = time.perf_counter_ns(), time.monotonic()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        side = self.side
        try:
            t1_ns, wall = time.perf_counter_ns(), time.monotonic() - self.t0
            cpu1 = side.partner_cpu()
            side.sample(with_docker=False)  # containers were looked for at the start (``docker ps`` is slow)
            used = {k: (None if cpu1[k] is None or self.cpu0.get(k) is None else round(cpu1[k] - self.cpu0[k], 3))
                    for k in cpu1}
            side.up.update(k for k in cpu1 if cpu1[k] is not None or self.cpu0.get(k) is not None)
            total = sum(v for v in used.values() if v is not None)
            side.windows.append({"window": len(side.windows), "label": self.label, "start_ns": self.t0_ns,
                                 "end_ns": t1_ns, "wall_s": round(wall, 4), "waited_s": round(self.waited_s, 4),
                                 "partner_cpu_s": used, "partner_cpu_s_total": round(total, 3),
                                 "partner_cpu_share": round(total / wall, 4) if wall > 0 else 0.0,
                                 "others": len(self.sample0["others"])})
            side.registry.pass_turn(side.position, side.name, len(side.windows))
        finally:
            assert self.lock is not None
            self.lock.release()


def contaminate_partners(points: Mapping[str, Mapping[str, Any]], verdict: Mapping[str, Any],
                         summary: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The points and the verdict once the partners' CPU is known: one partner at ``PARTNER_CPU_SHARE_MAX`` or
    more over this job's windows, or all of them at ``partners_cpu_limit`` or more, and an ok result is
    ``contaminated`` (``partner_busy``); below, the partners were idle."""
    share, busiest = summary.get("partner_cpu_share"), summary.get("partner_cpu_share_busiest")
    limit = summary.get("partner_cpu_share_limit") or PARTNER_CPU_SHARE_MAX
    if share is None or (share < limit and (busiest or 0.0) < PARTNER_CPU_SHARE_MAX):
        return {k: dict(v) for k, v in points.items()}, dict(verdict)
    why = {"status": Status.CONTAMINATED, "stage": Stage.BENCHMARK, "reason": Reason.PARTNER_BUSY,
           "detail": f"the round's other servers used {share:.1%} of a core during this launch's windows "
                     f"(at most {limit:.0%}), the busiest {busiest or 0.0:.1%} (at most "
                     f"{PARTNER_CPU_SHARE_MAX:.0%}); worst window {summary.get('partner_cpu_share_max')}"}
    points = {k: {**v, **why} if v["status"] == Status.OK else dict(v) for k, v in points.items()}
    return points, {**verdict, **why} if verdict["status"] == Status.OK else dict(verdict)
