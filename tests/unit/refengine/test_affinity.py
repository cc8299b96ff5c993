"""Rank placement on CPU cores (refengine.affinity) and the server's --cpu-affinity flag."""

import os

import pytest

from specsweep.refengine.affinity import Placement, pin_rank, plan_placement
from specsweep.refengine.cli import check_args, parse_args
from specsweep.refengine.server import _num_threads


def test_auto_pins_each_rank_to_its_own_cores_and_leaves_the_rest_to_the_client():
    p = plan_placement("auto", 2, "cpu", range(16), threads_per_rank=1)
    assert p.ranks == ((0,), (1,)) and p.client == tuple(range(2, 16))
    assert p.describe() == ("rank 0 on cores 0, rank 1 on cores 1; cores 2-15 left to the client and the rest of "
                            "the host")
    even = plan_placement("auto", 2, "cpu", [3, 1, 2, 0, 7, 6, 5, 4], threads_per_rank=None)  # an even share
    assert even.ranks == ((0, 1, 2), (3, 4, 5)) and even.client == (6, 7) and even.cores_per_rank() == 3
    assert plan_placement("auto", 1, "cpu", [0, 1], None).ranks == ((0,),)  # TP=1 on 2 cores: 1 + the client's


def test_auto_does_not_pin_without_a_core_for_the_client():
    p = plan_placement("auto", 2, "cpu", [0, 1], threads_per_rank=1)
    assert not p.pinned and p.client == (0, 1)
    assert p.reason == "2 core(s) available, 2 rank(s) x 1 core(s) + 1 for the client need 3"
    assert p.describe().startswith("not pinned (2 core(s)")
    assert not plan_placement("auto", 2, "cpu", range(8), threads_per_rank=4).pinned  # 2 x 4 + 1 > 8


def test_none_and_cuda_never_pin():
    assert plan_placement("none", 1, "cpu", range(64), None).to_dict() == {
        "mode": "none", "pinned": False, "ranks": [], "client": list(range(64)), "reason": "--cpu-affinity none"}
    assert not plan_placement("auto", 1, "cuda", range(64), None).pinned
    with pytest.raises(ValueError, match="allowed values are auto, none"):
        plan_placement("all", 1, "cpu", range(4), None)


def test_threads_follow_the_pinned_cores_unless_omp_says():
    pinned = plan_placement("auto", 2, "cpu", range(9), None)
    assert _num_threads({}, 2, pinned) == 4
    assert _num_threads({"OMP_NUM_THREADS": "1"}, 2, pinned) == 1
    assert _num_threads({}, 2, Placement("none", None, (0, 1), "x")) == max(1, (os.cpu_count() or 1) // 2)


def test_the_flag():
    assert parse_args([]).cpu_affinity == "auto"
    assert parse_args(["--cpu-affinity", "none"]).cpu_affinity == "none"
    assert any("--cpu-affinity" in e for e in check_args(["--cpu-affinity", "always"]))


def test_pinning_applies_to_every_thread_of_the_process():
    """In a child process (this one's affinity stays): pin, then a thread started before and one after."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_pin_and_report, args=(q,))
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=30)
    core = min(os.sched_getaffinity(0))
    assert got == {"main": [core], "before": [core], "after": [core]}, got


def _pin_and_report(q) -> None:
    import threading

    core = min(os.sched_getaffinity(0))
    seen: dict = {}
    started = threading.Event()
    release = threading.Event()

    def early() -> None:
        started.set()
        release.wait()
        seen["before"] = sorted(os.sched_getaffinity(0))

    t = threading.Thread(target=early)
    t.start()
    started.wait()
    seen["main"] = pin_rank(Placement("auto", ((core,),), (), "test"), 0)
    release.set()
    t.join()
    late = threading.Thread(target=lambda: seen.__setitem__("after", sorted(os.sched_getaffinity(0))))
    late.start()
    late.join()
    q.put(seen)
