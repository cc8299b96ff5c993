"""All-reduce micro-benchmark at the verify's message size, run where the server runs.

The companion of the in-server profile: before a configuration's
server starts, its all-reduce path is timed at the message size of one verify
all-reduce, on the same devices, in the same environment (the plan's
``NCCL_*`` and other variables) and, for the docker runtime, in the same
image. ``specsweep.serve.profile`` runs this file as a script: locally as a
subprocess with the server's environment, in a container as ``docker run
--rm`` of the configuration's image with this file mounted read-only. It
therefore imports only the standard library and torch at module level (the
SGLang images hold no specsweep package); ``--runner refengine`` imports the
reference engine's own communicators, which exist wherever that engine runs.

Runners:

* ``refengine``: the reference engine's backends (``gloo``, ``shm``, ``nccl``,
  ``symm_mem``) through ``specsweep.refengine.multirank.run_on_ranks``, one
  process per rank, the very ``Communicator`` code the server uses;
* ``torch``: ``torch.distributed.all_reduce`` over a process group of
  ``--backend`` (``nccl`` on GPUs, the path SGLang's all-reduce takes when no
  custom implementation is active; ``gloo`` lets a CPU test run the same code).

Message size: ``hidden_size x tokens`` elements of the served dtype, with
``hidden_size`` from ``<model-path>/config.json`` (or its ``text_config``, as
Kimi-K2.5's multimodal config has it) and ``tokens`` = draft tokens per
request (``speculative-num-draft-tokens``; 1 without speculation) x
concurrency, as the caller passes it. ``--dtype config`` takes the config's
``torch_dtype`` with SGLang's ``auto`` rule (float32 becomes float16:
``sglang/srt/configs/model_config.py`` ``_get_and_verify_dtype``).

Timing (``--timing``, the engine's ``comm_profile`` says which):

* ``back_to_back`` (``time_all_reduce``, shared with ``benchmarks/bench_refengine.py``):
  warm-up calls, then one clock reading per call, on rank 0's clock: CUDA
  events around each call on a GPU, ``perf_counter`` on the CPU. The loop of
  nccl-tests; the torch runner's only timing (SGLang's model cannot run
  outside its server).
* ``in_forward`` (refengine runner; ``time_in_forwards``): every rank builds
  the configuration's own model shard (``refengine.model.TPModel``, seeded
  weights, as ``--load-format dummy`` does) and runs target forwards of
  ``tokens`` tokens, each all-reduce between the layer compute that precedes
  it, rank 0 handing each forward to the others over a pipe and reading its
  logits as the engine does; one reading per forward:
  the communicator's own timing (the engine's instrumentation) / its calls.
  On a CPU host a collective between compute costs several times the
  back-to-back loop's figure (gloo ~1.2 ms vs ~0.4 ms, shm ~50 us vs ~9 us:
  docs/measurements/2026-12-06-cpu-forward-bench/), and the cost model
  prices the server's all-reduces, so this is the figure it uses. The
  back-to-back figure is measured too and kept beside it.

The result is rank 0's median (and each rank's), plus a correctness check
(every rank ends with ``world_size`` after summing ones). Prints one JSON
object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

# Format history of the JSON this script prints (results/<config>/launch-<launch>/allreduce_bench.json "result"):
#   1  runner, backend, world_size, device, dtype, model, sizes[], env, torch, seconds.
#   2  + timing; sizes[] + timing, and with in_forward: forwards, calls_per_forward, back_to_back{} (the
#      loop's median_us, p10_us, p90_us, iters); median_us etc. are then the in-forward figures.
FORMAT_VERSION = 2

DEFAULT_ITERS = 200
DEFAULT_WARMUP = 20
TIMINGS = ("back_to_back", "in_forward")
#: At least this many timed forwards (in_forward), however few calls ``--iters`` asks for.
MIN_FORWARDS = 64
#: Forwards per cached request in ``time_in_forwards``: positions restart after this many.
FORWARDS_PER_REQUEST = 16


def time_all_reduce(all_reduce: Callable[[torch.Tensor], Any], t: torch.Tensor, iters: int, warmup: int) -> list[float]:
    """Seconds per call of ``all_reduce(t)``, ``iters`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        all_reduce(t)
    if t.device.type == "cuda":
        torch.cuda.synchronize()
        events = []
        for _ in range(iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            all_reduce(t)
            e.record()
            events.append((s, e))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1000 for s, e in events]
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        all_reduce(t)
        times.append(time.perf_counter() - t0)
    return times


def time_in_forwards(model: Any, tokens: int, iters: int, warmup: int, logits: str,
                     dispatch: Callable[[list[int]], Any] | None = None) -> tuple[list[float], int]:
    """Seconds per all-reduce inside target forwards of ``tokens`` tokens (one request), one figure per
    forward: the communicator's timed seconds / its calls in that forward. Enough forwards for ``iters``
    calls (at least ``MIN_FORWARDS``) after enough for ``warmup``; returns (figures, calls per forward).

    ``model`` is a ``refengine.model.TPModel`` of this rank; ``logits``: "last" on rank 0 (which reads
    them, as the engine's rank 0 does), "none" on the others; ``dispatch(ids)`` runs before each
    forward (the engine's hand-over of the command, ``_dispatcher``). The request's cache holds
    ``FORWARDS_PER_REQUEST`` forwards (fewer where the model's positions end), then starts over."""
    from specsweep.refengine.model import Segment  # only where the engine exists (the refengine runner)

    comm, cfg = model.comm, model.cfg
    per_request = max(1, min(FORWARDS_PER_REQUEST, cfg.max_position_embeddings // tokens))

    def forward(i: int) -> tuple[int, float | None]:
        step = i % per_request
        if step == 0:
            model.free(0)
            model.alloc(0, per_request * tokens)
        ids = [(step * tokens + j) % cfg.vocab_size for j in range(tokens)]
        if dispatch is not None:
            dispatch(ids)
        comm.reset_stats()
        result = model.forward_target(ids, [Segment(0, step * tokens, tokens)], logits)
        if result is not None:
            result.argmax(-1).tolist()  # rank 0 reads its logits before the next forward, as the engine does
        return comm.stats()

    calls, seconds = forward(0)  # the first (untimed) forward tells how many calls one makes
    if calls == 0 or seconds is None:
        raise RuntimeError(f"a target forward made {calls} timed all-reduces; nothing to time in forwards")
    warm, timed = max(1, -(-warmup // calls)), max(MIN_FORWARDS, -(-iters // calls))
    out: list[float] = []
    for i in range(1, warm + timed):
        n, seconds = forward(i)
        if i >= warm:
            out.append(seconds / n)  # type: ignore[operator]
    model.free(0)
    return out, calls


def measure_sizes(timed: Callable[[torch.Tensor], Any], checked: Callable[[torch.Tensor], Any], world_size: int,
                  device: torch.device, numels: list[int], dtype: torch.dtype, iters: int,
                  warmup: int) -> dict[int, dict[str, Any]]:
    """``{numel: {"times": [s...], "correct": bool}}`` for one rank; ``checked`` runs the correctness sum."""
    out: dict[int, dict[str, Any]] = {}
    for numel in numels:
        # Zeros while timing: a sum of ones would double every call and reach inf within ~130 calls.
        t = torch.zeros(numel, dtype=dtype, device=device)
        times = time_all_reduce(timed, t, iters, warmup)
        t.fill_(1)
        checked(t)
        if device.type == "cuda":
            torch.cuda.synchronize()
        out[numel] = {"times": times, "correct": bool((t == world_size).all().item())}
    return out


def model_shape(model_path: str) -> dict[str, Any]:
    """``hidden_size``, ``num_hidden_layers`` and ``torch_dtype`` from ``config.json`` (or its ``text_config``)."""
    path = Path(model_path) / "config.json"
    raw = json.loads(path.read_text())
    out: dict[str, Any] = {"path": str(path)}
    for key in ("hidden_size", "num_hidden_layers", "torch_dtype"):
        value = raw.get(key)
        if value is None and isinstance(raw.get("text_config"), dict):
            value = raw["text_config"].get(key)
        out[key] = value
    if not isinstance(out["hidden_size"], int):
        raise ValueError(f"{path}: no integer hidden_size (top level or text_config)")
    return out


def served_dtype(dtype: str, shape: dict[str, Any]) -> str:
    """The dtype name to benchmark: explicit, or ``config`` = SGLang's ``auto`` on the config's torch_dtype."""
    if dtype != "config":
        return {"half": "float16", "float": "float32", "bf16": "bfloat16"}.get(dtype, dtype)
    name = str(shape.get("torch_dtype") or "float32").replace("torch.", "")
    return "float16" if name == "float32" else name


def _spread(times: list[float]) -> dict[str, Any]:
    q = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
    return {"median_us": statistics.median(times) * 1e6, "p10_us": q[0] * 1e6, "p90_us": q[-1] * 1e6,
            "iters": len(times)}


def _summary(per_rank: list[dict[int, dict[str, Any]]], numel: int, tokens: int, elem: int,
             timing: str) -> dict[str, Any]:
    """One size's figures: rank 0's spread of the chosen timing, each rank's median, the check."""
    key = "forward_times" if timing == "in_forward" else "times"
    out = {"tokens": tokens, "numel": numel, "bytes": numel * elem, "timing": timing,
           **_spread(per_rank[0][numel][key]),
           "per_rank_median_us": [statistics.median(r[numel][key]) * 1e6 for r in per_rank],
           "correct": all(r[numel]["correct"] for r in per_rank)}
    if timing == "in_forward":
        out.update(forwards=out.pop("iters"), calls_per_forward=per_rank[0][numel]["calls_per_forward"],
                   back_to_back=_spread(per_rank[0][numel]["times"]))
    return out


# --------------------------------------------------------------------- runners


def _dispatcher(rank: int, pipes: list[tuple[Any, Any]]) -> Callable[[list[int]], Any]:
    """Each forward handed over as the engine's ``refengine.worker.Driver`` does: rank 0 sends a small command
    over a pipe to every other rank, which sleeps on it in between (``follower_main``). So rank 0's figure
    includes waiting for a woken follower at the first all-reduce, as it does in the server (on a 2-vCPU
    host shm's in-forward median rose from 27-45 to 37-60 us with it, 4 alternating runs each; gloo's moved
    both ways: docs/measurements/2026-12-06-cpu-forward-bench/)."""
    if rank == 0:
        senders = [a for a, _ in pipes]
        return lambda ids: [c.send(("target", ids, "none")) for c in senders]
    receiver = pipes[rank - 1][1]
    return lambda ids: receiver.recv()


def _refengine_rank(rank: int, comm: Any, numels: list[int], dtype: str, iters: int, warmup: int,
                    model_path: str | None = None, pipes: list[tuple[Any, Any]] | None = None) -> dict:
    """Back to back at every size; with ``model_path`` (in_forward) also inside forwards of that model,
    each handed over through ``pipes`` (one per follower) as the engine does."""
    out = measure_sizes(comm._all_reduce, comm.all_reduce, comm.world_size, comm.device, numels,
                        getattr(torch, dtype), iters, warmup)
    if model_path is None:
        return out
    from specsweep.refengine.config import load_config
    from specsweep.refengine.model import TPModel

    cfg = load_config(model_path)
    model = TPModel(cfg, rank, comm.world_size, comm, comm.device, getattr(torch, dtype), 0, False)
    for numel in numels:
        times, calls = time_in_forwards(model, numel // cfg.hidden_size, iters, warmup,
                                        "last" if rank == 0 else "none",
                                        _dispatcher(rank, pipes) if pipes else None)
        out[numel].update(forward_times=times, calls_per_forward=calls)
    return out


def run_refengine(args: argparse.Namespace, numels: list[int], dtype: str) -> list[dict[int, dict[str, Any]]]:
    """The reference engine's own communicator, one spawned process per rank."""
    # Imported here, not at the top: this file must also run in images without specsweep (--runner torch).
    from specsweep.refengine.multirank import run_on_ranks

    elem = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    threads = int(os.environ.get("OMP_NUM_THREADS") or 1)
    model_path, pipes = None, None
    if args.timing == "in_forward":
        import multiprocessing as mp

        model_path = args.model_path
        pipes = [mp.get_context("spawn").Pipe() for _ in range(args.world_size - 1)]
    return run_on_ranks(_refengine_rank, args.backend, args.world_size,
                        args=(numels, dtype, args.iters, args.warmup, model_path, pipes), device=args.device,
                        max_bytes=max(numels) * elem + 4096, num_threads=threads, timeout_s=args.timeout)


def _torch_rank(rank: int, args: argparse.Namespace, numels: list[int], dtype: str, port: int, q: Any) -> None:
    import torch.distributed as dist

    try:
        if args.device == "cuda":
            torch.cuda.set_device(rank)
        device = torch.device(args.device, rank) if args.device == "cuda" else torch.device("cpu")
        dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=args.world_size)
        try:
            # One collective first: NCCL sets up its communicator lazily, inside the first call.
            warm = torch.ones(1, device=device)
            dist.all_reduce(warm)
            result = measure_sizes(dist.all_reduce, dist.all_reduce, args.world_size, device, numels,
                                   getattr(torch, dtype), args.iters, args.warmup)
        finally:
            dist.destroy_process_group()
        q.put((rank, True, result))
    except Exception as exc:  # handed to the parent, which reports it and exits non-zero
        import traceback

        q.put((rank, False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def run_torch(args: argparse.Namespace, numels: list[int], dtype: str) -> list[dict[int, dict[str, Any]]]:
    """``torch.distributed.all_reduce`` over a ``--backend`` process group, one spawned process per rank."""
    import multiprocessing as mp

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_torch_rank, args=(r, args, numels, dtype, port, q), daemon=True)
             for r in range(args.world_size)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    try:
        while len(results) < args.world_size:
            rank, ok, value = q.get(timeout=args.timeout)
            if not ok:
                raise RuntimeError(f"rank {rank}: {value}")
            results[rank] = value
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return [results[r] for r in range(args.world_size)]


RUNNERS = {"refengine": run_refengine, "torch": run_torch}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runner", required=True, choices=sorted(RUNNERS))
    p.add_argument("--backend", required=True, help="refengine: gloo|shm|nccl|symm_mem; torch: nccl|gloo")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model-path", required=True, help="directory holding the model's config.json")
    p.add_argument("--dtype", default="config", help="float32|bfloat16|float16, or config (SGLang's auto rule)")
    p.add_argument("--tokens", type=int, action="append", required=True,
                   help="tokens per all-reduce (draft tokens x concurrency); repeat for several sizes")
    p.add_argument("--timing", default="back_to_back", choices=TIMINGS,
                   help="back_to_back: the loop alone; in_forward (refengine runner): between the model's layers")
    p.add_argument("--iters", type=int, default=DEFAULT_ITERS)
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the ranks")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.world_size < 1 or args.iters < 1 or args.warmup < 0 or any(t < 1 for t in args.tokens):
        raise SystemExit("--world-size, --iters and --tokens must be >= 1, --warmup >= 0")
    if args.timing == "in_forward" and args.runner != "refengine":
        raise SystemExit(f"--timing in_forward needs --runner refengine (the model runs in its ranks), "
                         f"not {args.runner!r}; allowed for {args.runner!r}: back_to_back")
    t0 = time.monotonic()
    shape = model_shape(args.model_path)
    dtype = served_dtype(args.dtype, shape)
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise SystemExit(f"--dtype {args.dtype!r} resolves to {dtype!r}, which is no torch dtype")
    elem = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    tokens = sorted(set(args.tokens))
    numels = [shape["hidden_size"] * t for t in tokens]
    per_rank = RUNNERS[args.runner](args, numels, dtype)
    out = {
        "format_version": FORMAT_VERSION,
        "runner": args.runner,
        "backend": args.backend,
        "world_size": args.world_size,
        "timing": args.timing,
        "device": args.device,
        "dtype": dtype,
        "model": shape,
        "sizes": [_summary(per_rank, n, t, elem, args.timing) for n, t in zip(numels, tokens)],
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_", "OMP_NUM_THREADS"))},
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if args.device == "cuda" else None,
        "seconds": time.monotonic() - t0,
    }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    if os.getcwd() not in sys.path:
        # In the reference image the engine lives under the working directory (/app), not beside this file.
        sys.path.insert(1, os.getcwd())
    sys.exit(main())
