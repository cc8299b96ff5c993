"""Model configuration read from a DeepSeek-V3-like ``config.json``.

Only the fields the reference model uses are kept; unknown fields are
ignored (real Hugging Face configs carry many), missing required ones are an
error that names them, so a typo in a scaled config fails at preflight.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REQUIRED_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)

PACKAGE_CONFIGS = Path(__file__).resolve().parent / "configs"
DEFAULT_MODEL_PATH = str(PACKAGE_CONFIGS / "tiny")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the target model (and, derived from it, of the draft layer)."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    n_routed_experts: int = 0
    num_experts_per_tok: int = 1
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    first_k_dense_replace: int = 0
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    eos_token_id: int = 256
    bos_token_id: int = 257
    model_type: str = "deepseek_v3"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def is_moe_layer(self, layer: int) -> bool:
        """DeepSeek-V3 keeps the first ``first_k_dense_replace`` layers dense."""
        return self.n_routed_experts > 0 and layer >= self.first_k_dense_replace

    def aux_layers(self) -> tuple[int, int, int]:
        """Layers whose outputs feed the EAGLE-3 draft (low, middle, high), as EAGLE-3 does."""
        n = self.num_hidden_layers
        return (min(1, n - 1), n // 2, n - 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def config_errors(raw: dict[str, Any]) -> list[str]:
    """Human-readable problems with a raw config dict; empty when usable."""
    errors = [f"config.json lacks required field {f!r}" for f in REQUIRED_FIELDS if f not in raw]
    if errors:
        return errors
    for f in REQUIRED_FIELDS:
        if not isinstance(raw[f], int) or raw[f] <= 0:
            errors.append(f"config.json field {f!r} must be a positive integer, got {raw[f]!r}")
    if errors:
        return errors
    if raw["hidden_size"] % raw["num_attention_heads"]:
        errors.append("hidden_size must be divisible by num_attention_heads")
    elif (raw["hidden_size"] // raw["num_attention_heads"]) % 2:
        errors.append("head dimension (hidden_size / num_attention_heads) must be even for rotary embeddings")
    if raw["vocab_size"] < 258:
        errors.append("vocab_size must be at least 258 (256 byte tokens + eos + bos)")
    if raw.get("n_routed_experts", 0) > 0:
        if raw.get("moe_intermediate_size", 0) <= 0:
            errors.append("moe_intermediate_size must be positive when n_routed_experts > 0")
        k = raw.get("num_experts_per_tok", 1)
        if not 1 <= k <= raw["n_routed_experts"]:
            errors.append("num_experts_per_tok must be in [1, n_routed_experts]")
    return errors


def read_raw_config(model_path: str | Path) -> dict[str, Any]:
    """Read ``<model_path>/config.json``; raises ``ValueError`` with a clear message."""
    path = Path(model_path) / "config.json"
    if not path.is_file():
        where = "" if path.is_absolute() else f" (a relative path: looked for under {Path.cwd()})"
        raise ValueError(f"--model-path {model_path}: no config.json found at {path}{where}")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level must be a JSON object")
    return raw


def load_config(model_path: str | Path) -> ModelConfig:
    """Load and validate a model config; raises ``ValueError`` on any problem."""
    raw = read_raw_config(model_path)
    errors = config_errors(raw)
    if errors:
        raise ValueError("; ".join(errors))
    fields = ModelConfig.__dataclass_fields__
    kwargs = {k: v for k, v in raw.items() if k in fields}
    if isinstance(kwargs.get("eos_token_id"), list):
        kwargs["eos_token_id"] = kwargs["eos_token_id"][0]
    return ModelConfig(**kwargs)


def serving_context(context_length: int | None, cfg: ModelConfig) -> int:
    """The positions a request may use: ``--context-length``, at most the config's ``max_position_embeddings``."""
    return min(context_length or cfg.max_position_embeddings, cfg.max_position_embeddings)


def request_token_limit(context: int, spec_steps: int | None) -> int:
    """The largest prompt + max_new_tokens a request may ask for: the context less the draft's tail
    (``spec_steps`` positions) and one more; a request beyond it is refused (HTTP 400)."""
    return context - (spec_steps or 0) - 1


def tp_errors(cfg: ModelConfig, tp_size: int) -> list[str]:
    """Megatron-style sharding needs every sharded dimension divisible by the TP size."""
    errors = []
    if cfg.num_attention_heads % tp_size:
        errors.append(f"num_attention_heads={cfg.num_attention_heads} is not divisible by --tp-size {tp_size}")
    if cfg.intermediate_size % tp_size:
        errors.append(f"intermediate_size={cfg.intermediate_size} is not divisible by --tp-size {tp_size}")
    if cfg.n_routed_experts and cfg.moe_intermediate_size % tp_size:
        errors.append(f"moe_intermediate_size={cfg.moe_intermediate_size} is not divisible by --tp-size {tp_size}")
    return errors
