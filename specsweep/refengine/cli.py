"""Command line of the reference engine, spelled like SGLang's.

``build_parser()`` is importable so that the workflow's preflight can parse a
configuration's argv in-process without launching anything; ``check_args``
adds the cross-flag rules SGLang enforces (the three speculative numbers
together, topk 1) and returns messages instead of exiting.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from .affinity import AFFINITY_MODES
from .config import DEFAULT_MODEL_PATH, config_errors, load_config, read_raw_config, tp_errors

BACKENDS = ("gloo", "shm", "nccl", "symm_mem")
CPU_BACKENDS = ("gloo", "shm")
CUDA_BACKENDS = ("nccl", "symm_mem")
DEFAULT_SPEC = {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}


class ArgsError(Exception):
    """Raised instead of ``SystemExit`` by the parser used in ``check_args``."""


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgsError(message)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The engine's argparse parser (abbreviations off, so an unknown flag is always named)."""
    p = parser_class(
        prog="python -m specsweep.refengine",
        description="specsweep reference engine: tensor-parallel speculative decoding with SGLang's HTTP API",
        allow_abbrev=False,
    )
    p.add_argument("--model-path", default=DEFAULT_MODEL_PATH,
                   help="directory holding a DeepSeek-V3-like config.json (default: the packaged tiny config)")
    p.add_argument("--load-format", default="dummy", choices=["dummy"],
                   help="weights: only 'dummy' (seeded random weights from the config)")
    p.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=_positive_int, default=1,
                   help="tensor-parallel ranks, one process each")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--speculative-algorithm", default=None, choices=["EAGLE3", "EAGLE", "NONE"],
                   help="EAGLE3 (chain draft, topk 1) or NONE; EAGLE is accepted as a synonym of EAGLE3")
    p.add_argument("--speculative-draft-model-path", default=None,
                   help="optional directory with the draft's config.json; default: derived from the target")
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16", "half", "float"],
                   help="auto = float32 on cpu, bfloat16 on cuda")
    p.add_argument("--random-seed", type=int, default=0, help="seed of the dummy weights and of simulated acceptance")
    p.add_argument("--all-reduce-backend", default=None, choices=list(BACKENDS),
                   help="default: shm on cpu, nccl on cuda; an unavailable backend is an error, never a fallback")
    p.add_argument("--max-running-requests", type=_positive_int, default=16,
                   help="requests decoded together in one batch; the rest wait in a queue")
    p.add_argument("--context-length", type=_positive_int, default=None,
                   help="max prompt + output tokens (default: max_position_embeddings of the config)")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--skip-server-warmup", action="store_true", help="do not run the one-request warmup before ready")
    p.add_argument("--disable-cuda-graph", action="store_true",
                   help="run every forward eager (CUDA graphs are on by default with --device cuda, as in SGLang)")
    p.add_argument("--disable-prefill-cuda-graph", action="store_true",
                   help="run prefill forwards eager while the decode phase replays CUDA graphs (by default prompts "
                        "are padded to a captured bucket length and replayed too)")
    p.add_argument("--disable-graph-comm-timing", action="store_true",
                   help="capture no timing events around the all-reduces inside CUDA graphs (a little faster; "
                        "verify_comm_s is then null over several ranks)")
    p.add_argument("--cpu-affinity", default="auto", choices=list(AFFINITY_MODES),
                   help="auto: on --device cpu pin every rank to cores of its own when the host has ranks x cores "
                        "per rank + 1 (the rest left to the client); none: never pin")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def resolve_args(ns: argparse.Namespace) -> argparse.Namespace:
    """Fill derived defaults in place (speculative numbers, backend, dtype) and return ``ns``."""
    if ns.speculative_algorithm == "EAGLE":
        ns.speculative_algorithm = "EAGLE3"
    if ns.speculative_algorithm is None:
        ns.speculative_algorithm = "NONE"
    nums = (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens)
    if ns.speculative_algorithm == "EAGLE3" and all(v is None for v in nums):
        ns.speculative_num_steps = DEFAULT_SPEC["num_steps"]
        ns.speculative_eagle_topk = DEFAULT_SPEC["eagle_topk"]
        ns.speculative_num_draft_tokens = DEFAULT_SPEC["num_draft_tokens"]
    if ns.all_reduce_backend is None:
        ns.all_reduce_backend = "shm" if ns.device == "cpu" else "nccl"
    if ns.dtype in ("auto",):
        ns.dtype = "float32" if ns.device == "cpu" else "bfloat16"
    ns.dtype = {"half": "float16", "float": "float32"}.get(ns.dtype, ns.dtype)
    if ns.served_model_name is None:
        ns.served_model_name = ns.model_path
    return ns


def semantic_errors(ns: argparse.Namespace) -> list[str]:
    """Cross-flag rules, on a namespace already passed through ``resolve_args``."""
    errors: list[str] = []
    nums = {
        "--speculative-num-steps": ns.speculative_num_steps,
        "--speculative-eagle-topk": ns.speculative_eagle_topk,
        "--speculative-num-draft-tokens": ns.speculative_num_draft_tokens,
    }
    given = [k for k, v in nums.items() if v is not None]
    if ns.speculative_algorithm == "NONE":
        if given:
            errors.append(f"{', '.join(given)} given without --speculative-algorithm EAGLE3")
    else:
        if 0 < len(given) < 3:
            missing = [k for k in nums if k not in given]
            errors.append(f"give all three speculative numbers or none (as SGLang): missing {', '.join(missing)}")
        else:
            if ns.speculative_eagle_topk != 1:
                errors.append(f"--speculative-eagle-topk must be 1 (chain draft only), got {ns.speculative_eagle_topk}")
            if ns.speculative_num_steps < 1:
                errors.append(f"--speculative-num-steps must be >= 1, got {ns.speculative_num_steps}")
            elif ns.speculative_num_draft_tokens != ns.speculative_num_steps + 1:
                errors.append(
                    "--speculative-num-draft-tokens must equal --speculative-num-steps + 1 with topk 1 "
                    f"(got {ns.speculative_num_draft_tokens} and {ns.speculative_num_steps})"
                )
    if ns.device == "cpu" and ns.all_reduce_backend in CUDA_BACKENDS:
        errors.append(f"--all-reduce-backend {ns.all_reduce_backend} needs --device cuda")
    if ns.device == "cuda" and ns.all_reduce_backend in CPU_BACKENDS:
        errors.append(f"--all-reduce-backend {ns.all_reduce_backend} works on --device cpu only (use nccl or symm_mem)")
    if ns.device == "cpu" and ns.dtype == "float16":
        errors.append("--dtype float16 is not supported on cpu (use float32 or bfloat16)")
    if not 0 < ns.port < 65536:
        errors.append(f"--port must be in 1..65535, got {ns.port}")
    try:
        raw = read_raw_config(ns.model_path)
    except ValueError as exc:
        errors.append(str(exc))
    else:
        cfg_errors = config_errors(raw)
        errors.extend(cfg_errors)
        if not cfg_errors:
            errors.extend(tp_errors(load_config(ns.model_path), ns.tp_size))
    if ns.speculative_draft_model_path is not None:
        errors.extend(_draft_errors(ns))
    return errors


def _draft_errors(ns: argparse.Namespace) -> list[str]:
    """The draft layer shares the target's embedding, LM head and head layout, so those must match."""
    try:
        raw = read_raw_config(ns.speculative_draft_model_path)
    except ValueError as exc:
        return [f"draft: {exc}"]
    errors = [f"draft: {e}" for e in config_errors(raw)]
    if errors:
        return errors
    try:
        target = load_config(ns.model_path)
    except ValueError:
        return []  # already reported for the target
    draft = load_config(ns.speculative_draft_model_path)
    for field in ("hidden_size", "num_attention_heads", "vocab_size"):
        if getattr(draft, field) != getattr(target, field):
            errors.append(f"draft: {field}={getattr(draft, field)} differs from the target's {getattr(target, field)}")
    if draft.intermediate_size % ns.tp_size:
        errors.append(f"draft: intermediate_size={draft.intermediate_size} is not divisible by --tp-size {ns.tp_size}")
    return errors


def cuda_graph_enabled(ns: argparse.Namespace) -> bool:
    """Whether the engine captures and replays CUDA graphs: on CUDA unless --disable-cuda-graph.

    Never on the CPU, where nothing can be captured (the flag is accepted there and changes nothing).
    """
    return ns.device == "cuda" and not ns.disable_cuda_graph


def check_args(argv: list[str]) -> list[str]:
    """Errors that launching with ``argv`` would hit (empty list = fine); never exits."""
    parser = _raising_parser()
    try:
        ns = parser.parse_args(argv)
    except ArgsError as exc:
        return [str(exc)]
    except (ValueError, TypeError) as exc:
        return [str(exc)]
    return semantic_errors(resolve_args(ns))


@functools.cache
def _raising_parser() -> argparse.ArgumentParser:
    """One parser for every plan's flags: building it costs more than parsing with it (argparse's parsing reads
    the parser and changes nothing in it), and a sweep resolves hundreds of plans at every Snakemake start."""
    return build_parser(_RaisingParser)


def resolved_flags(argv: list[str]) -> argparse.Namespace | None:
    """``argv``'s flags with their derived defaults (``resolve_args``), without the checks that read files
    (``semantic_errors``); None when they do not parse. Never exits."""
    try:
        return resolve_args(_raising_parser().parse_args(argv))
    except (ArgsError, ValueError, TypeError):
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse for real (exit 2 with argparse's message on bad flags or rule violations)."""
    parser = build_parser()
    ns = resolve_args(parser.parse_args(argv))
    errors = semantic_errors(ns)
    if errors:
        parser.error("; ".join(errors))
    return ns


def resolved_args_dict(ns: argparse.Namespace) -> dict[str, Any]:
    """Resolved arguments as SGLang's /server_info shows them (underscored names)."""
    return dict(sorted(vars(ns).items()))
