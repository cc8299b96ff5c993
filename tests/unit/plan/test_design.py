"""The plan-time design of a round (``plan.design.choose_design``): side by side only where every server fits."""

from __future__ import annotations

import pytest

from specsweep.contracts.rounds import Design
from specsweep.plan.design import DesignError, choose_design
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO


def plan(name: str, **keys) -> dict:
    return plan_dict(**{"name": name, "engine": "reference", "runtime": "local", "gpus": 0, **keys})


CPU = [plan("nospec"), plan("eagle3-shm"), plan("eagle3-shm-slow10")]


def test_reference_servers_on_the_cpu_run_side_by_side_and_say_why():
    design, why = choose_design(CPU, "auto")
    assert design == Design.SIDE_BY_SIDE
    assert why.startswith("every server fits on the CPU at once (3 reference-engine configurations)")


H100 = 81559 * 2**20  # nvidia-smi's memory.total of an H100 80GB HBM3, in MiB


def gpu_plan(name: str, **args) -> dict:
    server_args = {"model-path": "config/models/refengine-kimi-gpu", "dtype": "bfloat16", **args}
    return plan(name, gpus=1, env={"CUDA_VISIBLE_DEVICES": "2"}, server_args=server_args)


def test_reference_servers_on_one_gpu_run_side_by_side_where_their_footprints_fit():
    plans = [gpu_plan("a", **{"context-length": 512}), gpu_plan("b", **{"context-length": 512})]
    why = ("every server fits on GPU 2 at once (2 reference-engine configurations): up together, measured in turn, "
           "sharing the machine's drift")
    assert choose_design(plans, "auto", gpu_memory={"2": H100}.get, base=REPO) == (Design.SIDE_BY_SIDE, why)


def test_six_servers_of_the_gpu_model_at_full_context_do_not_fit_an_h100():
    """As an H100 showed: six servers of 18-19 GiB each ran out of memory in CUDA graph capture."""
    plans = [gpu_plan(f"c{i}", **({"speculative-algorithm": "EAGLE3"} if i else {})) for i in range(6)]
    design, why = choose_design(plans, "auto", gpu_memory={"2": H100}.get, base=REPO)
    assert design == Design.SEQUENTIAL
    assert why.startswith("the 6 servers need about 11")
    assert "more than 90% of GPU 2's 79.6 GiB: one at a time (a smaller context-length" in why


def test_a_gpu_whose_memory_cannot_be_read_runs_one_server_at_a_time():
    plans = [gpu_plan("a", **{"context-length": 512}), gpu_plan("b", **{"context-length": 512})]
    assert choose_design(plans, "auto", gpu_memory=lambda device: None, base=REPO) == (
        Design.SEQUENTIAL, "GPU 2's memory cannot be read here (nvidia-smi), so whether 2 servers fit at once is "
                           "not known: one at a time")
    with pytest.raises(DesignError, match="memory cannot be read here"):
        choose_design(plans, "side-by-side", gpu_memory=lambda device: None, base=REPO)


@pytest.mark.parametrize("plans, why", [
    ([plan("kimi", engine="sglang", gpus=8), plan("base", engine="sglang", gpus=8)],
     "8-GPU servers (base, kimi): one at a time"),
    ([plan("tp2", gpus=2), plan("nospec")], "2-GPU servers (tp2): one at a time"),
    ([plan("llama", engine="sglang", gpus=1), plan("llama-eagle", engine="sglang", gpus=1)],
     ("['sglang'] servers (llama, llama-eagle) on one GPU: whether several fit needs the model's size, which the "
      "plan does not carry (SGLang sizes its KV pool from the memory free at its start); one at a time")),
    ([plan("gpu", gpus=1), plan("cpu")],
     "servers on different devices (0, cpu): side-by-side needs one device for all"),
    ([plan("a", gpus=1, env={"CUDA_VISIBLE_DEVICES": "0"}), plan("b", gpus=1, env={"CUDA_VISIBLE_DEVICES": "1"})],
     "servers on different devices (0, 1): side-by-side needs one device for all"),
    ([plan("img", runtime="docker"), plan("nospec")],
     "['docker'] runtime (img): one at a time; side-by-side measurement starts only local processes"),
    ([plan("p", profile={"enabled": True}), plan("nospec")],
     "profiling on (p): the micro-benchmark and the profiler trace need the host to themselves; one at a time"),
])
def test_what_does_not_fit_falls_back_to_sequential_with_the_reason(plans, why):
    assert choose_design(plans, "auto") == (Design.SEQUENTIAL, why)


def test_asked_for_sequential_is_sequential_and_side_by_side_where_it_cannot_be_is_an_error():
    assert choose_design(CPU, "sequential") == (Design.SEQUENTIAL,
                                                "rounds.design is sequential in the config: one server at a time")
    assert choose_design(CPU, "side-by-side")[0] == Design.SIDE_BY_SIDE
    with pytest.raises(DesignError, match=r"^rounds.design: side-by-side, but 8-GPU servers \(k\): one at a time; "
                                          r"allowed here: \['auto', 'sequential'\]$"):
        choose_design([plan("k", engine="sglang", gpus=8)], "side-by-side")
    with pytest.raises(DesignError, match=r"^rounds.design: 'parallel' is not a design; allowed: "
                                          r"\['auto', 'side-by-side', 'sequential'\]$"):
        choose_design(CPU, "parallel")


def test_the_shipped_default_config_runs_side_by_side():
    """The CPU default's configurations, as resolved, fit side by side (what the CPU record measures)."""
    from specsweep.plan.config import load_config
    from specsweep.plan.resolve import resolve_plans
    from specsweep.testing.workflow import REPO

    config = load_config(REPO / "config.yaml")
    plans = resolve_plans(config)
    assert len(plans) >= 4  # nospec, eagle3-gloo, eagle3-shm and the positive control
    assert choose_design(plans.values(), "auto")[0] == Design.SIDE_BY_SIDE


def test_a_round_side_by_side_needs_as_many_of_snakemakes_job_slots_as_it_has_launches():
    """Snakemake's local executor runs --cores + 5 jobs at once (executors/local.py:62-66); on an H100 the 7th
    launch of a round waited for a worker and started its server while two partners measured."""
    from specsweep.plan.design import local_job_slots

    assert local_job_slots(1) == 6 and local_job_slots(None) == 5
    design, why = choose_design(CPU, "auto", round_size=7, job_slots=local_job_slots(1))
    assert (design, why) == (Design.SEQUENTIAL, "a round's 7 launches side by side must run at once, and Snakemake "
                             "runs 6 jobs at once here (--cores + 5): one at a time; --cores 2 or more measures "
                             "them side by side")
    assert choose_design(CPU, "auto", round_size=7, job_slots=local_job_slots(2))[0] == Design.SIDE_BY_SIDE
    with pytest.raises(DesignError, match="--cores 2 or more"):
        choose_design(CPU, "side-by-side", round_size=7, job_slots=6)


def test_under_a_cluster_executor_a_round_is_never_side_by_side():
    design, why = choose_design(CPU, "auto", round_size=3, job_slots=0)
    assert design == Design.SEQUENTIAL and why.startswith("a cluster executor places every launch")
