"""The server job: one configuration's server, from launch to teardown.

Why one job and not Snakemake ``service()`` rules: a service whose consumer
starts late makes Snakemake 9 hang with the server still running, and a
crashed service goes unnoticed. Here the job owns the server's whole life and
ends it in ``finally`` (and on SIGTERM/SIGINT), while every stage still leaves
its own file: ``launch.json`` (argv, readiness time, provenance read from
inside the server), ``server.log``, ``warmup.jsonl``, ``requests.jsonl`` and
``outcome.json``. A failure at any stage is a result, written to
``outcome.json``; only an interruption makes the job itself fail.

The job's life cycle, in the order ``run_config`` enters it:

1. ``watch_parents``: the job tears down (as on SIGTERM) when Snakemake dies
   (``serve.watchdog``).
2. ``host_lock``: one server per host, whatever the checkout, Snakemake
   invocation or ``--resources`` (``serve.lock``); waits with a message, then
   fails ``host_busy``. Taken before the job touches its files, released after
   ``outcome.json`` is written, so an orphaned job and its rerun never write
   the same files at once.
3. leftovers of this checkout removed, then the host must be free of other
   specsweep servers (``serve.guard``), else wait, then ``host_busy``.
4. ``reaper``: ends the server group and the run's container if the job dies.
5. the server, with the guard sampling beside it until measurement ends; a
   result measured beside another server is ``contaminated``, never ``ok``.

One run id (``records.new_run_id``) is in every file the job writes.

``runtime: external`` (a server that runs without this workflow, at the plan's
``url``): ``attach`` replaces steps 2-5's launch (no host lock, no reaper,
nothing started or torn down; the quiet-host wait and the guard stay, since the
client runs here), and what the server runs is its ``/server_info``; the
measuring phase after readiness (``measure``) is the same for both.

One job is one *launch* of a configuration (``launch``: ``1``, ``2``, ... or
``aa``, the A/A control; ``plan.launches``), with its own files under
``results/<config>/launch-<launch>/`` (its NCCL files under ``nccl/`` there)
and its own run id. It measures every workload point of the plan
(``plan.points.plan_points``) against the same server, after one readiness
wait: warmup and measurement per point, in the plan's order, each with its
own selected prompts. The records of all points share the launch's two
record files and its run id, each record carrying its ``point``;
``outcome.json`` has one entry per point under ``points``. A point that fails
is a result of that point: the next point still runs while the server is
alive. The guard samples the host over all points; another server seen makes
every point ``contaminated``.

Format history of outcome.json:
  1  status, stage, reason, detail, warmup, exit_code, log_tail; then, without
     a version (issue 15): run_id, host, server_started_at, server_stopped_at,
     status "contaminated".
  2  + format_version, launch (the launch id), points = {point: {status,
     stage, reason, detail, warmup}} in measuring order; the top-level status
     is ok only when every point is, else stage/reason/detail of the launch or
     of the first failed point; warmup = the first point's (as in 1 for a
     single point); started_at, ended_at (time.time()).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specsweep.contracts.layout import NCCL_FILE_GLOB, NCCL_FILE_PATTERN, NCCL_LOG_DIR
from specsweep.contracts.vocabulary import Reason, Stage, Status
from specsweep.engines.registry import get_engine
from specsweep.engines.volumes import volume_problems
from specsweep.files import write_json_atomic, write_text_atomic
from specsweep.images.cli import DockerError
from specsweep.plan.datasets import DatasetError, load_selection
from specsweep.plan.points import plan_points
from specsweep.records import is_external, new_run_id, run_header
from specsweep.serve import client, guard
from specsweep.serve import profile as profiling
from specsweep.serve.console import Console, job_console
from specsweep.serve.container import (
    RDMA_DEVICE_DIR,
    checkout_id,
    container_name,
    container_runtime,
    rdma_devices,
    run_labels,
    uses_host_network,
)
from specsweep.serve.lock import HostBusy, HostLock, LockSettings, acquire
from specsweep.serve.payloads import Prompt
from specsweep.serve.provenance import from_server_info, gpu_busy
from specsweep.serve.server import TERM_GRACE_S, AttachedServer, LaunchError, Server, free_port, http_get, tail
from specsweep.serve.slurm import EndWatch, slurm_job
from specsweep.serve.watchdog import REAP_GRACE_S, ParentWatch, reaper, watch_parents

PROVENANCE_SOURCE = Path(__file__).with_name("provenance.py")
OUTCOME_FORMAT_VERSION = 2
#: The server's environment names its launch (recorded in provenance; the
#: reference engine's test-only fault SPECSWEEP_TEST_STEP_DELAY_S reads it).
LAUNCH_ENV = "SPECSWEEP_LAUNCH"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived: tear down, record, and fail the job.

    A KeyboardInterrupt on purpose: asyncio's event loop logs and swallows any
    other BaseException raised inside a callback, so a signal that lands while
    the client streams would be lost and the benchmark would run on.
    """


@dataclass(frozen=True)
class JobPaths:
    launch: Path
    server_log: Path
    warmup: Path
    requests: Path
    outcome: Path
    nccl_logs: Path | None = None  # directory of NCCL_DEBUG_FILEs (default: beside server.log, NCCL_LOG_DIR)
    profile: Path | None = None  # profile.json (traces under profile/): serve.profile
    allreduce_bench: Path | None = None  # allreduce_bench.json: serve.profile


# NCCL writes its NCCL_DEBUG=INFO lines to C stdout, block-buffered when stdout
# is a pipe: a server torn down by `docker rm -f` or SIGKILL can lose the
# unflushed tail, with the lines that say what NCCL chose. NCCL_DEBUG_FILE
# (one file per process: %h = host, %p = pid) is opened line-buffered instead
# (NCCL v2.30.7-1 src/debug.cc ncclDebugInit: fopen + setlinebuf). Written into
# the configuration's results directory; a container gets it mounted here.
# The directory and file names are the path grammar's (contracts.layout: NCCL_LOG_DIR, NCCL_FILE_PATTERN).
NCCL_CONTAINER_DIR = "/specsweep-nccl"


def with_nccl_debug_file(plan: dict, host_dir: Path) -> dict:
    """The plan with ``NCCL_DEBUG_FILE`` in its env (and, in a container, the directory mounted).

    Only when the plan turns NCCL's log on (``NCCL_DEBUG``) and does not name
    a file itself. NCCL does not create the directory: the caller does.
    """
    env = dict(plan.get("env") or {})
    if not env.get("NCCL_DEBUG") or env.get("NCCL_DEBUG_FILE"):
        return plan
    host_dir = Path(os.path.abspath(host_dir))
    if plan.get("runtime") == "docker":
        env["NCCL_DEBUG_FILE"] = f"{NCCL_CONTAINER_DIR}/{NCCL_FILE_PATTERN}"
        volumes = [*(plan.get("volumes") or []), f"{host_dir}:{NCCL_CONTAINER_DIR}:rw"]
        return dict(plan, env=env, volumes=volumes)
    env["NCCL_DEBUG_FILE"] = str(host_dir / NCCL_FILE_PATTERN)
    return dict(plan, env=env)


def nccl_logs(results_dir: Path, nccl_dir: Path | None = None) -> list[str]:
    """The NCCL debug files of one configuration's last run, each as text (sorted by file name)."""
    directory = Path(nccl_dir) if nccl_dir is not None else Path(results_dir) / NCCL_LOG_DIR
    if not directory.is_dir():
        return []
    return [path.read_text(errors="replace") for path in sorted(directory.glob(NCCL_FILE_GLOB))]


def _fresh_dir(directory: Path) -> None:
    """An empty directory: a previous run's NCCL files must not count as this run's evidence."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob(NCCL_FILE_GLOB):
        path.unlink()


@dataclass(frozen=True)
class JobHost:
    """How the job meets its host: the lock, whose checkout it is, how often the guard samples.

    How to run, not what to measure: none of it is in the plan, so changing it
    reruns nothing. ``workdir`` is the workflow's directory (where ``results/``
    is); it names the checkout in labels and environment.
    """

    lock: LockSettings = field(default_factory=LockSettings)
    workdir: Path = field(default_factory=Path.cwd)
    guard_interval_s: float = guard.DEFAULT_INTERVAL_S
    docker: str = "docker"
    #: The terminal Snakemake runs in: a waiting job says so, and the job shows its stage and progress there
    #: (``serve.console``), besides its log.
    notice: TextIO | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], workdir: Path, notice: TextIO | None = None) -> "JobHost":
        """``SPECSWEEP_LOCK_DIR``, ``SPECSWEEP_LOCK_WAIT_S``, ``SPECSWEEP_GUARD_INTERVAL_S``."""
        raw = environ.get("SPECSWEEP_GUARD_INTERVAL_S")
        try:
            interval = float(raw) if raw else guard.DEFAULT_INTERVAL_S
        except ValueError:
            interval = -1.0
        if interval <= 0:
            raise ValueError(f"SPECSWEEP_GUARD_INTERVAL_S={raw!r}: expected seconds (a number > 0)")
        return cls(lock=LockSettings.from_environ(environ), workdir=Path(workdir), guard_interval_s=interval,
                   notice=notice)


class _Both:
    """A text stream writing to the job's log and to the terminal (``JobHost.notice``)."""

    def __init__(self, *streams: TextIO | None) -> None:
        self.streams = [s for s in streams if s is not None]

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def identity_env(run_id: str, config: str, workdir: Path) -> dict[str, str]:
    """What marks a server process as this run's (``serve.guard`` finds other runs' servers by it)."""
    return {guard.RUN_ENV: run_id, guard.CONFIG_ENV: config, guard.CHECKOUT_ENV: os.path.realpath(workdir)}


def server_environment(plan: dict, base: dict[str, str], identity: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the job's own, then the plan's (which wins), then the run's identity."""
    env = dict(base)
    env.update(plan["env"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(identity or {})
    return env


def build_launch(plan: dict, port: int, image_manifest: dict | None, labels: Mapping[str, str] | None = None,
                 identity: Mapping[str, str] | None = None,
                 extra_volumes: list[str] | None = None) -> tuple[list[str], str | None]:
    """Full argv of the server process (or of ``docker run``) and the container name.

    ``labels`` go on the container; ``identity``'s keys are passed into it
    (``-e KEY``, values from the docker client's environment); ``extra_volumes``
    are mounted beside the plan's (the profiling stage's trace directory).
    """
    engine = get_engine(plan["engine"])
    runtime = container_runtime(plan["runtime"])
    if runtime is not None:
        assert image_manifest is not None, f"{plan['runtime']} runtime needs the image manifest"
        name = container_name(plan["name"]) if runtime.daemon else None
        # On the host's network (rdma: true) the server binds the job's own address; else the container's port.
        server_argv = plan["argv"] + (engine.address_args(plan["host"] or "127.0.0.1", port)
                                      if uses_host_network(plan) else
                                      engine.address_args("0.0.0.0", engine.container_port))
        run_plan = dict(plan, argv=server_argv, env={**plan["env"], **(identity or {})},
                        volumes=[*(plan.get("volumes") or []), *(extra_volumes or [])])
        argv = runtime.run_argv(run_plan, image_manifest["tag"], plan["host"], port, engine.container_port, name,
                                labels=labels)
        return argv, name
    return plan["argv"] + engine.address_args(plan["host"], port), None


def gpu_ids(plan: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The GPUs a server uses, for their locks: the first ``gpus`` of ``CUDA_VISIBLE_DEVICES`` (the
    plan's, else the job's), else ``0..gpus-1``."""
    n = int(plan.get("gpus") or 0)
    visible = (plan.get("env") or {}).get("CUDA_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES"))
    if visible:
        return [d.strip() for d in visible.split(",") if d.strip()][:n]
    return [str(i) for i in range(n)]


@contextlib.contextmanager
def _host_lock(host: JobHost, plan: dict, holder: dict[str, Any], log: TextIO) -> Iterator[HostLock]:
    """The host's (and the GPUs') lock for the block; a busy host becomes this job's ``host_busy`` result."""
    try:
        lock = acquire(host.lock, holder, gpu_ids(plan, os.environ), _Both(log, host.notice))
    except HostBusy as exc:
        raise LaunchError(Stage.LAUNCH, Reason.HOST_BUSY, str(exc)) from exc
    try:
        yield lock
    finally:
        lock.release()


def wait_for_quiet_host(run_id: str, host: JobHost, wait_s: float, log: TextIO, config: str = "") -> dict[str, Any]:
    """Wait (up to ``wait_s``) until no other specsweep server runs here; the last sample, or ``host_busy``."""
    t0 = time.monotonic()
    told = False
    while True:
        seen = guard.sample(run_id, host.docker)
        if not seen["others"]:
            if told:
                print(f"the host is free after {time.monotonic() - t0:.0f} s", file=log, flush=True)
            return seen
        who = guard.describe(seen["others"])
        if time.monotonic() - t0 >= wait_s:
            raise LaunchError(Stage.LAUNCH, Reason.HOST_BUSY, f"other specsweep servers run on this host: {who}; "
                              f"waited {time.monotonic() - t0:.0f} s; not measuring beside them")
        if not told:
            print(f"waiting: other specsweep servers run on this host: {who} (before launching {config})",
                  file=log, flush=True)
            told = True
        time.sleep(max(0.5, min(host.guard_interval_s, 5.0)))


def _contamination(host_record: dict[str, Any]) -> str | None:
    """Why a result is contaminated (another server was seen while this one ran), or None."""
    others = host_record.get("others_seen") or []
    if not others:
        return None
    return f"measured beside other specsweep servers: {guard.describe(others)}"


def _dead_server_code(server: Server | None, wait_s: float = 2.0) -> int | None:
    """The server's exit code when it has exited (waiting briefly for a dying one), else None."""
    if server is None or server.proc is None:
        return None
    try:
        return server.proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


def collect_provenance(plan: dict, server: Server, python: str = sys.executable) -> dict:
    """What really was in effect, read from inside the server's own environment."""
    source = PROVENANCE_SOURCE.read_text()
    if server.container:
        # PID 1 is docker's init (`--init`); the server is its child.
        argv = ["docker", "exec", "-i", server.container, "python3", "-", "--child-of", "1"]
    else:
        assert server.proc is not None
        argv = [python, "-", "--pid", str(server.proc.pid)]
    result = subprocess.run(argv, input=source, capture_output=True, text=True, timeout=120)  # noqa: S603
    try:
        if result.returncode != 0:
            raise ValueError(f"exited {result.returncode}: {result.stderr[-2000:]}")
        return json.loads(result.stdout)
    except ValueError as exc:
        # Without a record of what was in effect, a number cannot be trusted: fail the configuration.
        raise LaunchError(Stage.LAUNCH, Reason.PROVENANCE_FAILED,
                          f"could not read the server's environment: {exc}") from exc


def server_info(server: Server | AttachedServer) -> dict | None:
    for path in ("/server_info", "/get_server_info"):
        status, body = http_get(server.base_url + path, timeout=10)
        if status == 200:
            try:
                return json.loads(body)
            except ValueError as exc:
                raise LaunchError(Stage.LAUNCH, Reason.BAD_SERVER_INFO, f"{path} did not answer JSON: {exc}") from exc
    return None


def load_prompts(plan: Mapping[str, Any]) -> list[Prompt] | None:
    """The selected dataset prompts of a plan, or of one of its points (hash-checked), or None for
    synthetic ones; before any launch."""
    if not plan.get("prompts"):
        return None
    try:
        return [Prompt.from_dict(d) for d in load_selection(plan["prompts"])]
    except DatasetError as exc:
        raise LaunchError(Stage.LAUNCH, Reason.PROMPTS_UNAVAILABLE, str(exc)) from exc


def _point_files(paths: JobPaths, point: str) -> tuple[Path, Path]:
    """Where one point's client writes its records before they join the launch's files."""
    tmp = paths.requests.parent / ".points"
    return tmp / f"{point}.warmup.jsonl", tmp / f"{point}.requests.jsonl"


def measure_points(plan: dict, server: Server | AttachedServer, paths: JobPaths, outcome: dict[str, Any],
                   prompts: Mapping[str, list[Prompt] | None], run_id: str, log: TextIO,
                   console: Console | None = None) -> None:
    """Warm up and measure every point of the plan against ``server``; one entry per point in ``outcome``.

    ``prompts``: each point's selected prompts (``load_prompts``). A point's
    ``BenchmarkError`` fails that point only; when the server has died, the
    points not yet measured fail with ``server_exited``. ``console``: the terminal's few lines (each point,
    its progress), besides the log's every line.
    """
    for point in plan_points(plan):
        name = point["name"]
        entry: dict[str, Any] = {"status": Status.FAILED, "stage": Stage.WARMUP, "reason": None, "detail": None}
        outcome["points"][name] = entry
        if not server.alive():
            entry.update(stage=Stage.BENCHMARK, reason=Reason.SERVER_EXITED,
                         detail=f"{server.gone()} before this point")
            continue
        warmup_path, requests_path = _point_files(paths, name)
        print(f"point {name}: {json.dumps(point['workload'], sort_keys=True)}", file=log, flush=True)
        point_console = console.point(name) if console is not None and len(plan_points(plan)) > 1 else console

        def on_stage(stage: str, entry: dict[str, Any] = entry) -> None:  # an interruption names its stage
            entry["stage"] = outcome["stage"] = stage

        try:
            entry["warmup"] = client.run_workload(server.base_url, point["workload"], warmup_path, requests_path, log,
                                                  prompts.get(name), run_id=run_id, on_stage=on_stage, point=name,
                                                  console=point_console)
            if not server.alive():
                raise LaunchError(Stage.BENCHMARK, Reason.SERVER_EXITED, server.gone())
            entry.update(status=Status.OK, stage=None)
        except LaunchError as exc:
            entry.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
        except client.BenchmarkError as exc:
            entry.update(_benchmark_failure(exc, server))


def _benchmark_failure(exc: client.BenchmarkError, server: Server | None) -> dict[str, Any]:
    """stage, reason and detail of a failed phase: the server's exit when it died (the cause), else what
    the client saw (the symptom)."""
    code = _dead_server_code(server)
    if code is None:
        return {"stage": exc.stage, "reason": exc.reason, "detail": exc.detail}
    return {"stage": exc.stage, "reason": Reason.SERVER_EXITED,
            "detail": f"server exited with code {code} during {exc.stage}; the client saw {exc.reason}: {exc.detail}"}


def _join_point_records(plan: dict, paths: JobPaths) -> None:
    """The launch's warmup.jsonl and requests.jsonl: every point's records, in point order (atomic)."""
    for target, which in ((paths.warmup, 0), (paths.requests, 1)):
        parts = [_point_files(paths, p["name"])[which] for p in plan_points(plan)]
        if any(part.exists() for part in parts):
            write_text_atomic(target, "".join(part.read_text() for part in parts if part.exists()))
    _drop_point_files(plan, paths)


def _drop_point_files(plan: dict, paths: JobPaths) -> None:
    for point in plan_points(plan):
        for part in _point_files(paths, point["name"]):
            part.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (paths.requests.parent / ".points").rmdir()


def _settle_outcome(outcome: dict[str, Any]) -> None:
    """Top-level status from the points: ok only when every point is; else the first failure."""
    points = outcome["points"]
    failed = [p for p in points.values() if p["status"] != Status.OK]
    first = next(iter(points.values()), None)
    outcome["warmup"] = first.get("warmup") if first else None
    if failed:
        outcome.update(status=Status.FAILED, stage=failed[0]["stage"], reason=failed[0]["reason"],
                       detail=failed[0]["detail"] if len(points) == 1 else
                       f"{len(failed)} of {len(points)} points failed; first: {failed[0]['detail']}")
    else:
        outcome.update(status=Status.OK, stage=None)


def measure(plan: dict, server: Server | AttachedServer, sampler: guard.Sampler, paths: JobPaths,
            outcome: dict[str, Any], prompts: Mapping[str, list[Prompt] | None], run_id: str, log: TextIO,
            console: Console | None = None) -> None:
    """The phase after readiness, the same for a launched and an attached server: every point, the
    guard's verdict over them, then the profiling stage. ``console``: the terminal's lines (``serve.console``)."""
    outcome["stage"] = "warmup"
    measure_points(plan, server, paths, outcome, prompts, run_id, log, console)
    _settle_outcome(outcome)
    outcome["host"] = guard.summarize(sampler.stop())  # measurement is over
    contaminated = _contamination(outcome["host"])
    if contaminated:
        for entry in outcome["points"].values():
            if entry["status"] == Status.OK:
                entry.update(status=Status.CONTAMINATED, stage=Stage.BENCHMARK, reason=Reason.OTHER_SERVER,
                             detail=contaminated)
        if outcome["status"] == Status.OK:
            outcome.update(status=Status.CONTAMINATED, stage=Stage.BENCHMARK, reason=Reason.OTHER_SERVER,
                           detail=contaminated)
    if outcome["status"] != Status.FAILED:
        # After every point and the guard's window: it never disturbs them. It profiles the
        # plan's first point (its workload and prompts), whose summary alone carries it.
        first = plan_points(plan)[0]
        profiling.after_measure(server, dict(plan, workload=first["workload"]), paths.profile, log,
                                prompts[first["name"]], run_id)


def attach(plan: dict, paths: JobPaths, launch: dict[str, Any], run_id: str, host: JobHost,
           log: TextIO) -> AttachedServer:
    """The phase that replaces the launch for ``runtime: external``: wait until the running server at
    the plan's ``url`` is ready, record what it says it runs (its ``/server_info``) and write
    ``launch.json``. Nothing is started, so nothing is locked, reaped or torn down; as before a launch,
    no other specsweep server may run on this host (the client runs here); the caller's guard then
    samples it while the points run (another one seen is contamination)."""
    engine = get_engine(plan["engine"])
    url = plan["url"]
    write_text_atomic(paths.server_log, run_header(run_id, plan["name"]) +
                      f"# runtime external: attached to {url}; no server was started by this run "
                      "(the server's log is where it was started)\n")
    server = AttachedServer(url, engine.ready_path)
    launch.update(attached=True, url=url, host=plan["host"], port=plan["port"], argv=None, container=None,
                  env=None)
    # No lock, but no measuring beside another specsweep server of this host either (the client runs here).
    launch["host_before_launch"] = wait_for_quiet_host(run_id, host, host.lock.wait_s, _Both(log, host.notice),
                                                       plan["name"])
    print(f"attaching to {plan['name']} at {url} (launch {launch['launch']}, run {run_id}): nothing is launched",
          file=log, flush=True)
    launch["ready_s"] = server.wait_ready(plan["ready_timeout_s"])
    print(f"ready after {launch['ready_s']:.1f} s at {url}", file=log, flush=True)
    info = server_info(server)
    if info is None:
        raise LaunchError(Stage.LAUNCH, Reason.NO_SERVER_INFO,
                          f"{url} answers neither /server_info nor /get_server_info: "
                          "without the server's own account of what it runs, its numbers cannot be read")
    launch["server_info"] = info
    launch["provenance"] = from_server_info(info, url)
    write_json_atomic(paths.launch, launch)
    return server


def run_config(plan: dict, paths: JobPaths, image_manifest: dict | None, log: TextIO,
               registry: Mapping[str, Any] | None = None, *, host: JobHost | None = None,
               launch_id: str = "1") -> dict:
    """Launch, wait, warm up and measure every point, tear down; return (and write) the outcome
    (life cycle: module docstring).

    ``registry`` (the config's ``registry:``) is where a container runtime
    pulls an image that is not on this host (a cluster node never builds).
    ``host``: the lock, the checkout and the guard's interval (``JobHost``).
    ``launch_id``: which launch of the configuration this job is (``plan.launches``).
    """
    host = host or JobHost()
    console = job_console(host.notice, plan["name"], launch_id)  # the terminal's few lines (serve.console)
    log_name = getattr(log, "name", "the job's log")
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    engine = get_engine(plan["engine"])
    run_id = new_run_id()
    checkout = checkout_id(host.workdir)
    identity = identity_env(run_id, plan["name"], host.workdir)
    outcome: dict[str, Any] = {"format_version": OUTCOME_FORMAT_VERSION, "status": Status.FAILED, "stage": Stage.LAUNCH,
                               "reason": None, "detail": None, "run_id": run_id, "launch": launch_id, "points": {},
                               "started_at": time.time()}
    launch: dict[str, Any] = {"plan_name": plan["name"], "launch": launch_id, "started_at": outcome["started_at"],
                              "run_id": run_id, "points": [p["name"] for p in plan_points(plan)],
                              "checkout": identity[guard.CHECKOUT_ENV], "checkout_id": checkout,
                              "slurm": slurm_job(os.environ)}
    nccl_dir = paths.nccl_logs or paths.server_log.parent / NCCL_LOG_DIR
    # The server's environment names its launch (provenance shows it; a test-only fault reads it).
    attached = is_external(plan)  # runtime external: the attach phase instead of the launch (``attach``)
    if not attached:
        plan = with_nccl_debug_file(dict(plan, env={**plan["env"], LAUNCH_ENV: launch_id}), nccl_dir)
    server: Server | AttachedServer | None = None
    sampler: guard.Sampler | None = None
    watch: ParentWatch | None = None
    owns_files = False  # true once the host lock is ours: before, an orphan of this config may still write them
    stack = contextlib.ExitStack()
    # Under Slurm, SIGTERM reaches only the job step's snakemake: ask the scheduler (specsweep.serve.slurm).
    end_watch = EndWatch(launch["slurm"]["job_id"], log).start() if launch["slurm"] else None
    try:
        watch = stack.enter_context(watch_parents(log))
        if attached:
            launch["host_lock"] = None  # one server per host is a launch's rule: this job starts none
        else:
            lock: HostLock = stack.enter_context(_host_lock(host, plan, {**launch, "config": plan["name"]}, log))
            launch["host_lock"] = lock.record()
        owns_files = True
        for path in (paths.warmup, paths.requests):
            path.unlink(missing_ok=True)
        _drop_point_files(plan, paths)  # nothing of an earlier, interrupted job may join this launch's records
        _fresh_dir(nccl_dir)
        profiling.reset(plan, paths.profile, paths.allreduce_bench, run_id)
        prompts = {p["name"]: load_prompts(p if "points" in plan else plan) for p in plan_points(plan)}
        if attached:
            server = attach(plan, paths, launch, run_id, host, log)
            if console is not None:
                console.say(f"attached to {plan['url']} (nothing launched), ready after {launch['ready_s']:.1f} s; "
                            f"every line in {log_name}")
            sampler = guard.Sampler(run_id, paths.outcome.parent / "logs" / "host_guard.jsonl",
                                    host.guard_interval_s, host.docker)
            measure(plan, server, sampler, paths, outcome, prompts, run_id, log, console)
            return outcome  # the finally below writes the files
        if plan["runtime"] != "local" and (missing := volume_problems(plan, Path.cwd())):
            # `docker run -v` would create a missing host path as an empty directory and start on it.
            raise LaunchError(Stage.LAUNCH, Reason.VOLUME_MISSING, "; ".join(missing))
        if plan["runtime"] == "docker" and uses_host_network(plan) and not rdma_devices():
            raise LaunchError(Stage.LAUNCH, Reason.RDMA_MISSING,
                              f"configurations.{plan['name']}.rdma: true, but this host has no {RDMA_DEVICE_DIR}/"
                              f"uverbs* devices to pass into the container (no RDMA NIC, or rdma-core's kernel "
                              f"modules not loaded); set rdma: false for this host")
        runtime = container_runtime(plan["runtime"])
        if runtime is not None:
            try:
                prepared = runtime.prepare(plan["name"], image_manifest, registry, checkout=checkout,
                                           docker=host.docker)
            except DockerError as exc:
                raise LaunchError(Stage.LAUNCH, Reason.IMAGE_UNAVAILABLE, str(exc)) from exc
            launch.update(prepared)
            print(f"{plan['runtime']} runtime prepared: {prepared}", file=log, flush=True)
        launch["host_before_launch"] = wait_for_quiet_host(run_id, host, host.lock.wait_s - lock.waited_s,
                                                           _Both(log, host.notice), plan["name"])
        if plan.get("gpus", 0) > 0:
            busy = gpu_busy()
            launch["gpus_busy_before_launch"] = busy
            if busy:
                raise LaunchError(Stage.LAUNCH, Reason.GPUS_BUSY,
                                  f"GPUs are held by other processes, not starting: {busy}")
        labels = run_labels(plan["name"], checkout, host.workdir, run_id)
        daemon = runtime is not None and runtime.daemon
        # Entered before the micro-benchmark: its process group and container are this run's too.
        reap = stack.enter_context(reaper(log, f"{guard.RUN_LABEL_KEY}={run_id}" if daemon else None,
                                          host.docker, keep_fds=lock.fds))
        volumes = profiling.before_launch(plan, paths.profile, paths.allreduce_bench, image_manifest,
                                          server_environment(plan, dict(os.environ), identity), log,
                                          labels=labels, on_start=reap.watch_group)
        port = plan["port"] or free_port(plan["host"])
        argv, container = build_launch(plan, port, image_manifest, labels, identity, volumes)
        launch.update(argv=argv, host=plan["host"], port=port, container=container, env=plan["env"])
        if image_manifest:
            launch["image"] = {k: image_manifest.get(k) for k in ("name", "tag", "image_id")}
        with paths.server_log.open("wb") as log_file:
            log_file.write(run_header(run_id, plan["name"]).encode())
            log_file.flush()
            server = Server(
                argv=argv,
                env=server_environment(plan, dict(os.environ), identity),
                host=plan["host"],
                port=port,
                ready_path=engine.ready_path,
                log_file=log_file,
                container=container,
                keep_fds=tuple(lock.fds),
            )
            print(f"launching {plan['name']} (launch {launch_id}, run {run_id}): {argv}", file=log, flush=True)
            if console is not None:
                console.say(f"launching ({plan['runtime']}), {len(plan_points(plan))} point(s); "
                            f"every line in {log_name}")
            sampler = guard.Sampler(run_id, paths.outcome.parent / "logs" / "host_guard.jsonl",
                                    host.guard_interval_s, host.docker)
            server.start()
            reap.watch_group(server.proc.pid)
            outcome["server_started_at"] = time.time()
            launch["pid"] = server.proc.pid if server.proc else None
            launch["ready_s"] = server.wait_ready(plan["ready_timeout_s"])
            print(f"ready after {launch['ready_s']:.1f} s at {server.base_url}", file=log, flush=True)
            if console is not None:
                console.say(f"ready after {launch['ready_s']:.1f} s")
            launch["server_info"] = server_info(server)
            launch["provenance"] = collect_provenance(plan, server)
            write_json_atomic(paths.launch, launch)
            measure(plan, server, sampler, paths, outcome, prompts, run_id, log, console)
    except LaunchError as exc:
        outcome.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
    except client.BenchmarkError as exc:
        outcome.update(_benchmark_failure(exc, server))
    except Interrupted as exc:
        outcome.update(reason=Reason.INTERRUPTED, detail=(watch.fired if watch and watch.fired else None)
                       or f"received {exc}")
        raise
    finally:
        if end_watch is not None:
            end_watch.stop()
        if isinstance(server, Server):
            # Interrupted (Ctrl-C, a dead Snakemake): the same bound as the reaper's, so that a kill leaves
            # nothing running for longer than seconds; a normal end gives the server its full grace.
            grace = REAP_GRACE_S if outcome["reason"] == Reason.INTERRUPTED else TERM_GRACE_S
            outcome["exit_code"] = server.stop(grace)
            outcome["server_stopped_at"] = time.time()
        if sampler is not None and "host" not in outcome:
            outcome["host"] = guard.summarize(sampler.stop())
        if watch is not None:
            watch.stop()  # before the old handlers are back: a late parent-death SIGTERM must not kill the writes
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        outcome["log_tail"] = tail(paths.server_log) if outcome["status"] != Status.OK else None
        outcome["ended_at"] = time.time()
        if owns_files:
            _join_point_records(plan, paths)
        if owns_files or outcome["reason"] != Reason.INTERRUPTED:
            profiling.finish(plan, paths.profile, paths.allreduce_bench, run_id)
            _write_job_files(paths, launch, outcome, run_id, plan["name"])
        print(f"outcome: {outcome['status']} {outcome.get('stage') or ''} {outcome.get('reason') or ''}", file=log)
        if console is not None:
            console.say(f"outcome: {outcome['status']} {outcome.get('stage') or ''} {outcome.get('reason') or ''}"
                        .rstrip())
        stack.close()  # the reaper is told done, then the host lock goes
    return outcome


def _write_job_files(paths: JobPaths, launch: dict, outcome: dict, run_id: str, config: str) -> None:
    """Every output of the job exists at its end, and none holds another run's data."""
    if _first_json_run_id(paths.launch) != run_id:
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
