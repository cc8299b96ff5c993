"""How an SGLang 0.5.23 plan communicates, for the profiling stages.

The micro-benchmark times ``torch.distributed.all_reduce`` over NCCL in the
configuration's image (the path every SGLang all-reduce takes when no custom
implementation is active; the custom ones cannot be driven outside the
server without SGLang's own process groups). The message is one verify
all-reduce: ``hidden_size x draft tokens`` of the served dtype, ``hidden_size``
read from the model's ``config.json`` inside the container.

Expected all-reduces per target forward (``DeepseekV2ForCausalLM``, which
serves DeepSeek-V3 and Kimi-K2.5): one after attention and one after the MLP
or MoE of every layer, plus one for the vocab-parallel input embedding
(``sglang/srt/layers/vocab_parallel_embedding.py:533``
``tensor_model_parallel_all_reduce`` when tp > 1; the embedding is
vocab-parallel unless ``SGLANG_ENABLE_EMBED_REPLICATION`` is set,
``get_embedding_tp_kwargs`` at line 178). With DeepEP the MoE output goes
through dispatch/combine instead, so the count is not stated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.engines.sglang.environ import env_bool


def _first(args: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = args.get(key)
        if value is not None and value is not False:
            return value
    return None


def comm_profile(plan: Plan) -> dict[str, Any]:
    """``Engine.comm_profile`` for SGLang (see ``specsweep.engines.registry``)."""
    args, env = plan.server_args, plan.env
    tp = int(_first(args, "tp-size", "tp", "tensor-parallel-size") or 1)
    algo = str(_first(args, "speculative-algorithm") or "NONE").upper()
    spec = algo not in ("NONE", "")
    draft = _first(args, "speculative-num-draft-tokens")
    if draft is None and spec and _first(args, "speculative-num-steps") is not None:
        draft = int(_first(args, "speculative-num-steps")) + 1  # topk 1: draft tokens = steps + 1 (docs/sglang.md)
    dtype = str(_first(args, "dtype") or "auto")
    deepep = str(_first(args, "moe-a2a-backend") or "none") == "deepep"
    # An EnvBool (sglang/srt/environ.py:799): read as environ.env_bool reads it.
    replicated = env_bool(env.get("SGLANG_ENABLE_EMBED_REPLICATION", "")) is True
    out: dict[str, Any] = {
        "runner": "torch",
        "backend": "nccl",
        "timing": "back_to_back",  # the model runs only inside SGLang's server: the loop alone
        "world_size": tp,
        "device": "cuda",
        "model_path": _first(args, "model-path", "model"),
        "dtype": "config" if dtype == "auto" else dtype,
        "draft_tokens": int(draft) if spec and draft is not None else (1 if not spec else None),
        "allreduces_per_layer": None if deepep else 2,
        "allreduces_outside_layers": None if deepep else (0 if replicated or tp < 2 else 1),
        "note": ("DeepEP: the MoE output goes through dispatch/combine, not an all-reduce" if deepep else
                 "2 per layer (attention, MLP/MoE) + 1 for the vocab-parallel embedding "
                 "(vocab_parallel_embedding.py:533; 0 with SGLANG_ENABLE_EMBED_REPLICATION=1)"),
    }
    if tp < 2:
        out["skip"] = "tp-size 1: no all-reduce runs"
    elif out["model_path"] is None:
        out["skip"] = "no model-path in server_args"
    elif out["draft_tokens"] is None:
        out["skip"] = ("speculative-num-draft-tokens is not in server_args (SGLang picks it at launch), so the "
                       "verify's message size is unknown")
    return out
