"""The reference engine in tests: a small model with every feature, a plan of it on CPU, and the
micro-benchmark script run as the profiling stage runs it. Shared by the unit, end-to-end and GPU tiers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from specsweep.engines.registry import get_engine
from specsweep.refengine.config import ModelConfig
from specsweep.serve.profile import BENCH_SCRIPT
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO

#: Small but with every feature: dense first layer, MoE with shared expert, several heads.
SMALL = ModelConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                    vocab_size=300, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                    moe_intermediate_size=32, first_k_dense_replace=1, max_position_embeddings=256)
#: A prompt of SMALL's vocabulary.
PROMPT = [5, 17, 99, 3, 250, 42, 7, 8, 9]
#: The tiny model configuration the reference engine ships (its random weights load in a second).
TINY = str(REPO / "specsweep/refengine/configs/tiny")

#: Profiling settings of ``ref_plan``: both stages on, two profiled requests.
PROFILE_SETTINGS = {"enabled": True, "requests": 2, "num_steps": None, "activities": ["CPU", "GPU"],
                    "trace_timeout_s": 120, "allreduce_bench": True, "allreduce_iters": 20,
                    "allreduce_timeout_s": 300}


def ref_plan(tp: int = 2, backend: str = "shm", **extra: Any) -> dict:
    """A resolved plan of the reference engine on CPU (TP ``tp``, EAGLE-3 chain of 3, accept length
    simulated at 2.5, all-reduce over ``backend``), a small workload and profiling on; ``extra`` overrides."""
    server_args = {"model-path": "specsweep/refengine/configs/tiny", "load-format": "dummy", "tp-size": tp,
                   "device": "cpu", "random-seed": 0, "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3,
                   "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4, "all-reduce-backend": backend}
    engine = get_engine("reference")
    plan = {"name": "p", "engine": "reference", "runtime": "local", "image": None, "server_args": server_args,
            "argv": engine.launch_argv("python3", server_args), "env": {"OMP_NUM_THREADS": "1",
                                                                        "SGLANG_SIMULATE_ACC_LEN": "2.5"},
            "host": "127.0.0.1", "port": None, "volumes": [], "gpus": 0,
            "workload": {"endpoint": "generate", "num_prompts": 2, "input_len": 16, "output_len": 16, "concurrency": 1,
                         "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 120,
                         "warmup": {"window": 1, "tolerance": 0.5, "min_windows": 1, "max_requests": 0}},
            "profile": dict(PROFILE_SETTINGS)}
    return plan_dict(**{**plan, **extra})


def run_allreduce_bench(*args: str) -> dict:
    """The micro-benchmark script as the profiling stage runs it: by path, with -P, its JSON on stdout."""
    proc = subprocess.run([sys.executable, "-P", str(BENCH_SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                                      "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)
