"""SGLang 0.5.23's request token limit, derived as SGLang derives it, without SGLang.

* The context: ``--context-length`` when given (SGLang refuses one above the
  model's own at startup unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN:
  ``configs/model_config.py:1291-1326``, ``_derive_context_length``), else
  ``get_context_length(hf_text_config)`` (``utils/hf_transformers/common.py:668-694``):
  the first of ``max_sequence_length``, ``seq_length``, ``max_seq_len``,
  ``model_max_length``, ``max_position_embeddings`` in the text config (a
  multimodal config's ``text_config``, ``llm_config``, ``language_config``,
  ``thinker_config``: ``common.py:547-577``), times ``rope_scaling.factor``
  unless the scaling names ``original_max_position_embeddings`` or is
  ``llama3``; 2048 when no key is there (then nothing is refused here:
  a default is no evidence).
* The tokens kept back: EAGLE keeps ``max(topk x steps, draft tokens)`` output
  slots per request for its draft (``managers/utils.py:484-500``,
  ``compute_num_reserved_tokens``), added to the prompt's length.
* The check: ``prompt + reserved + max_new_tokens > context`` is refused
  (``managers/tokenizer_manager.py:1333-1379``, "Requested token count
  exceeds the model's maximum context length").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.engines.context import ContextLimit, model_config, shown_path

#: utils/hf_transformers/common.py:668-674, in SGLang's order of preference.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")
#: utils/hf_transformers/common.py:566: where a multimodal config keeps its language model's.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")
#: The algorithms whose draft keeps output slots: ``is_eagle()`` (speculative/spec_info.py:102-109), and NEXTN,
#: which SGLang turns into EAGLE (arg_groups/speculative_hook.py:109).
_EAGLE = ("EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN")


def _text_config(config: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    for key in TEXT_CONFIG_KEYS:
        if isinstance(config.get(key), dict):
            return f"{key}.", config[key]
    return "", config


def derived_context(config: Mapping[str, Any]) -> tuple[int, str] | None:
    """(context, the key it came from) as ``get_context_length`` derives it; None without a key."""
    prefix, text = _text_config(config)
    scaling = text.get("rope_scaling") or {}
    factor = scaling.get("factor", 1) if isinstance(scaling, dict) else 1
    if isinstance(scaling, dict) and ("original_max_position_embeddings" in scaling
                                      or scaling.get("rope_type") == "llama3"):
        factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        if text.get(key) is not None:
            scaled = f" x rope_scaling.factor {factor}" if factor != 1 else ""
            return int(factor * text[key]), f"{prefix}{key} {text[key]}{scaled}"
    return None


def reserved_tokens(server_args: Mapping[str, Any]) -> int:
    """Output slots EAGLE keeps per request (``compute_num_reserved_tokens``); 0 without EAGLE."""
    if str(server_args.get("speculative-algorithm") or "").upper() not in _EAGLE:
        return 0
    steps = int(server_args.get("speculative-num-steps") or 0)
    topk = int(server_args.get("speculative-eagle-topk") or 0)
    return max(topk * steps, int(server_args.get("speculative-num-draft-tokens") or 0))


def context_limit(plan: Plan, base: Path) -> ContextLimit | None:
    """The largest input + output a request of this plan may ask SGLang for, and where it comes from."""
    args = plan.server_args
    reserved = reserved_tokens(args)
    kept = (f", less the {reserved} output slots EAGLE keeps per request (speculative-num-steps x "
            "speculative-eagle-topk, or speculative-num-draft-tokens)") if reserved else ""
    if args.get("context-length"):
        context, source = int(args["context-length"]), f"server_args.context-length {args['context-length']}"
    else:
        found = model_config(plan, args.get("model-path"), base)
        derived = derived_context(found[1]) if found else None
        if found is None or derived is None:
            return None
        context, key = derived
        source = f"{shown_path(found[0], base)}: {key}, SGLang's context length"
    return ContextLimit(context - reserved, source + kept)
