"""The in-forward all-reduce timing with and without the per-forward pipe hand-over (README of this folder).

exp_pipe.py runs it; fwd() is the forward loop the micro-benchmark's in_forward timing grew from."""
import sys, time, statistics, torch
sys.path.insert(0, ".")  # run from a checkout's root
from specsweep.refengine.multirank import run_on_ranks
from specsweep.refengine.config import load_config
from specsweep.refengine.model import TPModel, Segment
from specsweep.serve.allreduce_bench import time_all_reduce

def b2b(rank, comm, numel, iters):
    t = torch.zeros(numel)
    return statistics.median(time_all_reduce(comm._all_reduce, t, iters, 20)) * 1e6

def fwd(rank, comm, steps, conns):
    torch.set_num_threads(1)
    cfg = load_config("specsweep/refengine/configs/tiny")
    m = TPModel(cfg, rank, comm.world_size, comm, torch.device("cpu"), torch.float32, 0, False)
    per_call, fw = [], []
    conn = conns[rank] if conns else None
    for rep in range(4):
        m.alloc(0, 256)
        m.forward_target(list(range(32)), [Segment(0, 0, 32)], "last" if rank == 0 else "none")
        for i in range(steps):
            if conn is not None:
                if rank == 0: conn.send(("target", [i], i))
                else: conn.recv()
            comm.reset_stats()
            t0 = time.perf_counter()
            out = m.forward_target([i % 200], [Segment(0, 32 + i, 1)], "last" if rank == 0 else "none")
            if rank == 0: out.argmax(-1).item()
            fw.append(time.perf_counter() - t0)
            ct, s = comm.stats()
            per_call.append(s / ct)
        m.free(0)
    return round(statistics.median(per_call) * 1e6, 1), round(statistics.median(fw) * 1e3, 2)

if __name__ == "__main__":
    import multiprocessing as mp
    for backend in sys.argv[1:] or ("gloo", "shm"):
        r = run_on_ranks(b2b, backend, 2, args=(256, 300), max_bytes=1 << 16)
        print(backend, "back-to-back us", [round(x, 1) for x in r], flush=True)
        r = run_on_ranks(fwd, backend, 2, args=(64, None), max_bytes=1 << 16)
        print(backend, "forward loop (per-call us, forward ms)", r, flush=True)
        a, b = mp.get_context("spawn").Pipe()
        r = run_on_ranks(fwd, backend, 2, args=(64, [a, b]), max_bytes=1 << 16)
        print(backend, "forward loop + pipe dispatch", r, flush=True)
