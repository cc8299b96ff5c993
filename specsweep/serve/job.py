"""The server job: one configuration's server, from launch to teardown.

Why one job and not Snakemake ``service()`` rules: a service whose consumer
starts late makes Snakemake 9 hang with the server still running, and a
crashed service goes unnoticed. Here the job owns the server's whole life and
ends it in ``finally`` (and on SIGTERM/SIGINT), while every stage still leaves
its own file: ``launch.json`` (argv, readiness time, provenance read from
inside the server), ``server.log``, ``warmup.jsonl``, ``requests.jsonl`` and
``outcome.json``. A failure at any stage is a result, written to
``outcome.json``; only an interruption makes the job itself fail.

One job is one *launch* of a configuration (``launch``: ``1``, ``2``, ... or
``aa``, the A/A control; ``plan.launches``). It measures every workload point
of the plan (``plan.points.plan_points``) against the same server, after one
readiness wait: warmup and measurement per point, in the plan's order. The
records of all points share the launch's two record files, each record
carrying its ``point``; ``outcome.json`` has one entry per point under
``points``. A point that fails is a result of that point: the next point
still runs while the server is alive.

Format history of outcome.json:
  1  status, stage, reason, detail, warmup, exit_code, log_tail.
  2  launch (the launch id), points = {point: {status, stage, reason, detail,
     warmup}} in measuring order; the top-level status is ok only when every
     point is, else stage/reason/detail of the launch or of the first failed
     point; warmup = the first point's (as in 1 for a single point);
     started_at, ended_at (time.time()).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from specsweep.engines.registry import get_engine
from specsweep.files import write_json_atomic, write_text_atomic
from specsweep.plan.points import plan_points
from specsweep.serve import client
from specsweep.serve.container import container_name, remove_leftovers, run_argv
from specsweep.serve.provenance import gpu_busy
from specsweep.serve.server import LaunchError, Server, free_port, http_get, tail

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


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def server_environment(plan: dict, base: dict[str, str]) -> dict[str, str]:
    """The server's environment: the job's own, then the plan's (which wins)."""
    env = dict(base)
    env.update(plan["env"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def build_launch(plan: dict, port: int, image_manifest: dict | None) -> tuple[list[str], str | None]:
    """Full argv of the server process (or of ``docker run``) and the container name."""
    engine = get_engine(plan["engine"])
    if plan["runtime"] == "docker":
        assert image_manifest is not None, "docker runtime needs the image manifest"
        name = container_name(plan["name"])
        server_argv = plan["argv"] + engine.address_args("0.0.0.0", engine.container_port)
        run_plan = dict(plan, argv=server_argv)
        argv = run_argv(run_plan, image_manifest["tag"], plan["host"], port, engine.container_port, name)
        return argv, name
    return plan["argv"] + engine.address_args(plan["host"], port), None


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
        raise LaunchError("launch", "provenance_failed", f"could not read the server's environment: {exc}") from exc


def server_info(server: Server) -> dict | None:
    for path in ("/server_info", "/get_server_info"):
        status, body = http_get(server.base_url + path, timeout=10)
        if status == 200:
            try:
                return json.loads(body)
            except ValueError as exc:
                raise LaunchError("launch", "bad_server_info", f"{path} did not answer JSON: {exc}") from exc
    return None


def _point_files(paths: JobPaths, point: str) -> tuple[Path, Path]:
    """Where one point's client writes its records before they join the launch's files."""
    tmp = paths.requests.parent / ".points"
    return tmp / f"{point}.warmup.jsonl", tmp / f"{point}.requests.jsonl"


def measure_points(plan: dict, server: Server, paths: JobPaths, outcome: dict[str, Any], log: TextIO) -> None:
    """Warm up and measure every point of the plan against ``server``; one entry per point in ``outcome``.

    A point's ``BenchmarkError`` fails that point only; when the server has
    died, the points not yet measured fail with ``server_exited``.
    """
    for point in plan_points(plan):
        name = point["name"]
        entry: dict[str, Any] = {"status": "failed", "stage": "warmup", "reason": None, "detail": None}
        outcome["points"][name] = entry
        if not server.alive():
            entry.update(stage="benchmark", reason="server_exited",
                         detail=f"server exited with code {server.proc.returncode if server.proc else None} "
                                "before this point")
            continue
        warmup_path, requests_path = _point_files(paths, name)
        print(f"point {name}: {json.dumps(point['workload'], sort_keys=True)}", file=log, flush=True)
        try:
            entry["warmup"] = client.run_workload(server.base_url, point["workload"], warmup_path, requests_path, log,
                                                  point=name)
            if not server.alive():
                raise LaunchError("benchmark", "server_exited", f"server exited with code {server.proc.returncode}")
            entry.update(status="ok", stage=None)
        except (LaunchError, client.BenchmarkError) as exc:
            entry.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)


def _join_point_records(plan: dict, paths: JobPaths) -> None:
    """The launch's warmup.jsonl and requests.jsonl: every point's records, in point order (atomic)."""
    for target, which in ((paths.warmup, 0), (paths.requests, 1)):
        parts = [_point_files(paths, p["name"])[which] for p in plan_points(plan)]
        write_text_atomic(target, "".join(p.read_text() for p in parts if p.exists()))
    for point in plan_points(plan):
        for part in _point_files(paths, point["name"]):
            part.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (paths.requests.parent / ".points").rmdir()


def _settle_outcome(outcome: dict[str, Any]) -> None:
    """Top-level status from the points: ok only when every point is; else the first failure."""
    points = outcome["points"]
    if outcome["stage"] != "points":  # the launch itself failed: every point shares its failure
        return
    failed = [p for p in points.values() if p["status"] != "ok"]
    first = next(iter(points.values()), None)
    outcome["warmup"] = first.get("warmup") if first else None
    if failed:
        outcome.update(status="failed", stage=failed[0]["stage"], reason=failed[0]["reason"],
                       detail=failed[0]["detail"] if len(points) == 1 else
                       f"{len(failed)} of {len(points)} points failed; first: {failed[0]['detail']}")
    else:
        outcome.update(status="ok", stage=None)


def run_config(plan: dict, paths: JobPaths, image_manifest: dict | None, log: TextIO, launch_id: str = "1") -> dict:
    """Launch, wait, warm up and measure every point, tear down; return (and write) the outcome."""
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    engine = get_engine(plan["engine"])
    outcome: dict[str, Any] = {"format_version": OUTCOME_FORMAT_VERSION, "status": "failed", "stage": "launch",
                               "reason": None, "detail": None, "launch": launch_id, "points": {},
                               "started_at": time.time()}
    launch: dict[str, Any] = {"plan_name": plan["name"], "launch": launch_id, "started_at": outcome["started_at"],
                              "points": [p["name"] for p in plan_points(plan)]}
    run_plan = dict(plan, env={**plan["env"], LAUNCH_ENV: launch_id})
    for path in (paths.warmup, paths.requests, *(f for pt in plan_points(plan) for f in _point_files(paths, pt["name"]))):
        path.unlink(missing_ok=True)  # nothing of an earlier, interrupted job may join this launch's records
    server: Server | None = None
    try:
        if plan["runtime"] == "docker":
            removed = remove_leftovers(plan["name"])
            launch["removed_leftover_containers"] = removed
            if removed:
                print(f"removed leftover containers of {plan['name']}: {removed}", file=log)
        if plan.get("gpus", 0) > 0:
            busy = gpu_busy()
            launch["gpus_busy_before_launch"] = busy
            if busy:
                raise LaunchError("launch", "gpus_busy", f"GPUs are held by other processes, not starting: {busy}")
        port = plan["port"] or free_port(plan["host"])
        argv, container = build_launch(run_plan, port, image_manifest)
        launch.update(argv=argv, host=plan["host"], port=port, container=container, env=run_plan["env"])
        if image_manifest:
            launch["image"] = {k: image_manifest.get(k) for k in ("name", "tag", "image_id")}
        with paths.server_log.open("wb") as log_file:
            server = Server(
                argv=argv,
                env=server_environment(run_plan, dict(os.environ)),
                host=plan["host"],
                port=port,
                ready_path=engine.ready_path,
                log_file=log_file,
                container=container,
            )
            print(f"launching {plan['name']} (launch {launch_id}): {argv}", file=log, flush=True)
            server.start()
            launch["pid"] = server.proc.pid if server.proc else None
            launch["ready_s"] = server.wait_ready(plan["ready_timeout_s"])
            print(f"ready after {launch['ready_s']:.1f} s at {server.base_url}", file=log, flush=True)
            launch["server_info"] = server_info(server)
            launch["provenance"] = collect_provenance(plan, server)
            write_json_atomic(paths.launch, launch)

            outcome["stage"] = "points"
            measure_points(plan, server, paths, outcome, log)
            _settle_outcome(outcome)
    except LaunchError as exc:
        outcome.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
    except client.BenchmarkError as exc:
        outcome.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
    except Interrupted as exc:
        outcome.update(reason="interrupted", detail=f"received {exc}")
        raise
    finally:
        if server is not None:
            outcome["exit_code"] = server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if outcome["stage"] == "points":  # interrupted between points: the launch did not finish
            outcome["stage"] = "benchmark"
        outcome["log_tail"] = tail(paths.server_log) if outcome["status"] != "ok" else None
        outcome["ended_at"] = time.time()
        if not paths.launch.exists():
            write_json_atomic(paths.launch, launch)
        _join_point_records(plan, paths)
        if not paths.server_log.exists():
            write_text_atomic(paths.server_log, "")
        write_json_atomic(paths.outcome, outcome)
        print(f"outcome: {outcome['status']} {outcome.get('stage') or ''} {outcome.get('reason') or ''}", file=log)
    return outcome
