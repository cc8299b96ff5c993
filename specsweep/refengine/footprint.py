"""How much GPU memory one reference-engine server holds: its weights, its static KV pool and an allowance.

Side by side (``plan.design``) every server of a round is up at once on one GPU,
so the design must know whether they fit before it picks that design: a round
of six servers of ``config/models/refengine-kimi-gpu`` at its 4096 positions
held about 18 GiB each and ran out of memory on an 80 GB H100 in CUDA graph
capture. What a server holds, read from ``refengine.model.TPModel``:

* its weights (``TPModel._build``): embedding and LM head, per layer the fused
  QKV and output projections and either a dense MLP or the routed experts, their
  router and the shared experts; the draft layer (fc, attention over 2 x hidden,
  MLP) when it speculates; the rotary tables;
* with CUDA graphs, the static pool (``TPModel.enable_pool``): ``max_running + 1``
  slots of ``context + 2`` positions (``cudagraph.pool_capacity``), K and V for
  every layer, and for a draft its K/V, aux features and hidden state;
* ``ALLOWANCE_BYTES`` for what no tensor of the model shows: the CUDA context,
  cuBLAS workspaces, graph pools and activations.

``tests/unit/refengine/test_footprint.py`` checks the formula against the bytes
of a built model's tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .cli import build_parser
from .config import ModelConfig, load_config, serving_context

#: Bytes per element of the engine's ``--dtype`` values on a GPU (``refengine.cli``: auto is bfloat16 there).
DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
#: Per server, beyond its tensors: a CUDA context alone takes about 0.5 GiB; cuBLAS workspaces, the graphs'
#: private pools and a forward's activations at the engine's batch sizes take the rest of this allowance.
ALLOWANCE_BYTES = 1 << 30
#: The engine's defaults where the plan leaves a flag out, read from its own parser (``refengine.cli``).
DEFAULT_MAX_RUNNING = build_parser().get_default("max_running_requests")
DEFAULT_DTYPE = build_parser().get_default("dtype")


def weight_elements(cfg: ModelConfig, with_draft: bool, draft: ModelConfig | None = None) -> int:
    """Elements of one rank's weights at TP=1 (``TPModel._build``)."""
    h, width = cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim

    def attn(in_dim: int) -> int:
        return in_dim * 3 * width + width * h

    def mlp(inter: int) -> int:
        return h * 2 * inter + inter * h

    n = 2 * cfg.vocab_size * h + h  # embedding, LM head, final norm
    for layer in range(cfg.num_hidden_layers):
        n += attn(h)
        if cfg.is_moe_layer(layer):
            n += cfg.n_routed_experts * mlp(cfg.moe_intermediate_size) + h * cfg.n_routed_experts
            if cfg.n_shared_experts:
                n += mlp(cfg.n_shared_experts * cfg.moe_intermediate_size)
        else:
            n += mlp(cfg.intermediate_size)
    n += 2 * cfg.max_position_embeddings * (cfg.head_dim // 2)  # rotary cos and sin
    if with_draft:
        n += 3 * h * h + attn(2 * h) + mlp((draft or cfg).intermediate_size)
    return n


def pool_elements(cfg: ModelConfig, with_draft: bool, max_running: int, context: int) -> int:
    """Elements of the static pool (``TPModel.enable_pool``): ``max_running + 1`` slots of ``context + 2``."""
    slots, capacity = max_running + 1, context + 2
    kv = cfg.num_attention_heads * capacity * cfg.head_dim
    n = 2 * cfg.num_hidden_layers * slots * kv
    if with_draft:
        n += 2 * slots * kv + slots * capacity * 3 * cfg.hidden_size + slots * cfg.hidden_size
    return n


def server_bytes(cfg: ModelConfig, *, with_draft: bool, dtype: str = DEFAULT_DTYPE,
                 max_running: int = DEFAULT_MAX_RUNNING, context: int | None = None, cuda_graph: bool = True,
                 draft: ModelConfig | None = None) -> int:
    """The GPU memory one TP=1 server of this model holds (weights, pool with CUDA graphs, the allowance)."""
    elements = weight_elements(cfg, with_draft, draft)
    if cuda_graph:
        elements += pool_elements(cfg, with_draft, max_running, serving_context(context, cfg))
    return elements * DTYPE_BYTES[dtype] + ALLOWANCE_BYTES


def plan_server_bytes(server_args: Mapping[str, Any], base: Path) -> int:
    """``server_bytes`` of a plan's server flags (flag names without ``--``; the model path relative to
    ``base``). Raises ``ValueError`` when the model's config cannot be read."""
    model = Path(str(server_args.get("model-path", "")))
    cfg = load_config(model if model.is_absolute() else base / model)
    draft_path = server_args.get("speculative-draft-model-path")
    draft = load_config(base / str(draft_path)) if draft_path else None
    algorithm = str(server_args.get("speculative-algorithm", "NONE")).upper()
    context = server_args.get("context-length")
    return server_bytes(cfg, with_draft=algorithm != "NONE", dtype=str(server_args.get("dtype", DEFAULT_DTYPE)),
                        max_running=int(server_args.get("max-running-requests", DEFAULT_MAX_RUNNING)),
                        context=int(context) if context is not None else None,
                        cuda_graph=not server_args.get("disable-cuda-graph", False), draft=draft)
