"""The server job: one configuration's server, from launch to teardown.

Why one job and not Snakemake ``service()`` rules: a service whose consumer
starts late makes Snakemake 9 hang with the server still running, and a
crashed service goes unnoticed. Here the job owns the server's whole life and
ends it in ``finally`` (and on SIGTERM/SIGINT), while every stage still leaves
its own file: ``launch.json`` (argv, readiness time, provenance read from
inside the server), ``server.log``, ``warmup.jsonl``, ``requests.jsonl`` and
``outcome.json``. A failure at any stage is a result, written to
``outcome.json``; only an interruption makes the job itself fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from specsweep.engines.registry import get_engine
from specsweep.files import write_json_atomic, write_text_atomic
from specsweep.images.cli import DockerError
from specsweep.plan.datasets import DatasetError, load_selection
from specsweep.serve import client
from specsweep.serve import profile as profiling
from specsweep.serve.container import container_name, container_runtime
from specsweep.serve.payloads import Prompt
from specsweep.serve.provenance import gpu_busy
from specsweep.serve.server import LaunchError, Server, free_port, http_get, tail
from specsweep.serve.slurm import EndWatch, slurm_job

PROVENANCE_SOURCE = Path(__file__).with_name("provenance.py")


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
    profile: Path | None = None  # profile.json (traces under profile/): serve.profile
    allreduce_bench: Path | None = None  # allreduce_bench.json: serve.profile


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def server_environment(plan: dict, base: dict[str, str]) -> dict[str, str]:
    """The server's environment: the job's own, then the plan's (which wins)."""
    env = dict(base)
    env.update(plan["env"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def build_launch(plan: dict, port: int, image_manifest: dict | None,
                 extra_volumes: list[str] | None = None) -> tuple[list[str], str | None]:
    """Full argv of the server process (or of ``docker run``, with ``extra_volumes`` mounted) and the container name."""
    engine = get_engine(plan["engine"])
    runtime = container_runtime(plan["runtime"])
    if runtime is not None:
        assert image_manifest is not None, f"{plan['runtime']} runtime needs the image manifest"
        name = container_name(plan["name"]) if runtime.daemon else None
        server_argv = plan["argv"] + engine.address_args("0.0.0.0", engine.container_port)
        run_plan = dict(plan, argv=server_argv, volumes=[*(plan.get("volumes") or []), *(extra_volumes or [])])
        argv = runtime.run_argv(run_plan, image_manifest["tag"], plan["host"], port, engine.container_port, name)
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


def load_prompts(plan: dict) -> list[Prompt] | None:
    """The plan's selected dataset prompts (hash-checked), or None for synthetic ones; before any launch."""
    if not plan.get("prompts"):
        return None
    try:
        return [Prompt.from_dict(d) for d in load_selection(plan["prompts"])]
    except DatasetError as exc:
        raise LaunchError("launch", "prompts_unavailable", str(exc)) from exc


def run_config(
    plan: dict, paths: JobPaths, image_manifest: dict | None, log: TextIO, registry: Mapping[str, Any] | None = None
) -> dict:
    """Launch, wait, warm up, measure, tear down; return (and write) the outcome.

    ``registry`` (the config's ``registry:``) is where a container runtime
    pulls an image that is not on this host (a cluster node never builds).
    """
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    engine = get_engine(plan["engine"])
    outcome: dict[str, Any] = {"status": "failed", "stage": "launch", "reason": None, "detail": None}
    launch: dict[str, Any] = {"plan_name": plan["name"], "started_at": time.time(), "slurm": slurm_job(os.environ)}
    for path in (paths.warmup, paths.requests):
        path.unlink(missing_ok=True)
    profiling.reset(plan, paths.profile, paths.allreduce_bench)
    server: Server | None = None
    # Under Slurm, SIGTERM reaches only the job step's snakemake: ask the scheduler (specsweep.slurm).
    watch = EndWatch(launch["slurm"]["job_id"], log).start() if launch["slurm"] else None
    try:
        prompts = load_prompts(plan)
        runtime = container_runtime(plan["runtime"])
        if runtime is not None:
            try:
                prepared = runtime.prepare(plan["name"], image_manifest, registry)
            except DockerError as exc:
                raise LaunchError("launch", "image_unavailable", str(exc)) from exc
            launch.update(prepared)
            print(f"{plan['runtime']} runtime prepared: {prepared}", file=log, flush=True)
        if plan.get("gpus", 0) > 0:
            busy = gpu_busy()
            launch["gpus_busy_before_launch"] = busy
            if busy:
                raise LaunchError("launch", "gpus_busy", f"GPUs are held by other processes, not starting: {busy}")
        volumes = profiling.before_launch(plan, paths.profile, paths.allreduce_bench, image_manifest,
                                          server_environment(plan, dict(os.environ)), log)
        port = plan["port"] or free_port(plan["host"])
        argv, container = build_launch(plan, port, image_manifest, volumes)
        launch.update(argv=argv, host=plan["host"], port=port, container=container, env=plan["env"])
        if image_manifest:
            launch["image"] = {k: image_manifest.get(k) for k in ("name", "tag", "image_id")}
        with paths.server_log.open("wb") as log_file:
            server = Server(
                argv=argv,
                env=server_environment(plan, dict(os.environ)),
                host=plan["host"],
                port=port,
                ready_path=engine.ready_path,
                log_file=log_file,
                container=container,
            )
            print(f"launching {plan['name']}: {argv}", file=log, flush=True)
            server.start()
            launch["pid"] = server.proc.pid if server.proc else None
            launch["ready_s"] = server.wait_ready(plan["ready_timeout_s"])
            print(f"ready after {launch['ready_s']:.1f} s at {server.base_url}", file=log, flush=True)
            launch["server_info"] = server_info(server)
            launch["provenance"] = collect_provenance(plan, server)
            write_json_atomic(paths.launch, launch)

            outcome["stage"] = "warmup"
            warmup_report = client.run_workload(server.base_url, plan["workload"], paths.warmup, paths.requests, log,
                                                prompts)
            outcome["warmup"] = warmup_report
            if not server.alive():
                raise LaunchError("benchmark", "server_exited", f"server exited with code {server.proc.returncode}")
            outcome.update(status="ok", stage=None)
            profiling.after_measure(server, plan, paths.profile, log, prompts)
    except LaunchError as exc:
        outcome.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
    except client.BenchmarkError as exc:
        outcome.update(stage=exc.stage, reason=exc.reason, detail=exc.detail)
    except Interrupted as exc:
        outcome.update(reason="interrupted", detail=f"received {exc}")
        raise
    finally:
        if watch is not None:
            watch.stop()
        if server is not None:
            outcome["exit_code"] = server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        outcome["log_tail"] = tail(paths.server_log) if outcome["status"] != "ok" else None
        if not paths.launch.exists():
            write_json_atomic(paths.launch, launch)
        for path in (paths.warmup, paths.requests):
            if not path.exists():
                write_text_atomic(path, "")
        if not paths.server_log.exists():
            write_text_atomic(paths.server_log, "")
        write_json_atomic(paths.outcome, outcome)
        print(f"outcome: {outcome['status']} {outcome.get('stage') or ''} {outcome.get('reason') or ''}", file=log)
    return outcome
