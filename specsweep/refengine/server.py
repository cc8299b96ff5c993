"""Process orchestration: rank 0 spawns the other ranks, serves HTTP, and owns shutdown.

Supervision contract: bad flags exit 2 with argparse's message; a rank that
fails at startup or later makes the server exit 1 (and kill the remaining
ranks); SIGTERM/SIGINT shut every rank down and exit 0. Followers also die
with rank 0 through ``PR_SET_PDEATHSIG``, so no rank outlives the server.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing as mp
import os
import platform
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

from . import __version__
from .affinity import Placement, available_cores, pin_rank, plan_placement
from .cli import cuda_graph_enabled, parse_args, resolved_args_dict
from .comm import SAFE_CUDA_ENV, TEST_FAULT_ENV, check_cuda_env, parse_test_fault
from .config import ModelConfig, load_config, serving_context
from .engine import Engine, Request
from .faults import LAUNCH_ENV, STEP_DELAY_ENV, STEP_SLOWDOWN_ENV, step_delay_s, step_slowdown
from .footprint import DTYPE_BYTES
from .http import ServerState, build_app
from .metrics import Metrics
from .rendezvous import CommError, comm_host, prepare_spec
from .spec import parse_simulate_acc_len
from .tokenizer import ByteTokenizer
from .worker import Driver, RankSetup, build_graphs, build_rank, follower_main

log = logging.getLogger("specsweep.refengine")

READY_LINE = "The server is fired up and ready to roll!"
ENV_PREFIXES = ("NCCL_", "SGLANG_", "TORCH_", "OMP_", "CUDA_", "MKL_", "PYTORCH_")
CHUNK_TOKENS = 1024


def effective_environment(env: dict[str, str]) -> dict[str, str]:
    """The communication-relevant environment as this process sees it (not as a config intended)."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def versions() -> dict[str, str]:
    """Versions of what shapes the numbers, as installed (distribution metadata, not module attributes)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    out = {"refengine": __version__, "python": platform.python_version()}
    for dist in ("torch", "numpy", "aiohttp", "prometheus_client"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        nccl = getattr(torch.cuda, "nccl", None)
        if nccl is not None:
            try:
                out["nccl"] = ".".join(map(str, nccl.version()))
            except Exception as exc:  # reported, not hidden
                out["nccl"] = f"unknown ({exc})"
    return out


class RankSet:
    """The follower processes plus a monitor that fails the server when one dies unexpectedly."""

    def __init__(self, setup: RankSetup, world_size: int) -> None:
        ctx = mp.get_context("spawn")
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.shutting_down = threading.Event()
        self.shm_path = setup.comm.shm_path
        for rank in range(1, world_size):
            parent, child = ctx.Pipe(duplex=True)
            p = ctx.Process(target=follower_main, args=(rank, setup, child, os.getpid()), name=f"refengine-rank{rank}",
                            daemon=False)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        self._monitor = threading.Thread(target=self._watch, name="refengine-rank-monitor", daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        if not self.procs:
            return
        dead = wait([p.sentinel for p in self.procs])
        if self.shutting_down.wait(timeout=1.0):
            return  # a death during an ordered shutdown (e.g. SIGTERM to the whole group) is expected
        for p in self.procs:
            if p.sentinel in dead:
                p.join(timeout=1)
                log.error("rank %s (pid %s) exited unexpectedly with code %s; shutting the server down",
                          p.name.removeprefix("refengine-rank"), p.pid, p.exitcode)
        self.kill()
        logging.shutdown()
        os._exit(1)

    def wait_ready(self, timeout_s: float) -> list[dict[str, Any]]:
        """Block until every follower reported ready; raise with the follower's message otherwise."""
        infos: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        for rank, (p, c) in enumerate(zip(self.procs, self.conns), start=1):
            while not c.poll(0.1):
                if not p.is_alive():
                    raise RuntimeError(f"rank {rank} exited with code {p.exitcode} during startup")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rank {rank} not ready after {timeout_s}s")
            msg = c.recv()
            if msg[0] != "ready":
                raise RuntimeError(f"rank {rank} failed during startup:\n{msg[1]}")
            infos.append({"rank": rank, "pid": msg[1], "backend": msg[2], "cores": msg[3]})
        return infos

    def unlink_shm(self) -> None:
        """Remove the shm file once every rank mapped it (the mappings stay valid)."""
        if self.shm_path and os.path.exists(self.shm_path):
            os.unlink(self.shm_path)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ordered stop (the caller has sent 'shutdown'); kill whatever does not exit in time."""
        self.shutting_down.set()
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        self.shutting_down.set()
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=5)
        self.unlink_shm()


def _omp_threads(env: dict[str, str]) -> int | None:
    if env.get("OMP_NUM_THREADS", "").isdigit() and int(env["OMP_NUM_THREADS"]) > 0:
        return int(env["OMP_NUM_THREADS"])
    return None


def _num_threads(env: dict[str, str], world_size: int, placement: Placement | None = None) -> int:
    """Intra-op threads per rank: OMP_NUM_THREADS if set, else the cores of a pinned rank, else the cores
    shared evenly."""
    omp = _omp_threads(env)
    if omp is not None:
        return omp
    if placement is not None and placement.pinned:
        return placement.cores_per_rank()  # type: ignore[return-value]
    return max(1, (os.cpu_count() or 1) // world_size)


def rank_setup(ns: argparse.Namespace, cfg: ModelConfig, draft_cfg: ModelConfig | None, comm_spec: Any,
               spec_steps: int | None, context: int, num_threads: int,
               placement: Placement | None = None) -> RankSetup:
    """What every rank builds from the resolved arguments (CUDA graphs: ``cli.cuda_graph_enabled``; prefill
    graphs with them unless --disable-prefill-cuda-graph, up to one prefill chunk)."""
    graphs = cuda_graph_enabled(ns)
    return RankSetup(cfg=cfg, draft_cfg=draft_cfg, comm=comm_spec, device=ns.device, dtype=ns.dtype,
                     seed=ns.random_seed, with_draft=spec_steps is not None, num_threads=num_threads,
                     cuda_graph=graphs, graph_comm_timing=not ns.disable_graph_comm_timing,
                     max_running=ns.max_running_requests, context_length=context, spec_steps=spec_steps,
                     prefill_graph_tokens=CHUNK_TOKENS if graphs and not ns.disable_prefill_cuda_graph else 0,
                     placement=placement)


def _server_info(ns: argparse.Namespace, cfg: ModelConfig, engine: Engine, backend: str, world_size: int,
                 rank_infos: list[dict[str, Any]], simulate: float | None,
                 graphs: dict[str, Any] | None = None, placement: dict[str, Any] | None = None) -> dict[str, Any]:
    info = resolved_args_dict(ns)
    state: dict[str, Any] = {"last_gen_throughput": engine.gen_throughput(), "step_count": engine.lifetime["steps"],
                             "num_requests": engine.lifetime["requests"]}
    if ns.speculative_algorithm != "NONE":
        state["avg_spec_accept_length"] = engine.avg_spec_accept_length()
    info.update({
        "version": f"refengine-{__version__}",
        "engine": "specsweep-refengine",
        "internal_states": [state],
        "pid": os.getpid(),
        "rank_pids": [os.getpid()] + [r["pid"] for r in rank_infos],
        "all_reduce_backend": backend,
        "world_size": world_size,
        "simulate_acc_len": simulate,
        # test-only faults in effect (refengine.faults): 0 outside tests
        "test_faults": {"step_delay_s": engine.step_delay_s, "step_slowdown": engine.step_slowdown},
        "cuda_graph": _graph_info(graphs),
        "cpu_placement": placement,
        "model_config": cfg.to_dict(),
        "versions": versions(),
        "environment": effective_environment(dict(os.environ)),
    })
    return info


def _graph_info(report: dict[str, Any] | None) -> dict[str, Any]:
    """The CUDA-graph part of /server_info: what was captured, what failed (and so runs eager)."""
    if report is None:
        return {"enabled": False}
    return {"enabled": True, "graphs": len(report["captured"]), "capture_s": round(report["capture_s"], 3),
            **report["plan"], "failed": report["failed"], "comm_untimed": report["comm_untimed"],
            "pools": report.get("pools", 1)}


def _log_graphs(report: dict[str, Any]) -> None:
    plan = report["plan"]
    if plan["prefill_kinds"]:
        prefill = (f"{'/'.join(plan['prefill_kinds'])} padded to {','.join(map(str, plan['prefill_buckets']))} "
                   f"tokens (at most {plan['prefill_tokens']} a graph)")
    else:
        prefill = "none (prefill runs eager)"
    log.info("CUDA graphs: %d captured in %.1f s: decode %s x batch %s x kv length %s; prefill %s; other shapes "
             "run eager", len(report["captured"]), report["capture_s"], "/".join(plan["kinds"]),
             ",".join(map(str, plan["batch_sizes"])), ",".join(map(str, plan["kv_buckets"])), prefill)
    if report.get("pools", 1) > 1:
        log.warning("CUDA graphs: %d memory pools (a failed capture leaves its pool unusable)", report["pools"])
    for key, err in report["failed"].items():
        log.warning("CUDA graph capture failed for %s, which runs eager: %s", key, err)
    if report["comm_untimed"]:
        log.warning("all-reduces inside CUDA graphs are not timed (%s): verify_comm_s is reported as null",
                    report["comm_untimed"])


async def _serve(ns: argparse.Namespace, state: ServerState, engine: Engine, on_signal: Callable[[], None]) -> None:
    from aiohttp import web

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def signalled() -> None:
        on_signal()  # first: a SIGTERM to the whole group also ends the followers; that is not a failure
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled)
    runner = web.AppRunner(build_app(state), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, ns.host, ns.port)
    await site.start()
    log.info("HTTP server listening on http://%s:%s", ns.host, ns.port)
    if not ns.skip_server_warmup:
        await _warmup(state, engine)
    state.ready = True
    log.info(READY_LINE)
    watch = asyncio.create_task(_watch_engine(engine, stop))
    await stop.wait()
    watch.cancel()
    log.info("shutting down")
    await runner.cleanup()


async def _watch_engine(engine: Engine, stop: asyncio.Event) -> None:
    while engine.alive():
        await asyncio.sleep(0.5)
    stop.set()


async def _warmup(state: ServerState, engine: Engine) -> None:
    """One short generation through the real path, as SGLang does before declaring readiness."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()

    def sink(snap: dict[str, Any]) -> None:
        if snap["finished"]:
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(snap))

    engine.submit(Request(input_ids=state.tokenizer.encode("warmup"), max_new_tokens=8, ignore_eos=True, sink=sink))
    snap = await asyncio.wait_for(done, timeout=300)
    if snap["meta_info"]["finish_reason"]["type"] == "abort":
        raise RuntimeError(f"warmup request failed: {snap['meta_info']['finish_reason']}")


def _exit_on_signal(signum: int, frame: Any) -> None:
    log.info("signal %d during startup: stopping", signum)
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT; returns the process exit code."""
    ns = parse_args(argv)
    logging.basicConfig(level=getattr(logging, ns.log_level.upper()), stream=sys.stderr,
                        format="[%(asctime)s refengine] %(message)s")
    env = dict(os.environ)
    try:
        cfg = load_config(ns.model_path)
        draft_cfg = load_config(ns.speculative_draft_model_path) if ns.speculative_draft_model_path else None
        k = ns.speculative_num_steps if ns.speculative_algorithm != "NONE" else None
        simulate = parse_simulate_acc_len(env.get("SGLANG_SIMULATE_ACC_LEN"), k)
        step_delay = step_delay_s(env)
        slowdown = step_slowdown(env)
    except ValueError as exc:
        log.error("%s", exc)
        return 1
    if step_delay:
        log.warning("TEST-ONLY FAULT: %s adds %.4f s per step to this launch (%s=%s)", STEP_DELAY_ENV, step_delay,
                    LAUNCH_ENV, env.get(LAUNCH_ENV))
    if slowdown:
        log.warning("TEST-ONLY FAULT: %s adds %.1f %% of each step's own duration to every step of this launch "
                    "(%s=%s)", STEP_SLOWDOWN_ENV, 100 * slowdown, LAUNCH_ENV, env.get(LAUNCH_ENV))
    if ns.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            log.error("--device cuda requested but CUDA is not available")
            return 1
        problems = check_cuda_env(env)
        if problems:
            log.error("%s", "; ".join(problems))
            return 1
        for key, value in SAFE_CUDA_ENV.items():  # inherited by every rank, before any CUDA communicator exists
            os.environ.setdefault(key, value)
    world = ns.tp_size
    context = serving_context(ns.context_length, cfg)
    max_tokens = max(CHUNK_TOKENS, ns.max_running_requests * ((k or 0) + 1))
    elem = DTYPE_BYTES[ns.dtype]  # resolved: float32, bfloat16 or float16
    try:
        fault = parse_test_fault(env.get(TEST_FAULT_ENV))
        comm_spec = prepare_spec(ns.all_reduce_backend, world, ns.device, max_bytes=max_tokens * cfg.hidden_size * elem,
                                 fault=fault, host=comm_host(ns.host))
    except (CommError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    placement = plan_placement(ns.cpu_affinity, world, ns.device, available_cores(), _omp_threads(env))
    setup = rank_setup(ns, cfg, draft_cfg, comm_spec, k, context, _num_threads(env, world, placement), placement)
    # Until the event loop takes over SIGTERM/SIGINT, turn them into SystemExit so that the
    # ``finally`` below still reaps the ranks and removes the shm segment.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_on_signal)
    log.info("starting %d rank(s): model %s, speculative %s, simulate_acc_len=%s, %d thread(s) per rank",
             world, ns.model_path, ns.speculative_algorithm, simulate, setup.num_threads)
    log.info("CPU placement (--cpu-affinity %s): %s", ns.cpu_affinity, placement.describe())
    rank0_cores = pin_rank(placement, 0)  # before any thread of rank 0 starts: they inherit its cores
    ranks = RankSet(setup, world)
    try:
        try:
            model = build_rank(0, setup, timed=True)
            rank_infos = ranks.wait_ready(timeout_s=600)
            placement_info = {**placement.to_dict(), "rank_cores": [rank0_cores] + [r["cores"] for r in rank_infos]}
        except (CommError, RuntimeError, ValueError) as exc:
            log.error("startup failed: %s", exc)
            ranks.kill()
            return 1
        ranks.unlink_shm()
        backend_line = model.comm.describe()
        log.info("all-reduce backend: %s", backend_line)
        metrics = Metrics(ns.served_model_name, world, model.comm.name)
        driver = Driver(model, ranks.conns, build_graphs(model, setup))
        try:
            graph_report = driver.capture_graphs()  # every rank, in step, before HTTP and warmup (as SGLang)
        except RuntimeError as exc:
            log.error("startup failed: CUDA graph capture: %s (--disable-cuda-graph runs eager)", exc)
            ranks.kill()
            return 1
        if graph_report is not None:
            _log_graphs(graph_report)
        engine = Engine(driver, cfg.eos_token_id, k, simulate, ns.random_seed, ns.max_running_requests,
                        context, CHUNK_TOKENS, metrics, step_delay_s=step_delay, step_slowdown=slowdown)
        tokenizer = ByteTokenizer(cfg.vocab_size, cfg.eos_token_id)
        state = ServerState(
            engine=engine, tokenizer=tokenizer, metrics=metrics, model_name=ns.served_model_name,
            server_info=lambda: _server_info(ns, cfg, engine, model.comm.name, world, rank_infos, simulate,
                                             graph_report, placement_info))
        engine.start()
        try:
            asyncio.run(_serve(ns, state, engine, ranks.shutting_down.set))
        except OSError as exc:
            log.error("HTTP server failed: %s", exc)
            ranks.kill()
            return 1
        failed = engine.error is not None or not engine.alive()
        ranks.shutting_down.set()
        # A step in flight finishes first; if a follower is already gone (group SIGTERM) the
        # scheduler may be stuck in an all-reduce: it is a daemon thread, so we do not wait long.
        engine.stop(timeout_s=5.0)
        if not engine.alive():
            driver.shutdown()
            model.comm.close()
        ranks.stop()
        if failed:
            log.error("scheduler stopped: %s", engine.error)
            return 1
        log.info("server stopped")
        return 0
    finally:
        ranks.kill()


if __name__ == "__main__":
    sys.exit(main())
