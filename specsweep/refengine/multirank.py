"""Run a function on N freshly spawned ranks that share one communicator.

Used by the tests and the benchmark to exercise the same ``comm`` code the
server uses, with one process per rank, without the HTTP server around it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback
from typing import Any, Callable

from .comm import make_communicator
from .rendezvous import CommSpec, prepare_spec


def _entry(rank: int, spec: CommSpec, fn: Callable[..., Any], args: tuple, num_threads: int, q: Any) -> None:
    import torch

    torch.set_num_threads(num_threads)
    try:
        comm = make_communicator(rank, spec, timed=True)
        try:
            q.put((rank, True, fn(rank, comm, *args)))
        finally:
            comm.close()
    except Exception:
        q.put((rank, False, traceback.format_exc()))


def run_on_ranks(fn: Callable[..., Any], backend: str, world_size: int, args: tuple = (), device: str = "cpu",
                 max_bytes: int = 4 << 20, num_threads: int = 1, timeout_s: float = 300.0,
                 force_collectives: bool = False) -> list[Any]:
    """Call ``fn(rank, comm, *args)`` on every rank; return the results in rank order.

    ``fn`` must be importable (spawn pickles it by name). Any rank's exception is
    re-raised here with that rank's traceback.
    """
    spec = prepare_spec(backend, world_size, device, max_bytes=max_bytes, force_collectives=force_collectives)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_entry, args=(r, spec, fn, args, num_threads, q), daemon=True)
             for r in range(world_size)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    try:
        while len(results) + len(errors) < world_size:
            try:
                rank, ok, value = q.get(timeout=timeout_s)
            except queue.Empty:
                raise TimeoutError(f"ranks did not finish within {timeout_s}s") from None
            if ok:
                results[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
                break
    finally:
        for p in procs:
            p.join(timeout=5 if not errors else 0.5)
            if p.is_alive():
                p.kill()
                p.join()
        if spec.shm_path and os.path.exists(spec.shm_path):
            os.unlink(spec.shm_path)
    if errors:
        raise RuntimeError("\n".join(errors))
    return [results[r] for r in range(world_size)]
