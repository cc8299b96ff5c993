"""4 alternating runs of the forward loop (exp_ar.fwd), shm and gloo, without and with the pipe hand-over."""
import sys, multiprocessing as mp
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ".")  # run from a checkout's root
from exp_ar import fwd
from specsweep.refengine.multirank import run_on_ranks
if __name__ == "__main__":
    for rep in range(4):
        for backend in ("shm", "gloo"):
            r0 = run_on_ranks(fwd, backend, 2, args=(64, None), max_bytes=1 << 16)
            a, b = mp.get_context("spawn").Pipe()
            r1 = run_on_ranks(fwd, backend, 2, args=(64, [a, b]), max_bytes=1 << 16)
            print(rep, backend, "no pipe", r0[0], "pipe", r1[0], flush=True)
