"""All-reduce latency on this CPU with and without compute between calls (the record's README, section 3).

The reference engine's communicators (gloo, shm), 2 ranks, 4 KiB (4 tokens x hidden 256, fp32), 300 calls after
20 untimed; between calls a busy loop of small matrix products for 0, 100 or 350 us. Prints the median per rank.
Run from a checkout's root: python3 docs/measurements/2026-12-06-cpu-quiet/allreduce_interleaved.py
"""
import sys, time, statistics, torch
sys.path.insert(0, ".")
from specsweep.refengine.multirank import run_on_ranks
def rank_fn(rank, comm, numel, iters, work_us):
    torch.set_num_threads(1)
    t = torch.zeros(numel); w = torch.randn(256, 1024); x = torch.randn(4, 256)
    def compute():
        if work_us <= 0: return
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e6 < work_us:
            y = x @ w
    for _ in range(20): comm._all_reduce(t)
    times = []
    for _ in range(iters):
        compute()
        t0 = time.perf_counter(); comm._all_reduce(t); times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6
if __name__ == "__main__":
  for backend in ("gloo", "shm"):
    for work in (0, 100, 350):
        r = run_on_ranks(rank_fn, backend, 2, args=(1024, 300, work), device="cpu", max_bytes=1 << 16, num_threads=1)
        print(backend, "compute between calls", work, "us -> all-reduce median us per rank", [round(x, 1) for x in r], flush=True)
