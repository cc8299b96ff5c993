"""The profiling stages of the server job: an all-reduce micro-benchmark before launch, a profiler trace after.

Both run only for a configuration whose plan has ``profile.enabled`` (the
``profile:`` key of the config schema; a plan without it is the plan of
before this stage existed, so existing results do not rerun). Each writes its
own file, always, so the DAG sees them: ``allreduce_bench.json`` and
``profile.json`` say ``{"enabled": false}`` when profiling is off, and
``status: not_run`` with the reason when the job ended before the stage.

* **Before the server starts** (``before_launch``): the configuration's
  all-reduce path timed at one verify all-reduce's message size, in the
  server's own environment and, for the docker runtime, in its image
  (``allreduce_bench.py``, run by path; the engine says how:
  ``Engine.comm_profile``). The GPUs are free then, so the loop measures the
  link, not contention with the server.
* **After the measured repeats** (``after_measure``), so it never disturbs
  them: ``POST /start_profile`` (``output_dir``, ``activities``, ``num_steps``
  when limited, ``with_stack``/``record_shapes`` off to keep the overhead and
  the files small: SGLang 0.5.23 ``managers/io_struct.py`` ``ProfileReq``,
  ``managers/tokenizer_control_mixin.py`` ``start_profile``), a few
  representative requests of the same workload (``client.run_phase``, phase
  ``profile``, their raw records in ``profile/requests.jsonl``), ``POST
  /stop_profile``, then the wait until every rank's
  ``*-TP-<rank>*.trace.json.gz`` is complete in ``results/<config>/launch-<launch>/profile/``
  (mounted into the container at ``CONTAINER_PROFILE_DIR`` for the docker
  runtime). With ``num_steps`` SGLang stops by itself after that many forward
  steps and then answers ``/stop_profile`` with an error ("Profiling is not in
  progress", ``scheduler_components/profiler_manager.py`` ``_stop_profile``),
  which is expected; the trace files decide. The stage's wall time is
  recorded as its cost.

The traces are analysed by ``specsweep.analysis.trace`` when the
configuration is summarised, not here: raw data first, so the analysis can be
recomputed without a server.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, TextIO

from specsweep.contracts.layout import TRACE_GLOB, TRACE_NAME_RE
from specsweep.contracts.plan import Plan
from specsweep.contracts.vocabulary import Failure, Reason, RequestStatus, Stage, StageStatus
from specsweep.engines.registry import get_engine
from specsweep.files import write_json_atomic
from specsweep.images.cli import run_docker
from specsweep.serve import client
from specsweep.serve.container import container_name, container_runtime, remove_container
from specsweep.serve.guard import RUN_LABEL_KEY
from specsweep.serve.payloads import Prompt
from specsweep.serve.server import Server, free_port
from specsweep.serve.watchdog import exec_argv

# Format history of results/<config>/launch-<launch>/profile.json and
# results/<config>/launch-<launch>/allreduce_bench.json:
#   1  enabled, status, reason, detail, seconds, settings, and per stage: files, requests (profile) or
#      argv, result (allreduce_bench, the script's own JSON).
#   2  + run_id (the server job's: summarize_config refuses files of two runs); the profiled
#      requests carry it too.
FORMAT_VERSION = 2

BENCH_SCRIPT = Path(__file__).with_name("allreduce_bench.py")
CONTAINER_BENCH_SCRIPT = "/specsweep/allreduce_bench.py"
CONTAINER_PROFILE_DIR = "/specsweep/profile"
#: Seconds the trace files must keep their size before they count as written.
STABLE_S = 1.0


class ProfileError(Failure):
    """A profiling stage (``allreduce_bench`` or ``profile``) could not produce its evidence."""


def settings_of(plan: Plan) -> dict[str, Any] | None:
    """The plan's profile settings when profiling is on, else None."""
    settings = plan.profile
    return dict(settings) if isinstance(settings, Mapping) and settings.get("enabled") else None


def profile_dir(profile_json: Path) -> Path:
    """``results/<config>/launch-<launch>/profile/`` beside ``results/<config>/launch-<launch>/profile.json``
    (traces, profiled requests)."""
    return profile_json.with_suffix("")


def _record(enabled: bool, run_id: str | None, **fields: Any) -> dict[str, Any]:
    return {"format_version": FORMAT_VERSION, "enabled": enabled, "run_id": run_id, **fields}


def _initial(plan: Plan, run_id: str | None) -> dict[str, Any]:
    """A stage's file before the stage: ``off``, or ``not_run`` (the job ended before the stage)."""
    settings = settings_of(plan)
    if settings is None:
        return _record(False, run_id, status=StageStatus.OFF, reason="profile.enabled is false for this configuration")
    return _record(True, run_id, status=StageStatus.NOT_RUN, reason="the server job ended before this stage",
                   settings=settings)


def reset(plan: Plan, profile_json: Path | None, bench_json: Path | None,
          run_id: str | None = None) -> None:
    """Once the job owns its files (host lock held): remove the last run's traces and write each
    stage's file as not (yet) run, with this run's id."""
    if profile_json is None or bench_json is None:
        return
    directory = profile_dir(profile_json)
    if directory.exists():
        shutil.rmtree(directory)
    if settings_of(plan) is not None:
        directory.mkdir(parents=True)
    for path in (profile_json, bench_json):
        write_json_atomic(path, _initial(plan, run_id))


def _run_id_of(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None


def finish(plan: Plan, profile_json: Path | None, bench_json: Path | None, run_id: str) -> None:
    """At the job's end: each stage's file exists and is this run's (a job that failed before it
    owned its files, e.g. ``host_busy``, must not leave another run's profile as its own)."""
    for path in (profile_json, bench_json):
        if path is not None and _run_id_of(path) != run_id:
            write_json_atomic(path, _initial(plan, run_id))


# ------------------------------------------------------------ micro-benchmark


def bench_script_args(comm: Mapping[str, Any], concurrency: int, iters: int) -> list[str]:
    """The script's arguments for one plan (``Engine.comm_profile`` plus the workload's concurrency)."""
    tokens = int(comm["draft_tokens"]) * max(1, int(concurrency))
    return ["--runner", str(comm["runner"]), "--backend", str(comm["backend"]),
            "--world-size", str(comm["world_size"]), "--device", str(comm["device"]),
            "--timing", str(comm.get("timing") or "back_to_back"),
            "--model-path", str(comm["model_path"]), "--dtype", str(comm["dtype"]),
            "--tokens", str(tokens), "--iters", str(iters)]


def bench_argv(plan: Plan, script_args: list[str], image_manifest: Mapping[str, Any] | None,
               name: str | None, labels: Mapping[str, str] | None = None) -> list[str]:
    """The micro-benchmark's full argv: this interpreter and the script, or the plan's container runtime
    (``docker run`` of the plan's image, with the run's ``labels``) with the script mounted."""
    runtime = container_runtime(plan.runtime)
    if runtime is None:
        # -P: not the script's directory first on sys.path, where serve/profile.py would shadow the stdlib's profile.
        return [sys.executable, "-P", str(BENCH_SCRIPT), *script_args]
    assert image_manifest is not None, f"{plan.runtime} runtime needs the image manifest"
    volumes = [*plan.volumes, f"{BENCH_SCRIPT.resolve()}:{CONTAINER_BENCH_SCRIPT}:ro"]
    run_plan = plan.replace(argv=("python3", CONTAINER_BENCH_SCRIPT, *script_args), volumes=volumes)
    # The server's argv builder publishes a port; a free one on loopback costs nothing.
    return runtime.run_argv(run_plan, image_manifest["tag"], "127.0.0.1", free_port("127.0.0.1"), 1, name,
                            labels=labels)


def _run_bench(argv: list[str], env: Mapping[str, str], timeout_s: float,
               container: str | None, on_start: Callable[[int], None] | None = None) -> tuple[int, str, str]:
    """Run the benchmark in its own process group; on timeout or interruption end it (and its container).

    Started through ``watchdog.exec_argv`` (it gets SIGTERM when the job dies); ``on_start`` gets its
    process group (the job's reaper ends it, and removes the run's containers, if the job is killed).
    """
    proc = subprocess.Popen(exec_argv(os.getpid(), argv), env=dict(env), stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    if on_start is not None:
        on_start(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        raise ProfileError(Stage.ALLREDUCE_BENCH, Reason.BENCH_TIMEOUT,
                           f"the micro-benchmark did not finish within {timeout_s:g} s") from None
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # already gone
            proc.wait()
        if container:
            remove_container(container)


def run_allreduce_bench(plan: Plan, settings: Mapping[str, Any], out_path: Path,
                        image_manifest: Mapping[str, Any] | None, env: Mapping[str, str], log: TextIO, *,
                        run_id: str | None = None, labels: Mapping[str, str] | None = None,
                        on_start: Callable[[int], None] | None = None) -> dict:
    """The micro-benchmark stage: time the plan's all-reduce at the verify's size; write ``out_path``."""
    record = _record(True, run_id, status=StageStatus.FAILED, reason=None, detail=None, settings=dict(settings))
    t0 = time.monotonic()
    try:
        comm = get_engine(plan.engine).comm_profile(plan)
        record["comm"] = comm
        if not settings.get("allreduce_bench", True):
            record.update(status=StageStatus.OFF, reason="profile.allreduce_bench is false")
            return record
        if comm.get("skip"):
            record.update(status=StageStatus.SKIPPED, reason=comm["skip"])
            return record
        script_args = bench_script_args(comm, int(plan.workload["concurrency"]), int(settings["allreduce_iters"]))
        runtime = container_runtime(plan.runtime)
        name = f"{container_name(plan.name)}-bench" if runtime is not None and runtime.daemon else None
        argv = bench_argv(plan, script_args, image_manifest, name, labels)
        record["argv"] = argv
        print(f"all-reduce micro-benchmark: {argv}", file=log, flush=True)
        code, out, err = _run_bench(argv, env, float(settings["allreduce_timeout_s"]), name, on_start)
        if err:
            log.write(err[-4000:])
            log.flush()
        if code != 0:
            raise ProfileError(Stage.ALLREDUCE_BENCH, Reason.BENCH_FAILED, f"exited {code}: {err.strip()[-1500:]}")
        try:
            record["result"] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise ProfileError(Stage.ALLREDUCE_BENCH, Reason.BENCH_OUTPUT,
                               f"no JSON on stdout ({exc}): {out[-500:]!r}") from exc
        bad = [s["tokens"] for s in record["result"]["sizes"] if not s["correct"]]
        if bad:
            raise ProfileError(Stage.ALLREDUCE_BENCH, Reason.BENCH_WRONG_SUM,
                               f"the all-reduce summed wrongly at {bad} tokens")
        record.update(status=StageStatus.OK)
        return record
    except ProfileError as exc:
        record.update(reason=exc.reason, detail=exc.detail)
        print(f"all-reduce micro-benchmark failed: {exc}", file=log, flush=True)
        return record
    finally:
        record["seconds"] = time.monotonic() - t0
        write_json_atomic(out_path, record)


def before_launch(plan: Plan, profile_json: Path | None, bench_json: Path | None,
                  image_manifest: Mapping[str, Any] | None, env: Mapping[str, str], log: TextIO, *,
                  labels: Mapping[str, str] | None = None,
                  on_start: Callable[[int], None] | None = None) -> list[str]:
    """The stage before launch: run the micro-benchmark; return the volumes the server container needs.

    ``labels``: the run's container labels (``container.run_labels``; their run id goes into the file);
    ``on_start``: told the benchmark's process group (the reaper's ``watch_group``)."""
    settings = settings_of(plan)
    if settings is None or profile_json is None or bench_json is None:
        return []
    run_allreduce_bench(plan, settings, bench_json, image_manifest, env, log,
                        run_id=(labels or {}).get(RUN_LABEL_KEY), labels=labels, on_start=on_start)
    if container_runtime(plan.runtime) is not None:
        return [f"{profile_dir(profile_json).resolve()}:{CONTAINER_PROFILE_DIR}"]
    return []


# ------------------------------------------------------------ trace stage


def _post(url: str, body: Mapping[str, Any], timeout_s: float) -> tuple[int, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - the server we launched
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def trace_files(directory: Path) -> list[Path]:
    """The per-rank trace files in ``directory`` (``*-TP-<rank>*.trace.json.gz``)."""
    return sorted(p for p in directory.glob(TRACE_GLOB) if TRACE_NAME_RE.search(p.name))


def _complete(path: Path) -> bool:
    """A gzip file whose stream ends properly (the exporter writes it in place, so a growing file is not)."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
        return True
    except (OSError, EOFError):
        return False


def wait_for_traces(directory: Path, ranks: int, timeout_s: float, poll_s: float = 0.5) -> list[Path]:
    """Wait until ``ranks`` trace files exist, keep their size for ``STABLE_S`` and decompress whole."""
    deadline = time.monotonic() + timeout_s
    sizes: dict[Path, tuple[int, float]] = {}
    while True:
        now = time.monotonic()
        files = trace_files(directory)
        stable = []
        for p in files:
            size = p.stat().st_size
            last = sizes.get(p)
            if last is None or last[0] != size:
                sizes[p] = (size, now)
            elif now - last[1] >= STABLE_S:
                stable.append(p)
        if len(files) >= ranks and len(stable) == len(files) and all(_complete(p) for p in files):
            return files
        if now >= deadline:
            raise ProfileError(Stage.PROFILE, Reason.TRACES_MISSING,
                               f"{len(files)} of {ranks} trace files complete in {directory} "
                               f"after {timeout_s:g} s: {[p.name for p in files]}")
        time.sleep(poll_s)


def _chown(container: str, log: TextIO) -> None:
    """Give the traces the container wrote (as root) to the user running the workflow."""
    proc = run_docker(["docker", "exec", container, "chown", "-R", f"{os.getuid()}:{os.getgid()}",
                       CONTAINER_PROFILE_DIR], check=False)
    if proc.returncode != 0:
        print(f"chown of the trace files in {container} failed: {(proc.stderr or '').strip()}", file=log)


def after_measure(server: Server, plan: Plan, profile_json: Path | None, log: TextIO,
                  prompts: list[Prompt] | None = None, run_id: str | None = None) -> dict | None:
    """The profiling stage after the measured repeats; writes ``profile.json`` (traces under ``profile/``).

    ``prompts``: the plan's selected prompts (None: synthetic), as the measured repeats used;
    ``run_id``: the server job's (in profile.json and every profiled request's record)."""
    settings = settings_of(plan)
    if settings is None or profile_json is None:
        return None
    directory = profile_dir(profile_json)
    record = _record(True, run_id, status=StageStatus.FAILED, reason=None, detail=None, settings=settings, files=[],
                     requests=str(Path(directory.name) / "requests.jsonl"))
    t0 = time.monotonic()
    ranks = int(get_engine(plan.engine).comm_profile(plan)["world_size"])
    # In a container the directory is mounted (before_launch); the server writes to the mount point.
    output_dir = CONTAINER_PROFILE_DIR if container_runtime(plan.runtime) is not None else str(directory.resolve())
    body: dict[str, Any] = {"output_dir": output_dir, "activities": list(settings["activities"]),
                            "with_stack": False, "record_shapes": False,
                            "profile_id": f"specsweep-{uuid.uuid4().hex[:8]}"}
    if settings.get("num_steps"):
        body["num_steps"] = int(settings["num_steps"])
    record["start_body"] = body
    try:
        status, text = _post(server.base_url + "/start_profile", body, timeout_s=float(settings["trace_timeout_s"]))
        if status != 200:
            raise ProfileError(Stage.PROFILE, Reason.START_PROFILE_FAILED, f"HTTP {status}: {text[:500]}")
        t_requests = time.monotonic()
        record["start_s"] = t_requests - t0
        records = client.run_phase(server.base_url, dict(plan.workload), "profile", int(settings["requests"]),
                                   directory / "requests.jsonl", log, prompts, run_id)
        record["requests_s"] = time.monotonic() - t_requests
        record["requests_ok"] = sum(r["status"] == RequestStatus.OK for r in records)
        t_stop = time.monotonic()
        status, text = _post(server.base_url + "/stop_profile", {}, timeout_s=float(settings["trace_timeout_s"]))
        record["stop_profile"] = {"status": status, "body": text[:500]}
        if status != 200 and not settings.get("num_steps"):
            raise ProfileError(Stage.PROFILE, Reason.STOP_PROFILE_FAILED, f"HTTP {status}: {text[:500]}")
        files = wait_for_traces(directory, ranks, float(settings["trace_timeout_s"]))
        record["stop_s"] = time.monotonic() - t_stop
        if server.container:
            _chown(server.container, log)
        record.update(status=StageStatus.OK, files=[p.name for p in files], bytes=sum(p.stat().st_size for p in files))
        if not server.alive():
            raise ProfileError(Stage.PROFILE, Reason.SERVER_EXITED,
                               f"the server exited with code {server.proc.returncode} while profiling")
    except (ProfileError, client.BenchmarkError) as exc:
        record.update(status=StageStatus.FAILED, reason=exc.reason, detail=exc.detail)
        print(f"profiling failed: {exc}", file=log, flush=True)
    finally:
        record["seconds"] = time.monotonic() - t0
        write_json_atomic(profile_json, record)
    print(f"profiling: {record['status']} in {record['seconds']:.1f} s, {len(record['files'])} trace files",
          file=log, flush=True)
    return record
