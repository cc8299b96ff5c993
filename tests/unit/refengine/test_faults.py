"""The reference engine's test-only faults: a fixed delay per step, and a slowdown by a fraction of the step's
own duration, each optionally per launch."""

import statistics
import time
from pathlib import Path

import pytest
import torch

from specsweep.refengine import faults
from specsweep.refengine.comm import make_communicator
from specsweep.refengine.config import load_config
from specsweep.refengine.engine import Engine, Request
from specsweep.refengine.faults import LAUNCH_ENV, STEP_DELAY_ENV, STEP_SLOWDOWN_ENV, step_delay_s, step_slowdown
from specsweep.refengine.model import TPModel
from specsweep.refengine.rendezvous import prepare_spec
from specsweep.refengine.worker import Driver
from specsweep.serve.launch import LAUNCH_ENV as JOB_LAUNCH_ENV
from specsweep.serve.provenance import _filter_env

TINY = Path(__file__).parents[3] / "specsweep" / "refengine" / "configs" / "tiny"


def test_the_job_and_the_engine_name_the_launch_variable_alike():
    assert LAUNCH_ENV == JOB_LAUNCH_ENV


def test_the_plans_positive_control_sets_the_variable_the_engine_reads():
    from specsweep.plan.controls import STEP_SLOWDOWN_ENV as PLAN_ENV

    assert PLAN_ENV == STEP_SLOWDOWN_ENV


def test_provenance_records_the_faults():
    env = {STEP_DELAY_ENV: "aa=0.004", STEP_SLOWDOWN_ENV: "0.05", LAUNCH_ENV: "1", "HOME": "/root"}
    assert _filter_env(env) == {LAUNCH_ENV: "1", STEP_DELAY_ENV: "aa=0.004", STEP_SLOWDOWN_ENV: "0.05"}


@pytest.mark.parametrize("value, launch, delay", [
    (None, "1", 0.0), ("", "1", 0.0), ("0.004", "1", 0.004), ("0.004", "aa", 0.004),
    ("aa=0.05", "aa", 0.05), ("aa=0.05", "1", 0.0), ("1=0.01, aa=0.05", "1", 0.01),
])
def test_delay_per_launch(value, launch, delay):
    env = {LAUNCH_ENV: launch} | ({STEP_DELAY_ENV: value} if value is not None else {})
    assert step_delay_s(env) == pytest.approx(delay)


@pytest.mark.parametrize("value", ["fast", "aa", "aa=x", "=0.1", "-1", "11", "10"])
def test_malformed_delay_is_an_error(value):
    with pytest.raises(ValueError, match=STEP_DELAY_ENV):
        step_delay_s({STEP_DELAY_ENV: value, LAUNCH_ENV: "1"})


@pytest.mark.parametrize("value, launch, fraction", [
    (None, "1", 0.0), ("", "1", 0.0), ("0.05", "1", 0.05), ("0", "1", 0.0), ("1", "aa", 1.0),
    ("1=0.05", "1", 0.05), ("1=0.05", "2", 0.0), ("1=0.05, 2=0.1", "2", 0.1),
])
def test_slowdown_per_launch(value, launch, fraction):
    env = {LAUNCH_ENV: launch} | ({STEP_SLOWDOWN_ENV: value} if value is not None else {})
    assert step_slowdown(env) == pytest.approx(fraction)


@pytest.mark.parametrize("value, message", [
    ("5%", r"'5%' is not a fraction of the step time \(allowed: \[0, 1\]\)"),
    ("1.5", r"1\.5 is outside \[0, 1\]"), ("-0.05", r"-0\.05 is outside \[0, 1\]"), ("nan", "outside"),
    ("1=", "is not a fraction"), ("=0.05", "expected '<value>' or '<launch>=<value>,...'"),
])
def test_malformed_slowdown_is_an_error(value, message):
    with pytest.raises(ValueError, match=STEP_SLOWDOWN_ENV + ".*" + message):
        step_slowdown({STEP_SLOWDOWN_ENV: value, LAUNCH_ENV: "1"})


# ------------------------------------------------------------ the slowdown in the engine
def _engine(k: int | None) -> Engine:
    cfg = load_config(str(TINY))
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu"))
    model = TPModel(cfg, 0, 1, comm, torch.device("cpu"), torch.float32, 0, with_draft=k is not None)
    return Engine(Driver(model, []), eos_token_id=cfg.eos_token_id, spec_steps=k, simulate_acc_len=None, seed=0,
                  max_running=1, context_length=1024, chunk_tokens=64)


def _compute_s(engine: Engine) -> float:
    t = engine.running[0].timing
    return t["draft_s"] + t["verify_s"]  # the engine's own timers: the step's compute, without the pause


def _step_times(engine: Engine, fraction: float, blocks: int, block: int = 6
                ) -> tuple[list[float], list[float], list[float]]:
    """Wall times of engine steps in alternating blocks without and with the slowdown (the drift of a busy host
    cancels; within a block every slowed step follows a slowed one, as in a slowed launch), and for the slowed
    steps their wall time over their compute."""
    engine.submit(Request(input_ids=list(range(1, 33)), max_new_tokens=900, ignore_eos=True, sink=lambda s: None))
    engine._drain(block=False)
    engine._admit()
    plain, slowed, per_step = [], [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no intra-op pool that the pauses put to sleep
    try:
        for i in range(2 * blocks):
            engine.step_slowdown = fraction if i % 2 else 0.0
            for j in range(block + 1):
                c0, t0 = _compute_s(engine), time.perf_counter()
                engine._step()
                wall = time.perf_counter() - t0
                if j:  # the first step of a block follows the other block's last
                    (slowed if i % 2 else plain).append(wall)
                if i % 2:
                    per_step.append(wall / (_compute_s(engine) - c0))
    finally:
        torch.set_num_threads(threads)
    assert engine.running, "the request finished before the measurement did"
    return plain, slowed, per_step


@pytest.mark.parametrize("k", [3, None])
def test_slowdown_grows_the_step_time_by_its_fraction(k):
    """A step (a speculation cycle, or a plain decode step) takes 1 + fraction times its compute with the slowdown:
    the median step time with it over the median without it is about 2 for a fraction of 1 (1 if the fault did
    nothing), and each slowed step lasts at least 1 + fraction times its own compute, not much more."""
    fraction = 1.0
    plain, slowed, per_step = _step_times(_engine(k), fraction, blocks=6)
    ratio = statistics.median(slowed) / statistics.median(plain)
    assert 1 + 0.5 * fraction < ratio < 1 + 2 * fraction, (ratio, statistics.median(plain))
    # a sleep never ends early; it may end late on a busy host (and the step's emit costs a little)
    assert 1 + fraction <= statistics.median(per_step) < 1 + fraction + 0.5, sorted(per_step)


def test_the_pause_lies_inside_the_step_before_its_tokens():
    """A step's tokens go out after its pause, so the client's decode time (first to last token) holds every
    slowed step's pause, the last one's included."""
    engine = _engine(None)
    engine.step_slowdown = 1.0
    stamps: list[float] = []
    engine.submit(Request(input_ids=list(range(1, 17)), max_new_tokens=6, ignore_eos=True,
                          sink=lambda s: stamps.append(time.perf_counter())))
    engine._drain(block=False)
    engine._admit()
    request = engine.running[0]
    starts, computes = [], []
    while engine.running:
        before = request.timing["verify_s"]
        starts.append(time.perf_counter())
        engine._step()
        computes.append(request.timing["verify_s"] - before)
    assert len(stamps) == 1 + len(starts) == 6  # the prefill's token, then one per step
    # a token leaves its step at least twice the step's compute after the step began (fraction 1)
    assert all(t - s >= 2 * c for t, s, c in zip(stamps[1:], starts, computes)), (stamps, starts, computes)


def test_a_pause_lasts_what_was_asked_not_a_sleeps_overshoot():
    # A slowdown of 2 % of a 4 ms step is an 80 us pause; time.sleep alone overshoots it by about
    # its own length, which doubled the race's smallest slowdown. The median of many pauses must
    # stay within 20 us of the asked length (a preempted pause or two do not move the median).
    for asked in (80e-6, 2.5e-3):
        took = []
        for _ in range(40):
            t = time.perf_counter()
            faults.pause(asked)
            took.append(time.perf_counter() - t)
        assert asked <= min(took)
        assert statistics.median(took) - asked < 20e-6, (asked, statistics.median(took))
