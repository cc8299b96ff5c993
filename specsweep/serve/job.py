"""The server job: one configuration's server, from launch to teardown.

Why one job and not Snakemake ``service()`` rules: a service whose consumer
starts late makes Snakemake 9 hang with the server still running, and a
crashed service goes unnoticed. Here the job owns the server's whole life and
ends it in ``finally`` (and on SIGTERM/SIGINT), while every stage still leaves
its own file: ``launch.json`` (argv, readiness time, provenance read from
inside the server), ``server.log``, ``warmup.jsonl``, ``requests.jsonl`` and
``outcome.json``. A failure at any stage is a result, written to
``outcome.json``; only an interruption makes the job itself fail.

The job is a runner over phases (``serve.phases``): each phase is a small
function that returns its part of ``launch.json`` or ``outcome.json``; the
runner (``_Runner``) alone records them, knows the stage the job is in,
catches the one failure type (``contracts.vocabulary.Failure``: a phase's
result that is a failure) and always tears down. Its life cycle, in the order
``run_config`` enters it:

1. ``watch_parents``: the job tears down (as on SIGTERM) when Snakemake dies
   (``serve.watchdog``).
2. host: ``launch_lock``, the launch's own lock, taken before the job touches
   its files and released after ``outcome.json`` is written, so an orphaned
   job and its rerun never write the same files at once; ``host_lock``: one
   server per host, whatever the checkout, Snakemake invocation or
   ``--resources`` (``serve.lock``); waits with a message, then fails
   ``host_busy``. Then the files are this run's, the prompts are read,
   leftovers of this checkout removed, and the host must be free of other
   specsweep servers (``serve.guard``): while it is not, the job lets go of
   the host lock and waits without it (a side-by-side round's servers take
   the lock for each window: ``phases.quiet_host_locked``), then takes it
   again; ``host_busy`` after the lock's wait.
3. ``reaper``: ends the server group and the run's container if the job dies.
4. micro-benchmark (profiling on): before the server, on free GPUs.
5. launch: the server, with the guard sampling beside it until measurement
   ends; the readiness wait; what the server runs (``server_info``,
   provenance) into ``launch.json``.
6. points: per point its warmup, then its measured repeats; the launch's
   verdict from its points; the guard's: a result measured beside another
   server is ``contaminated``, never ``ok``.
7. profile (profiling on, nothing failed): the profiler's trace.
8. teardown, always: the server ended, the records of the points joined,
   every file written (``outcome.json`` last); a signal now ends the server
   at once and loses no file (``_Runner._finish``).

One run id (``records.new_run_id``) is in every file the job writes.

``runtime: external`` (a server that runs without this workflow, at the plan's
``url``): the attach phases replace host lock, reaper and launch (nothing
started or torn down; the quiet-host wait and the guard stay, since the client
runs here), and what the server runs is its ``/server_info``; the phases from
the points on are the same for both.

One job is one *launch* of a configuration (``launch``: ``1``, ``2``, ... or
``aa``, the A/A control; ``plan.launches``), with its own files under
``results/<config>/launch-<launch>/`` (its NCCL files under ``nccl/`` there)
and its own run id. It measures every workload point of the plan
(``Plan.measured_points``) against the same server, after one readiness
wait: warmup and measurement per point, in the plan's order, each with its
own selected prompts. The records of all points share the launch's two
record files and its run id, each record carrying its ``point``;
``outcome.json`` has one entry per point under ``points``. A point that fails
is a result of that point: the next point still runs while the server is
alive. The guard samples the host over all points; another server seen makes
every point ``contaminated``.

Format history of outcome.json:
  1  status, stage, reason, detail, warmup, exit_code, log_tail; then, without
     a version: run_id, host, server_started_at, server_stopped_at,
     status "contaminated".
  2  + format_version, launch (the launch id), points = {point: {status,
     stage, reason, detail, warmup}} in measuring order; the top-level status
     is ok only when every point is, else stage/reason/detail of the launch or
     of the first failed point; warmup = the first point's (as in 1 for a
     single point); started_at, ended_at (time.time()).
     (later: written by the runner over phases; the keys and their values are as before.)
  3  + side_by_side (a launch of a side-by-side round only: serve.sidebyside's summary:
     partners_up, windows, partner_cpu_share, partner_cpu_share_max, partner_cpu_share_limit);
     host.partners_seen; reason partner_busy (status contaminated).
     launch.json, which has no version of its own, gains with it round, position, design,
     design_why (any launch given a round plan) and, side by side, partners (config, launch,
     state ready/ended/dropped, why, run_id), barrier_s, window_log (one entry per window) and
     the summary's keys; it is now written again at the end of the job, with every key.
     (later, within 3: side_by_side gains partner_cpu_share_busiest and partner_cpu_share_busiest_limit, and
     partner_cpu_share_limit scales with the host's free cores, ``sidebyside.partners_cpu_limit``.)

A launch given a round plan (``contracts.rounds``, ``round_plan``) of design
``side-by-side`` runs its server beside the round's others and measures in
windows, one server at a time (``serve.sidebyside``): instead of the host lock
for its life it holds its own launch's lock, registers in the round, waits for
its partners after readiness (the barrier), and takes the host lock for each
window; the guard samples at the windows' ends, and the partners' servers are
known, not contamination, while their CPU stays below the limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from specsweep.contracts.layout import NCCL_LOG_DIR
from specsweep.contracts.plan import Plan
from specsweep.contracts.rounds import Design, RoundPlan, RoundPlanError
from specsweep.contracts.vocabulary import Failure, Reason, Stage, Status
from specsweep.files import write_json_atomic, write_jsonl_atomic, write_text_atomic
from specsweep.plan.design import why_not_side_by_side
from specsweep.records import EXTERNAL_RUNTIME, new_run_id, run_header
from specsweep.serve import guard, kernel_cache, phases, sidebyside
from specsweep.serve import profile as profiling
from specsweep.serve.console import job_console
from specsweep.serve.container import checkout_id
from specsweep.serve.jobspec import Job, JobHost, JobPaths
from specsweep.serve.launch import LAUNCH_ENV, identity_env, with_nccl_debug_file
from specsweep.serve.server import TERM_GRACE_S, AttachedServer, Server, tail
from specsweep.serve.slurm import EndWatch, slurm_job
from specsweep.serve.watchdog import REAP_GRACE_S, ParentWatch, watch_parents

__all__ = ["OUTCOME_FORMAT_VERSION", "Interrupted", "JobHost", "JobPaths", "run_config"]

OUTCOME_FORMAT_VERSION = 3
#: A wait for the host (its lock, then no other specsweep server) at least this long is said on the terminal
#: with the job's next line (the log has its own lines: serve.lock, quiet.wait_for_quiet_host).
WAIT_SAID_S = 1.0


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived: tear down, record, and fail the job.

    A KeyboardInterrupt on purpose: asyncio's event loop logs and swallows any
    other BaseException raised inside a callback, so a signal that lands while
    the client streams would be lost and the benchmark would run on.
    """


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def run_config(plan: Plan | Mapping[str, Any], paths: JobPaths, image_manifest: dict | None, log: TextIO,
               registry: Mapping[str, Any] | None = None, *, host: JobHost | None = None,
               launch_id: str = "1", round_plan: Path | str | None = None, console: bool = True) -> dict:
    """Launch, wait, warm up and measure every point, tear down; return (and write) the outcome
    (life cycle: module docstring).

    ``plan``: the configuration's plan (``contracts.plan.Plan``, or plan.json's object).
    ``registry`` (the config's ``registry:``) is where a container runtime
    pulls an image that is not on this host (a cluster node never builds).
    ``host``: the lock, the checkout and the guard's interval (``JobHost``).
    ``launch_id``: which launch of the configuration this job is (``plan.launches``).
    ``round_plan``: the round's file (``contracts.rounds``), or None (no round: the job as always); a file
    that cannot be read, that does not list this launch, or that asks side by side of a server that cannot
    be measured so (``plan.design``) is a ``RoundPlanError`` before anything starts.
    ``console``: the job's few lines on the terminal (off for a caller that says its own: the burn-in's units);
    a wait for the host is said either way.
    """
    plan = plan if isinstance(plan, Plan) else Plan.from_dict(plan)
    round_ = _read_round(round_plan, plan, launch_id) if round_plan is not None else None
    host = host or JobHost()
    run_id = new_run_id()
    nccl_dir = paths.nccl_logs or paths.server_log.parent / NCCL_LOG_DIR
    if plan.runtime != EXTERNAL_RUNTIME:
        # The server's environment names its launch (provenance shows it; a test-only fault reads it).
        plan = with_nccl_debug_file(plan.replace(env={**plan.env, LAUNCH_ENV: launch_id}), nccl_dir)
    job = Job(plan=plan, paths=paths, host=host, run_id=run_id, launch_id=launch_id, log=log,
              console=job_console(host.notice if console else None, plan.name, launch_id),  # (serve.console)
              image_manifest=image_manifest, registry=registry, identity=identity_env(run_id, plan.name, host.workdir),
              checkout=checkout_id(host.workdir), nccl_dir=nccl_dir, round=round_,
              round_plan_path=Path(round_plan) if round_plan is not None else None)
    return _Runner(job).run()


def _read_round(path: Path | str, plan: Plan, launch_id: str) -> RoundPlan:
    round_ = RoundPlan.load(path)
    round_.position(plan.name, launch_id)
    if round_.design == Design.SIDE_BY_SIDE and (against := why_not_side_by_side([plan])):
        raise RoundPlanError(f"{path}: design side-by-side, but {against}")
    return round_


class _LateSignals:
    """SIGINT and SIGTERM during the teardown: noted, never lost with the files being written; raised as
    ``Interrupted`` only inside ``raising()`` (while the server stops, to cut its grace short)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._raise = False

    def handler(self, signum: int, _frame: Any) -> None:
        self.names.append(signal.Signals(signum).name)
        if self._raise:
            self._raise = False  # once: the stop that follows is the quick one
            raise Interrupted(self.names[-1])

    @contextlib.contextmanager
    def raising(self) -> Any:
        self._raise = True
        try:
            yield
        finally:
            self._raise = False

    def said(self) -> str:
        return "received " + ", ".join(self.names)


class _Runner:
    """One job's run over its phases. The one place that records: ``launch`` (launch.json) grows by each
    phase's part; the outcome is put together from the parts at the end (``outcome``)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.started_at = time.time()
        self.launch: dict[str, Any] = {
            "plan_name": job.plan.name, "launch": job.launch_id, "started_at": self.started_at, "run_id": job.run_id,
            "points": [p.name for p in job.points], "checkout": job.identity[guard.CHECKOUT_ENV],
            "checkout_id": job.checkout, "slurm": slurm_job(os.environ)}
        if job.round is not None:
            self.launch.update(sidebyside.round_record(job.round, job.plan.name, job.launch_id))
        self.side: sidebyside.SideBySide | None = None  # a side-by-side round's membership, once registered
        self.stage: str = Stage.LAUNCH  # where the job is (an interruption names it; a Failure carries its own)
        self.current: tuple[str, str] | None = None  # the point being measured, and its stage
        self.points: dict[str, dict[str, Any]] = {}  # each point's entry, as its phase returned it
        self.verdict: dict[str, Any] | None = None  # the launch's, from its points and the guard
        self.failure: dict[str, Any] | None = None  # stage, reason, detail of the Failure that ended it
        self.interrupted: str | None = None  # who or what interrupted it
        self.server_times: dict[str, Any] = {}  # server_started_at, exit_code, server_stopped_at
        self.host_record: dict[str, Any] | None = None  # the guard's summary
        self.server: Server | AttachedServer | None = None
        self.sampler: guard.Sampler | None = None
        self.watch: ParentWatch | None = None
        self.owns_files = False  # true once the host lock is ours: before, an orphan of this config may still write

    def record(self, part: Mapping[str, Any]) -> Mapping[str, Any]:
        """A phase's part of launch.json."""
        self.launch.update(part)
        return part

    def on_stage(self, point: str, stage: str) -> None:
        self.current = (point, stage)
        self.stage = stage

    # ------------------------------------------------------------ the run

    def run(self) -> dict:
        job = self.job
        previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
        # Under Slurm, SIGTERM reaches only the job step's snakemake: ask the scheduler (specsweep.serve.slurm).
        end_watch = EndWatch(self.launch["slurm"]["job_id"], job.log).start() if self.launch["slurm"] else None
        stack = contextlib.ExitStack()
        try:
            self.watch = stack.enter_context(watch_parents(job.log))
            if job.plan.runtime == EXTERNAL_RUNTIME:
                self._attached()
            else:
                self._launched(stack)
        except Failure as exc:
            self.failure = phases.failure_of(exc, self.server)
        except Interrupted as exc:
            self.interrupted = (self.watch.fired if self.watch and self.watch.fired else None) or f"received {exc}"
            raise
        finally:
            outcome = self._finish(end_watch, previous, stack)
        return outcome

    def _launched(self, stack: contextlib.ExitStack) -> None:
        job = self.job
        side = job.round is not None and job.round.design == Design.SIDE_BY_SIDE
        # host: this launch's own lock for the job's life; sequential, the host lock too (side by side: per window)
        holder = {**self.launch, "config": job.plan.name}
        own = phases.launch_lock(job, holder)  # the launch's files are this job's, whoever holds the host
        stack.callback(own.release)
        if side:
            lock = own
        else:
            lock = phases.host_lock(job, holder)
            stack.callback(lock.release)
        self.record({"host_lock": lock.record()})
        self._own_files()
        prompts = phases.point_prompts(job)
        phases.check_target(job)
        self.record(phases.prepare_runtime(job))
        cache = self.record(phases.kernel_caches(job))["kernel_cache"]
        if side:
            assert job.round is not None and job.round_plan_path is not None
            self.side = sidebyside.SideBySide(job, job.round, job.round_plan_path)
            self.side.join()
        waited = lock.waited_s
        if self.side is not None:
            known = self.side.known
            # no server but the partners', and no job outside the round holding the host lock (a sequential
            # one may be about to launch)
            quiet = self.record(phases.quiet_host(job, job.host.lock.wait_s - lock.waited_s, known, lock_free=True))
        else:  # never waiting for a server while holding the host lock (a side-by-side round's windows need it)
            known = None
            lock, quiet = phases.quiet_host_locked(job, lock, holder, job.host.lock.wait_s - lock.waited_s,
                                                   on_lock=lambda taken: stack.callback(taken.release))
            self.record(quiet)
        waited += quiet["host_before_launch"]["waited_s"]
        if waited >= WAIT_SAID_S:  # the terminal got "waiting ..." at once; how long, with the next line
            job.defer(f"had the host after {waited:.1f} s of waiting")
        phases.refuse_busy_gpus(self.record(phases.gpus_in_use(job, known)))
        # Entered before the micro-benchmark: its process group and container are this run's too.
        reap = stack.enter_context(phases.reaper_of(job, lock))
        # micro-benchmark
        volumes = phases.micro_benchmark(job, on_start=reap.watch_group)
        # launch
        launch = phases.server_launch(job, [*volumes, *kernel_cache.volumes(cache)])
        self.record(launch.record(job))
        log_file = stack.enter_context(phases.server_log(job))
        self.server = server = phases.new_server(job, launch, log_file, tuple(lock.fds))
        # Side by side the guard samples at this launch's windows' ends, not beside the server all along.
        self.sampler = phases.start_guard(job) if self.side is None else None
        self.record(phases.start_server(job, server, reap.watch_group))
        if self.side is not None:
            self.side.started(self.launch["pid"])  # the server leads its own process group: its pid
        self.server_times["server_started_at"] = time.time()
        self.record(phases.await_ready(job, server))
        job.defer(f"ready after {self.launch['ready_s']:.1f} s")  # said with the warmup's result
        self.record(phases.read_server_info(server))
        self.record(phases.read_provenance(server))
        if self.side is not None:
            self.side.ready()
            self.record(self.side.barrier(job.plan.ready_timeout_s))
            job.say("side by side: " + ", ".join(f"{p['config']}@{p['launch']} {p['state']}"
                                                 for p in self.launch["partners"]))
        write_json_atomic(job.paths.launch, self.launch)
        self._measure(server, prompts)

    def _attached(self) -> None:
        job = self.job
        self.record({"host_lock": None})  # one server per host is a launch's rule: this job starts none
        self._own_files()
        prompts = phases.point_prompts(job)
        self.record(phases.attach_record(job))
        # No lock, but no measuring beside another specsweep server of this host either (the client runs here).
        self.record(phases.quiet_host(job, job.host.lock.wait_s))
        server = phases.attached_server(job)
        self.record(phases.await_ready(job, server))
        self.record(phases.attached_info(job, server))
        write_json_atomic(job.paths.launch, self.launch)
        self.server = server
        job.say(f"attached to {job.plan.url} (nothing launched), ready after {self.launch['ready_s']:.1f} s; "
                f"every line in {job.log_name}")
        self.sampler = phases.start_guard(job)
        self._measure(server, prompts)

    def _side_record(self) -> dict[str, Any]:
        """launch.json's side-by-side part: the summary, and every window."""
        assert self.side is not None
        self.record({"window_log": self.side.windows})
        return dict(self.record(self.side.summary()))

    def _own_files(self) -> None:
        self.owns_files = True
        phases.own_files(self.job)

    def _measure(self, server: Server | AttachedServer, prompts: Mapping[str, Any]) -> None:
        """The phases after readiness, the same for a launched and an attached server."""
        self.stage = Stage.WARMUP
        side = self.side
        for name, entry in phases.measure_points(self.job, server, prompts, self.on_stage,
                                                 side.gate if side is not None else None):
            self.points[name] = entry
            self.current = None
        verdict = phases.settle(self.points)
        if side is None:
            assert self.sampler is not None
            self.host_record = guard.summarize(self.sampler.stop())  # measurement is over
            self.points, self.verdict = phases.contaminate(self.points, verdict, self.host_record)
        else:
            side.leave(sidebyside.ENDED)  # out of the rotation at once: the partners go on without waiting
            write_jsonl_atomic(phases.guard_log(self.job), side.samples)
            self.host_record = side.foreign(side.host_record())  # the partners' servers are known, not others
            points, verdict = phases.contaminate(self.points, verdict, self.host_record)
            self.points, self.verdict = sidebyside.contaminate_partners(points, verdict, self._side_record())
        if self.verdict["status"] != Status.FAILED:
            phases.profile(self.job, server, prompts)

    # ------------------------------------------------------------ teardown

    def _finish(self, end_watch: EndWatch | None, previous: Mapping[int, Any], stack: contextlib.ExitStack) -> dict:
        """Always: the server ended, the guard stopped, the files written; the outcome.

        A SIGINT or SIGTERM that arrives now (a second Ctrl-C, or the first one after the last point) loses
        nothing: while the server stops it cuts the stop short (the server is killed at once), and from then on
        it is only noted in the log, so that outcome.json, the other files and the outcome line are written
        and said whatever comes; the job's old handlers are back only once the host lock is gone. The outcome is
        what is true: a launch interrupted before is ``interrupted`` and the job fails as before; one whose
        points were all measured keeps its result, and the job ends with it."""
        job = self.job
        late = _LateSignals()
        for signum in previous:
            signal.signal(signum, late.handler)
        try:
            if self.side is not None:
                self.side.leave(sidebyside.FAILED if self.failure or self.interrupted else sidebyside.ENDED)
                self._side_record()
            if end_watch is not None:
                end_watch.stop()
            self._stop_server(late)
            if self.sampler is not None and self.host_record is None:
                self.host_record = guard.summarize(self.sampler.stop())
            if self.watch is not None:
                # before the old handlers are back: a late parent-death SIGTERM must not kill the writes
                self.watch.stop()
            outcome = self.outcome()
            if self.owns_files:
                phases.join_point_records(job)
            if self.owns_files or not self.interrupted:
                profiling.finish(job.plan, job.paths.profile, job.paths.allreduce_bench, job.run_id)
                _write_job_files(job.paths, self.launch, outcome, job.run_id, job.plan.name, job.nccl_dir)
            if late.names:
                print(f"{late.said()} during the teardown: the server was ended at once; "
                      + ("the job stops as interrupted" if self.interrupted else "the outcome stands"),
                      file=job.log)
            line = f"outcome: {outcome['status']} {outcome.get('stage') or ''} {outcome.get('reason') or ''}"
            print(line, file=job.log)
            job.say(line.rstrip())
            return outcome
        finally:
            try:
                stack.close()  # the reaper is told done, then the host lock goes
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    def _stop_server(self, late: _LateSignals) -> None:
        """The server ended: interrupted (Ctrl-C, a dead Snakemake), within the same bound as the reaper's, so that
        a kill leaves nothing running for longer than seconds; a normal end gives the server its full grace. A
        signal during the stop ends the server at once (SIGKILL)."""
        grace = REAP_GRACE_S if self.interrupted else TERM_GRACE_S
        try:
            with late.raising():
                with self.side.ending(wait=not self.interrupted) if self.side else contextlib.nullcontext():
                    self.server_times.update(phases.teardown(self.server, grace))
        except Interrupted:
            self.server_times.update(phases.teardown(self.server, 0.0))

    def outcome(self) -> dict[str, Any]:
        """outcome.json, from the parts the phases returned (format: module docstring)."""
        points = dict(self.points)
        if self.current is not None and self.current[0] not in points:
            points[self.current[0]] = phases.unfinished_point(self.current[1])
        out: dict[str, Any] = {"format_version": OUTCOME_FORMAT_VERSION, "run_id": self.job.run_id,
                               "launch": self.job.launch_id, "points": points, "started_at": self.started_at}
        if self.verdict is not None:
            out.update(self.verdict)
        else:
            out.update(status=Status.FAILED, stage=self.stage, reason=None, detail=None)
        if self.failure is not None:
            out.update(status=Status.FAILED, **self.failure)
        if self.interrupted is not None:
            out.update(reason=Reason.INTERRUPTED, detail=self.interrupted)
        out.update(self.server_times)
        if self.host_record is not None:
            out["host"] = self.host_record
        if self.side is not None:
            out["side_by_side"] = self.side.summary()
        out["log_tail"] = tail(self.job.paths.server_log) if out["status"] != Status.OK else None
        out["ended_at"] = time.time()
        return out


def _write_job_files(paths: JobPaths, launch: dict, outcome: dict, run_id: str, config: str, nccl_dir: Path) -> None:
    """Every file of the job exists at its end (NCCL's directory empty when no server ran), and none holds another
    run's data; launch.json again, with what the job learnt after readiness (a side-by-side round's windows)."""
    nccl_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(paths.launch, launch)
    for path in (paths.warmup, paths.requests):
        if path.exists() and path.stat().st_size and _first_json_run_id(path) != run_id:
            path.unlink()  # an earlier run's records (this run failed before writing its own)
        if not path.exists():
            write_text_atomic(path, "")
    header = run_header(run_id, config).encode()
    try:
        with paths.server_log.open("rb") as fh:
            ours = fh.read(len(header)) == header
    except FileNotFoundError:
        ours = False
    if not ours:
        write_text_atomic(paths.server_log, header.decode() + "# no server was started by this run\n")
    write_json_atomic(paths.outcome, outcome)


def _first_json_run_id(path: Path) -> str | None:
    """``run_id`` of a JSON file, or of the first record of a JSONL file; None when absent or unreadable."""
    try:
        with path.open() as fh:
            text = fh.read() if path.suffix == ".json" else fh.readline()
        return json.loads(text).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
