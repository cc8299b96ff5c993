"""What a launch starts: the server's argv, its environment, NCCL's log files, and what it says it runs.

Pure functions of the plan (``contracts.plan.Plan``) and the run, plus the two reads from a started
server (``collect_provenance``, ``server_info``); the server job's phases (``serve.phases``) call them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from specsweep.contracts.layout import NCCL_FILE_GLOB, NCCL_FILE_PATTERN, NCCL_LOG_DIR
from specsweep.contracts.plan import Plan
from specsweep.contracts.vocabulary import Reason, Stage
from specsweep.engines.registry import get_engine
from specsweep.engines.variants import packages as variant_packages
from specsweep.serve import guard
from specsweep.serve.container import container_name, container_runtime, uses_host_network
from specsweep.serve.server import AttachedServer, LaunchError, Server, http_get

PROVENANCE_SOURCE = Path(__file__).with_name("provenance.py")
#: The server's environment names its launch (recorded in provenance; the
#: reference engine's test-only fault SPECSWEEP_TEST_STEP_DELAY_S reads it).
LAUNCH_ENV = "SPECSWEEP_LAUNCH"

# NCCL writes its NCCL_DEBUG=INFO lines to C stdout, block-buffered when stdout
# is a pipe: a server torn down by `docker rm -f` or SIGKILL can lose the
# unflushed tail, with the lines that say what NCCL chose. NCCL_DEBUG_FILE
# (one file per process: %h = host, %p = pid) is opened line-buffered instead
# (NCCL v2.30.7-1 src/debug.cc ncclDebugInit: fopen + setlinebuf). Written into
# the configuration's results directory; a container gets it mounted here.
# The directory and file names are the path grammar's (contracts.layout: NCCL_LOG_DIR, NCCL_FILE_PATTERN).
NCCL_CONTAINER_DIR = "/specsweep-nccl"


def with_nccl_debug_file(plan: Plan, host_dir: Path) -> Plan:
    """The plan with ``NCCL_DEBUG_FILE`` in its env (and, in a container, the directory mounted).

    Only when the plan turns NCCL's log on (``NCCL_DEBUG``) and does not name
    a file itself. NCCL does not create the directory: the caller does.
    """
    env = dict(plan.env)
    if not env.get("NCCL_DEBUG") or env.get("NCCL_DEBUG_FILE"):
        return plan
    host_dir = Path(os.path.abspath(host_dir))
    if plan.runtime == "docker":
        env["NCCL_DEBUG_FILE"] = f"{NCCL_CONTAINER_DIR}/{NCCL_FILE_PATTERN}"
        return plan.replace(env=env, volumes=[*plan.volumes, f"{host_dir}:{NCCL_CONTAINER_DIR}:rw"])
    env["NCCL_DEBUG_FILE"] = str(host_dir / NCCL_FILE_PATTERN)
    return plan.replace(env=env)


def nccl_logs(results_dir: Path, nccl_dir: Path | None = None) -> list[str]:
    """The NCCL debug files of one configuration's last run, each as text (sorted by file name)."""
    directory = Path(nccl_dir) if nccl_dir is not None else Path(results_dir) / NCCL_LOG_DIR
    if not directory.is_dir():
        return []
    return [path.read_text(errors="replace") for path in sorted(directory.glob(NCCL_FILE_GLOB))]


def fresh_nccl_dir(directory: Path) -> None:
    """An empty directory: a previous run's NCCL files must not count as this run's evidence."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.glob(NCCL_FILE_GLOB):
        path.unlink()


def identity_env(run_id: str, config: str, workdir: Path) -> dict[str, str]:
    """What marks a server process as this run's (``serve.guard`` finds other runs' servers by it)."""
    return {guard.RUN_ENV: run_id, guard.CONFIG_ENV: config, guard.CHECKOUT_ENV: os.path.realpath(workdir)}


def server_environment(plan_env: Mapping[str, str], base: Mapping[str, str],
                       identity: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the job's own (``base``), then the plan's ``env`` (which wins), then the
    run's identity."""
    env = dict(base)
    env.update(plan_env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(identity or {})
    return env


def build_launch(plan: Plan, port: int, image_manifest: Mapping | None, labels: Mapping[str, str] | None = None,
                 identity: Mapping[str, str] | None = None,
                 extra_volumes: list[str] | None = None) -> tuple[list[str], str | None]:
    """Full argv of the server process (or of ``docker run``) and the container name.

    ``labels`` go on the container; ``identity``'s keys are passed into it
    (``-e KEY``, values from the docker client's environment); ``extra_volumes``
    are mounted beside the plan's (the profiling stage's trace directory).
    """
    engine = get_engine(plan.engine)
    runtime = container_runtime(plan.runtime)
    if runtime is not None:
        assert image_manifest is not None, f"{plan.runtime} runtime needs the image manifest"
        name = container_name(plan.name) if runtime.daemon else None
        # On the host's network (rdma: true) the server binds the job's own address; else the container's port.
        server_argv = list(plan.argv) + (engine.address_args(plan.host or "127.0.0.1", port)
                                         if uses_host_network(plan) else
                                         engine.address_args("0.0.0.0", engine.container_port))
        run_plan = plan.replace(argv=tuple(server_argv), env={**plan.env, **(identity or {})},
                                volumes=[*plan.volumes, *(extra_volumes or [])])
        argv = runtime.run_argv(run_plan, image_manifest["tag"], plan.host, port, engine.container_port, name,
                                labels=labels)
        return argv, name
    return list(plan.argv) + engine.address_args(plan.host, port), None


def gpu_ids(plan: Plan, environ: Mapping[str, str]) -> list[str]:
    """The GPUs a server uses, for their locks: the first ``gpus`` of ``CUDA_VISIBLE_DEVICES`` (the
    plan's, else the job's), else ``0..gpus-1``."""
    n = int(plan.gpus or 0)
    visible = plan.env.get("CUDA_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES"))
    if visible:
        return [d.strip() for d in visible.split(",") if d.strip()][:n]
    return [str(i) for i in range(n)]


def collect_provenance(server: Server, python: str = sys.executable) -> dict:
    """What really was in effect, read from inside the server's own environment."""
    source = PROVENANCE_SOURCE.read_text()
    # The backend variants' packages (their registry entries'), besides the ones the script knows itself.
    packages = ["--packages", json.dumps({k: list(v) for k, v in variant_packages().items()}, sort_keys=True)]
    if server.container:
        # PID 1 is docker's init (`--init`); the server is its child.
        argv = ["docker", "exec", "-i", server.container, "python3", "-", "--child-of", "1", *packages]
    else:
        assert server.proc is not None
        argv = [python, "-", "--pid", str(server.proc.pid), *packages]
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
    """The server's own account of what it runs (``/server_info``, else ``/get_server_info``), or None."""
    for path in ("/server_info", "/get_server_info"):
        status, body = http_get(server.base_url + path, timeout=10)
        if status == 200:
            try:
                return json.loads(body)
            except ValueError as exc:
                raise LaunchError(Stage.LAUNCH, Reason.BAD_SERVER_INFO, f"{path} did not answer JSON: {exc}") from exc
    return None
