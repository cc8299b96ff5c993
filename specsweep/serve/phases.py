"""The phases of the server job, each a small function that returns its part of the result.

The runner (``serve.job.run_config``) calls them in order and is the only one
that records: each phase returns its part of ``launch.json`` (a mapping), of
``outcome.json`` (a point's entry, the verdict over the points, the
teardown's exit code) or what a later phase needs (the server, the volumes
the micro-benchmark leaves for the container); a phase that cannot produce
its result raises ``Failure`` (``LaunchError``, ``BenchmarkError``) and
records nothing. No phase edits a mapping another phase or the runner holds.
What every phase reads (the plan, the paths, the host, the run) is one frozen
``Job`` (``serve.jobspec``).

The phases, in the runner's order (docs/design.md, "The server job"):

* host: ``launch_lock`` and ``host_lock``, then ``own_files`` (the job's files are this run's);
  ``point_prompts``; ``check_target`` (volumes, RDMA devices),
  ``prepare_runtime``, ``kernel_caches``, ``quiet_host_locked`` (side by side: ``quiet_host``),
  ``gpus_in_use`` / ``refuse_busy_gpus``;
* micro-benchmark: ``micro_benchmark`` (``serve.profile``, before the server);
* launch: ``server_launch`` (argv), ``new_server``, ``start_server``,
  ``await_ready``, ``read_server_info``, ``read_provenance``; for
  ``runtime: external`` ``attach_record``, ``attached_server``,
  ``attached_info`` instead;
* points: ``measure_points`` (per point its warmup, then its measured
  repeats: ``client.run_workload`` runs both and reports the stage it is
  in), ``settle`` (the launch's verdict from its points);
* guard: ``contaminate`` (another server seen while measuring);
* profile: ``profile`` (``serve.profile``, after every point);
* teardown: ``teardown`` (the server ended; always), ``join_point_records``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from specsweep.contracts.plan import Point
from specsweep.contracts.vocabulary import Failure, Reason, Stage, Status
from specsweep.engines.registry import get_engine
from specsweep.engines.volumes import volume_problems
from specsweep.files import write_text_atomic
from specsweep.images.cli import DockerError
from specsweep.plan.datasets import DatasetError, load_selection
from specsweep.records import run_header
from specsweep.serve import client, guard, kernel_cache
from specsweep.serve import profile as profiling
from specsweep.serve.container import RDMA_DEVICE_DIR, container_runtime, rdma_devices, uses_host_network
from specsweep.serve.jobspec import Job, JobPaths
from specsweep.serve.launch import (
    build_launch,
    collect_provenance,
    fresh_nccl_dir,
    gpu_ids,
    server_info,
)
from specsweep.serve.lock import HostBusy, HostLock, LockSettings, acquire
from specsweep.serve.payloads import Prompt
from specsweep.serve.provenance import from_server_info, gpu_busy
from specsweep.serve.quiet import wait_for_quiet_host
from specsweep.serve.server import AttachedServer, LaunchError, Server, free_port
from specsweep.serve.watchdog import reaper

# ------------------------------------------------------------ host


def host_lock(job: Job, holder: Mapping[str, Any], wait_s: float | None = None) -> HostLock:
    """The host's (and the GPUs') lock, waiting up to ``wait_s`` (default: the host's); a busy host becomes this
    job's ``host_busy`` result. The caller releases it (``HostLock.release``, which may be called twice)."""
    settings = job.host.lock if wait_s is None else LockSettings(job.host.lock.lock_dir, max(0.0, wait_s))
    try:
        return acquire(settings, dict(holder), gpu_ids(job.plan, os.environ), job.log, notice=job.host.notice)
    except HostBusy as exc:
        raise LaunchError(Stage.LAUNCH, Reason.HOST_BUSY, str(exc)) from exc


def launch_lock(job: Job, holder: Mapping[str, Any]) -> HostLock:
    """This launch's own lock for the job's life (not the host's): an orphan and its rerun never write one
    launch's files at once, whoever holds the host."""
    key = hashlib.sha256(f"{job.paths.outcome.resolve().parent}".encode()).hexdigest()[:16]
    try:
        return acquire(job.host.lock, dict(holder), names=[f"launch-{key}.lock"], log=job.log)
    except HostBusy as exc:
        raise LaunchError(Stage.LAUNCH, Reason.HOST_BUSY, str(exc)) from exc


def own_files(job: Job) -> None:
    """Once the job owns its files (the host lock, or nothing to lock): nothing of an earlier run may join
    this launch's records, NCCL's files or profile."""
    for path in (job.paths.warmup, job.paths.requests):
        path.unlink(missing_ok=True)
    drop_point_files(job)
    fresh_nccl_dir(job.nccl_dir)
    profiling.reset(job.plan, job.paths.profile, job.paths.allreduce_bench, job.run_id)


def load_prompts(prompts: Mapping[str, Any] | None) -> list[Prompt] | None:
    """The selected dataset prompts of a plan or of one of its points (hash-checked), or None for
    synthetic ones; before any launch."""
    if not prompts:
        return None
    try:
        return [Prompt.from_dict(d) for d in load_selection(dict(prompts))]
    except DatasetError as exc:
        raise LaunchError(Stage.LAUNCH, Reason.PROMPTS_UNAVAILABLE, str(exc)) from exc


def point_prompts(job: Job) -> dict[str, list[Prompt] | None]:
    """Every point's selected prompts, by point name (``load_prompts``)."""
    return {point.name: load_prompts(point.prompts) for point in job.points}


def check_target(job: Job) -> None:
    """What the host must have before a container starts: the volumes' host paths, RDMA devices."""
    plan = job.plan
    if plan.runtime != "local" and (missing := volume_problems(plan, Path.cwd())):
        # `docker run -v` would create a missing host path as an empty directory and start on it.
        raise LaunchError(Stage.LAUNCH, Reason.VOLUME_MISSING, "; ".join(missing))
    if plan.runtime == "docker" and uses_host_network(plan) and not rdma_devices():
        raise LaunchError(Stage.LAUNCH, Reason.RDMA_MISSING,
                          f"configurations.{plan.name}.rdma: true, but this host has no {RDMA_DEVICE_DIR}/"
                          f"uverbs* devices to pass into the container (no RDMA NIC, or rdma-core's kernel "
                          f"modules not loaded); set rdma: false for this host")


def prepare_runtime(job: Job) -> dict[str, Any]:
    """A container runtime's preparation (leftovers removed, the image present): its record, or nothing."""
    runtime = container_runtime(job.plan.runtime)
    if runtime is None:
        return {}
    try:
        prepared = runtime.prepare(job.plan.name, job.image_manifest, job.registry, checkout=job.checkout,
                                   docker=job.host.docker)
    except DockerError as exc:
        raise LaunchError(Stage.LAUNCH, Reason.IMAGE_UNAVAILABLE, str(exc)) from exc
    print(f"{job.plan.runtime} runtime prepared: {prepared}", file=job.log, flush=True)
    return dict(prepared)


def kernel_caches(job: Job) -> dict[str, Any]:
    """The image's JIT caches on a host directory (``serve.kernel_cache``): launch.json's ``kernel_cache``,
    whose ``volume`` the launch mounts."""
    manifest = job.image_manifest
    wanted = job.plan.runtime == "docker" and job.host.kernel_cache_root is not None \
        and kernel_cache.container_dir(manifest) is not None
    detected = kernel_cache.detect_arch() if wanted and job.plan.gpus > 0 else None
    record = kernel_cache.prepare(manifest, job.host.kernel_cache_root, runtime=job.plan.runtime,
                                  plan_arch=job.plan.target.get("gpu_arch"), detected_arch=detected)
    if record.get("mounted"):
        print(f"kernel cache: {record['host_dir']} -> {record['container_dir']} "
              f"({'warm' if record['warm'] else 'cold'}: {record['files_before']} files)", file=job.log, flush=True)
    return {"kernel_cache": record}


def quiet_host(job: Job, wait_s: float, known: Callable[[], Collection[str]] | None = None,
               lock_free: bool = False) -> dict[str, Any]:
    """No other specsweep server may run here while this one measures: ``host_before_launch`` (``known``,
    ``lock_free``: ``wait_for_quiet_host``)."""
    return {"host_before_launch": wait_for_quiet_host(job.run_id, job.host, wait_s, job.log, job.plan.name, known,
                                                      notice=job.host.notice, lock_free=lock_free)}


def quiet_host_locked(job: Job, lock: HostLock, holder: Mapping[str, Any], wait_s: float,
                      on_lock: Callable[[HostLock], None]) -> tuple[HostLock, dict[str, Any]]:
    """No other specsweep server here, with the host lock held, and never a wait for one while holding it:
    the held lock (``lock``, or one taken again) and ``host_before_launch``.

    Why: the servers of a side-by-side round (``serve.sidebyside``; another checkout's, or another Snakemake
    invocation's) are up between their windows, and each window needs the host lock. A job that held the
    lock until those servers were gone would wait for jobs that wait for it, both until the lock's wait
    (``SPECSWEEP_LOCK_WAIT_S``) and then ``host_busy``. So the host is looked at right after the lock was
    taken; while it is busy the lock is let go, the job waits for a quiet host without it
    (``wait_for_quiet_host``), takes the lock again (``on_lock`` is told of each new one) and looks again.
    ``host_before_launch``: the last sample; ``waited_s``, from the first look to the quiet one, the lock's
    retakes included; ``host_lock_released``, how often the lock was let go. ``wait_s``: for all of it."""
    t0 = time.monotonic()
    released = 0
    while True:
        seen = guard.sample(job.run_id, job.host.docker)
        if not seen["others"]:
            return lock, {"host_before_launch": {**seen, "waited_s": round(time.monotonic() - t0, 3),
                                                 "host_lock_released": released}}
        lock.release()
        released += 1
        print(f"other specsweep servers run on this host: {guard.describe(seen['others'])}; letting go of the "
              "host lock while waiting for them (a side-by-side round's servers take it for each window)",
              file=job.log, flush=True)
        wait_for_quiet_host(job.run_id, job.host, wait_s - (time.monotonic() - t0), job.log, job.plan.name,
                            notice=job.host.notice)
        lock = host_lock(job, holder, wait_s - (time.monotonic() - t0))
        on_lock(lock)


#: How long a launch lets GPU processes that are exiting go before it calls the GPUs busy: a partner's server of
#: a side-by-side round that just ended still shows in nvidia-smi for a moment, as "[No data]" with no readable
#: environment (on an H100, 5 of 51 launches of three races were refused that way before this wait).
GPU_SETTLE_S = 15.0


def gpus_in_use(job: Job, known: Callable[[], Collection[str]] | None = None,
                settle_s: float = GPU_SETTLE_S) -> dict[str, Any]:
    """``gpus_busy_before_launch``: the processes holding GPUs (a plan with GPUs only), but for the servers
    of ``known()`` run ids (a side-by-side round's partners). While one of them is exiting (``guard.exiting``),
    it looks again for up to ``settle_s``."""
    if job.plan.gpus <= 0:
        return {}
    deadline = time.monotonic() + settle_s
    while True:
        busy = gpu_busy()
        if known is not None and busy:
            ours = known()
            busy = [b for b in busy if guard.run_id_of(b.get("pid", "")) not in ours]
        if not any(guard.exiting(b.get("pid", "")) for b in busy) or time.monotonic() >= deadline:
            return {"gpus_busy_before_launch": busy}
        time.sleep(0.5)


def refuse_busy_gpus(seen: Mapping[str, Any]) -> None:
    if busy := seen.get("gpus_busy_before_launch"):
        raise LaunchError(Stage.LAUNCH, Reason.GPUS_BUSY, f"GPUs are held by other processes, not starting: {busy}")


def reaper_of(job: Job, lock: HostLock) -> contextlib.AbstractContextManager:
    """``watchdog.reaper`` for this run: its process groups, and its containers by label."""
    runtime = container_runtime(job.plan.runtime)
    daemon = runtime is not None and runtime.daemon
    return reaper(job.log, f"{guard.RUN_LABEL_KEY}={job.run_id}" if daemon else None, job.host.docker,
                  keep_fds=lock.fds)


# ------------------------------------------------------------ micro-benchmark


def micro_benchmark(job: Job, on_start: Callable[[int], None]) -> list[str]:
    """The stage before launch (``profile.before_launch``, which writes allreduce_bench.json): the volumes
    the server's container needs for the profiler's traces."""
    return profiling.before_launch(job.plan, job.paths.profile, job.paths.allreduce_bench, job.image_manifest,
                                   job.server_env(), job.log, labels=job.labels, on_start=on_start)


# ------------------------------------------------------------ launch


@dataclass(frozen=True)
class ServerLaunch:
    """What is started: the full argv (of the process, or of ``docker run``), its address and container."""

    argv: list[str]
    host: str
    port: int
    container: str | None

    def record(self, job: Job) -> dict[str, Any]:
        """launch.json's part of it."""
        out: dict[str, Any] = {"argv": self.argv, "host": job.plan.host, "port": self.port,
                               "container": self.container, "env": dict(job.plan.env)}
        if job.image_manifest:
            out["image"] = {k: job.image_manifest.get(k) for k in ("name", "tag", "image_id")}
        return out


def server_launch(job: Job, volumes: list[str]) -> ServerLaunch:
    """The server's argv at its port (the plan's, else a free one); ``volumes``: the micro-benchmark's."""
    port = job.plan.port or free_port(job.plan.host)
    argv, container = build_launch(job.plan, port, job.image_manifest, job.labels, job.identity, volumes)
    return ServerLaunch(argv=argv, host=job.plan.host, port=port, container=container)


@contextlib.contextmanager
def server_log(job: Job) -> Iterator[BinaryIO]:
    """server.log, opened for the server's output, with this run's header first."""
    with job.paths.server_log.open("wb") as log_file:
        log_file.write(run_header(job.run_id, job.plan.name).encode())
        log_file.flush()
        yield log_file


def new_server(job: Job, launch: ServerLaunch, log_file: BinaryIO, keep_fds: tuple[int, ...]) -> Server:
    """The server, not started yet (so that the teardown knows it from here on)."""
    return Server(argv=launch.argv, env=job.server_env(), host=launch.host, port=launch.port,
                  ready_path=get_engine(job.plan.engine).ready_path, log_file=log_file, container=launch.container,
                  keep_fds=tuple(keep_fds))


def guard_log(job: Job) -> Path:
    """``logs/host_guard.jsonl`` of the launch: the guard's samples."""
    return job.paths.outcome.parent / "logs" / "host_guard.jsonl"


def start_guard(job: Job) -> guard.Sampler:
    """The guard's sampler, beside the server until measurement ends (``host_guard.jsonl``)."""
    return guard.Sampler(job.run_id, guard_log(job), job.host.guard_interval_s, job.host.docker)


def start_server(job: Job, server: Server, watch_group: Callable[[int], None]) -> dict[str, Any]:
    """Start the server (the reaper told its process group): launch.json's ``pid``."""
    print(f"launching {job.plan.name} (launch {job.launch_id}, run {job.run_id}): {server.argv}", file=job.log,
          flush=True)
    job.say(f"launching ({job.plan.runtime}), {len(job.points)} point(s); every line in {job.log_name}")
    server.start()
    watch_group(server.proc.pid)
    return {"pid": server.proc.pid if server.proc else None}


def await_ready(job: Job, server: Server | AttachedServer) -> dict[str, Any]:
    """The readiness wait (a deadline, and the process watched): launch.json's ``ready_s``."""
    ready_s = server.wait_ready(job.plan.ready_timeout_s)
    print(f"ready after {ready_s:.1f} s at {server.base_url}", file=job.log, flush=True)
    return {"ready_s": ready_s}


def read_server_info(server: Server | AttachedServer) -> dict[str, Any]:
    return {"server_info": server_info(server)}


def read_provenance(server: Server) -> dict[str, Any]:
    return {"provenance": collect_provenance(server)}


def attach_record(job: Job) -> dict[str, Any]:
    """``runtime: external``: server.log says nothing was started; launch.json's address part."""
    url = job.plan.url
    write_text_atomic(job.paths.server_log, run_header(job.run_id, job.plan.name) +
                      f"# runtime external: attached to {url}; no server was started by this run "
                      "(the server's log is where it was started)\n")
    return {"attached": True, "url": url, "host": job.plan.host, "port": job.plan.port, "argv": None,
            "container": None, "env": None}


def attached_server(job: Job) -> AttachedServer:
    """The running server at the plan's ``url``: nothing is started, locked, reaped or torn down."""
    print(f"attaching to {job.plan.name} at {job.plan.url} (launch {job.launch_id}, run {job.run_id}): "
          "nothing is launched", file=job.log, flush=True)
    return AttachedServer(job.plan.url, get_engine(job.plan.engine).ready_path)


def attached_info(job: Job, server: AttachedServer) -> dict[str, Any]:
    """What the attached server says it runs (its ``/server_info``, also as the provenance), or
    ``no_server_info``."""
    info = server_info(server)
    if info is None:
        raise LaunchError(Stage.LAUNCH, Reason.NO_SERVER_INFO,
                          f"{job.plan.url} answers neither /server_info nor /get_server_info: "
                          "without the server's own account of what it runs, its numbers cannot be read")
    return {"server_info": info, "provenance": from_server_info(info, job.plan.url)}


# ------------------------------------------------------------ points


def point_files(paths: JobPaths, point: str) -> tuple[Path, Path]:
    """Where one point's client writes its records before they join the launch's files."""
    tmp = paths.requests.parent / ".points"
    return tmp / f"{point}.warmup.jsonl", tmp / f"{point}.requests.jsonl"


def dead_server_code(server: Server | AttachedServer | None, wait_s: float = 2.0) -> int | None:
    """The server's exit code when it has exited (waiting briefly for a dying one), else None."""
    if not isinstance(server, Server) or server.proc is None:
        return None
    try:
        return server.proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


def failure_of(exc: Failure, server: Server | AttachedServer | None) -> dict[str, Any]:
    """stage, reason and detail of a failed phase. What the client saw (``BenchmarkError``) is a symptom:
    when the server has died, its exit is the cause."""
    code = dead_server_code(server) if isinstance(exc, client.BenchmarkError) else None
    if code is None:
        return {"stage": exc.stage, "reason": exc.reason, "detail": exc.detail}
    return {"stage": exc.stage, "reason": Reason.SERVER_EXITED,
            "detail": f"server exited with code {code} during {exc.stage}; the client saw {exc.reason}: {exc.detail}"}


def unfinished_point(stage: str) -> dict[str, Any]:
    """The entry of a point the job left while measuring it (interrupted): failed at its stage."""
    return {"status": Status.FAILED, "stage": stage, "reason": None, "detail": None}


def measure_points(job: Job, server: Server | AttachedServer, prompts: Mapping[str, list[Prompt] | None],
                   on_stage: Callable[[str, str], None], gate_of: Callable[[Point], client.Gate] | None = None
                   ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Warm up and measure every point of the plan against ``server``; yields each point's entry of
    outcome.json as it ends, in the plan's order.

    ``on_stage(point, stage)``: the point entered its warmup or its measured repeats (an interruption
    names them). A point's ``Failure`` fails that point only; when the server has died, the points not
    yet measured fail with ``server_exited``. The terminal gets each point and its progress.
    ``gate_of(point)``: the point's windows (a side-by-side round: ``serve.sidebyside``), else none.
    """
    for point in job.points:
        name = point.name
        if not server.alive():
            yield name, {"status": Status.FAILED, "stage": Stage.BENCHMARK, "reason": Reason.SERVER_EXITED,
                         "detail": f"{server.gone()} before this point"}
            continue
        on_stage(name, Stage.WARMUP)
        yield name, _measure_point(job, server, point, prompts.get(name), on_stage,
                                   gate_of(point) if gate_of is not None else None)


def _measure_point(job: Job, server: Server | AttachedServer, point: Point, prompts: list[Prompt] | None,
                   on_stage: Callable[[str, str], None], gate: client.Gate | None = None) -> dict[str, Any]:
    """One point: its warmup and measured repeats (``client.run_workload``); its entry of outcome.json."""
    name = point.name
    warmup_path, requests_path = point_files(job.paths, name)
    print(f"point {name}: {json.dumps(dict(point.workload), sort_keys=True)}", file=job.log, flush=True)
    console = job.console.point(name) if job.console is not None and len(job.points) > 1 else job.console
    measured: dict[str, Any] = {}
    try:
        measured["warmup"] = client.run_workload(server.base_url, dict(point.workload), warmup_path, requests_path,
                                                 job.log, prompts, run_id=job.run_id,
                                                 on_stage=lambda stage: on_stage(name, stage), point=name,
                                                 console=console, gate=gate)
        if not server.alive():
            raise LaunchError(Stage.BENCHMARK, Reason.SERVER_EXITED, server.gone())
    except Failure as exc:
        return {"status": Status.FAILED, **failure_of(exc, server), **measured}
    return {"status": Status.OK, "stage": None, "reason": None, "detail": None, **measured}


def settle(points: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The launch's status from its points: ok only when every point is; else the first failure's stage,
    reason and detail; ``warmup`` is the first point's."""
    failed = [p for p in points.values() if p["status"] != Status.OK]
    first = next(iter(points.values()), None)
    verdict: dict[str, Any] = {"warmup": first.get("warmup") if first else None}
    if failed:
        verdict.update(status=Status.FAILED, stage=failed[0]["stage"], reason=failed[0]["reason"],
                       detail=failed[0]["detail"] if len(points) == 1 else
                       f"{len(failed)} of {len(points)} points failed; first: {failed[0]['detail']}")
    else:
        verdict.update(status=Status.OK, stage=None, reason=None, detail=None)
    return verdict


# ------------------------------------------------------------ guard


def contaminate(points: Mapping[str, Mapping[str, Any]], verdict: Mapping[str, Any], host_record: Mapping[str, Any]
                ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The points and the verdict once the guard has spoken: measured beside another specsweep server,
    an ok result is ``contaminated`` (kept, never compared)."""
    others = host_record.get("others_seen") or []
    if not others:
        return {k: dict(v) for k, v in points.items()}, dict(verdict)
    why = {"status": Status.CONTAMINATED, "stage": Stage.BENCHMARK, "reason": Reason.OTHER_SERVER,
           "detail": f"measured beside other specsweep servers: {guard.describe(others)}"}
    points = {k: {**v, **why} if v["status"] == Status.OK else dict(v) for k, v in points.items()}
    return points, {**verdict, **why} if verdict["status"] == Status.OK else dict(verdict)


# ------------------------------------------------------------ profile


def profile(job: Job, server: Server | AttachedServer, prompts: Mapping[str, list[Prompt] | None]) -> None:
    """The profiling stage (``profile.after_measure``, which writes profile.json): after every point and the
    guard's window, so it never disturbs them; it profiles the plan's first point (its workload and
    prompts), whose summary alone carries it."""
    first = job.points[0]
    profiling.after_measure(server, job.plan.replace(workload=first.workload), job.paths.profile, job.log,
                            prompts[first.name], job.run_id)


# ------------------------------------------------------------ teardown


def teardown(server: Server | AttachedServer | None, grace_s: float) -> dict[str, Any]:
    """End a launched server (an attached one is not ours): outcome.json's ``exit_code`` and
    ``server_stopped_at``."""
    if not isinstance(server, Server):
        return {}
    return {"exit_code": server.stop(grace_s), "server_stopped_at": time.time()}


def join_point_records(job: Job) -> None:
    """The launch's warmup.jsonl and requests.jsonl: every point's records, in point order (atomic)."""
    for target, which in ((job.paths.warmup, 0), (job.paths.requests, 1)):
        parts = [point_files(job.paths, p.name)[which] for p in job.points]
        if any(part.exists() for part in parts):
            write_text_atomic(target, "".join(part.read_text() for part in parts if part.exists()))
    drop_point_files(job)


def drop_point_files(job: Job) -> None:
    for point in job.points:
        for part in point_files(job.paths, point.name):
            part.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (job.paths.requests.parent / ".points").rmdir()
