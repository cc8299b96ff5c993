"""The reference engine (``python -m specsweep.refengine``) behind the Engine interface."""

from __future__ import annotations

import argparse
import copy
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Labels
from specsweep.engines.argv import args_to_argv, common_facts
from specsweep.engines.context import ContextLimit, model_config, shown_path
from specsweep.engines.preflight import PreflightResult
from specsweep.engines.variants import REFERENCE_PREFIX, known_variants
from specsweep.refengine.cli import build_parser, check_args, resolve_args, resolved_flags
from specsweep.refengine.config import load_config, request_token_limit, serving_context

# Its test-only faults that slow each step by a known fraction or delay (plan.controls: the positive control;
# analysis.answer: a configuration that sets one is not an answer).
from specsweep.refengine.faults import STEP_DELAY_ENV, STEP_SLOWDOWN_ENV  # noqa: F401

# What one server holds on a GPU, for plan.design's side-by-side check.
from specsweep.refengine.footprint import ALLOWANCE_BYTES, plan_server_bytes  # noqa: F401

# Its profiler ranges (the forward phases, the all-reduce prefix + backend), for the trace analysis.
from specsweep.refengine.ranges import ALL_REDUCE_PREFIX as TRACE_ALL_REDUCE_PREFIX  # noqa: F401
from specsweep.refengine.ranges import PHASES as TRACE_PHASES  # noqa: F401

# The engine's chat template and message text: what plan.tokenizer's ByteChatTokenizer renders chat prompts
# with and plan.datasets reads messages with, so they count what this server will tokenize. The rest of
# the package reaches the engine through this adapter, never specsweep.refengine itself.
from specsweep.refengine.tokenizer import (  # noqa: F401 - for plan.tokenizer and plan.datasets
    CHAT_GENERATION_PROMPT,
    CHAT_TEMPLATE,
    apply_chat_template,
    message_text,
)

#: The ``variant:`` labels the reference engine's log can prove: the all-reduce backend it reports
#: (``all-reduce:<backend>``, the registry's entries of this engine).
VARIANTS = known_variants("reference")
_BACKEND_LINE = re.compile(r"all-reduce backend: (?P<backend>\w+)")


@functools.lru_cache(maxsize=4096)
def _parse_once(argv: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """``check_args`` and the backend ``resolve_args`` selects, once per distinct argv in a process: every
    Snakemake start checks every plan, and a grid's members often share one argv (axes over env)."""
    errors = check_args(list(argv))
    if errors:
        return tuple(errors), None
    ns = _flags_once(argv)
    return (), ns.all_reduce_backend if ns is not None else None


@functools.lru_cache(maxsize=4096)
def _flags_once(argv: tuple[str, ...]) -> argparse.Namespace | None:
    """``resolved_flags`` once per distinct argv in a process (the parser is built once, refengine.cli): a
    start resolves every plan's facts and context limit, and a grid's members often share one argv."""
    return resolved_flags(list(argv))


def _flags(argv: Sequence[str]) -> argparse.Namespace | None:
    """``argv``'s resolved flags (``_flags_once``), as the caller's own copy of the namespace."""
    ns = _flags_once(tuple(argv))
    return copy.copy(ns) if ns is not None else None


class ReferenceEngine:
    """specsweep's own tensor-parallel speculative-decoding server."""

    name = "reference"
    ready_path = "/ready"
    container_port = 30000
    needs_parser_env = False
    # Its byte tokenizer and chat template (refengine/tokenizer.py), named as plan.tokenizer.BUILTIN knows it.
    builtin_tokenizer = "refengine-bytes"

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]:
        return [python, "-m", "specsweep.refengine", *args_to_argv(server_args)]

    def address_args(self, host: str, port: int) -> list[str]:
        return ["--host", host, "--port", str(port)]

    def preflight(
        self, plan: Plan, parser_python: str | Sequence[str] | None = None, images: Mapping[str, Any] | None = None,
        labels: Labels = None,
    ) -> PreflightResult:
        """Parse the plan's argv with the engine's own parser (in-process), without launching it (the labels'
        checks are ``check_labels``')."""
        errors = [f"configurations.{plan.name}: {msg}" for msg in self._checked(plan)[0]]
        return PreflightResult(errors=errors, warnings=[], checked_with="specsweep.refengine.cli")

    def _checked(self, plan: Plan) -> tuple[tuple[str, ...], str | None]:
        """The engine's own parser on the plan's argv as it will launch: (errors, the all-reduce backend
        the flags select, None when they fail)."""
        port = plan.port or self.container_port
        return _parse_once((*plan.argv[3:], *self.address_args(plan.host, port)))

    def context_limit(self, plan: Plan, base: Path) -> ContextLimit | None:
        """The largest input + output a request may ask for: the engine's own ``request_token_limit`` of its
        context (``--context-length``, at most the config's ``max_position_embeddings``); None when the
        flags or the config cannot be read (preflight names why)."""
        ns = _flags(plan.argv[3:]) if not self._checked(plan)[0] else None
        if ns is None:
            return None
        found = model_config(plan, ns.model_path, base)
        if found is None:
            return None
        path, raw = found
        try:
            cfg = load_config(path.parent)
        except ValueError:
            return None
        context = serving_context(ns.context_length, cfg)
        steps = ns.speculative_num_steps if ns.speculative_algorithm != "NONE" else None
        key = "max_position_embeddings" if "max_position_embeddings" in raw else "max_position_embeddings (default)"
        source = (f"--context-length {ns.context_length}" if context < cfg.max_position_embeddings
                  else f"{shown_path(path, base)}: {key} {cfg.max_position_embeddings}")
        kept = f" less speculative-num-steps {steps} + 1 for the draft" if steps else " less 1"
        return ContextLimit(request_token_limit(context, steps), f"{source}, the reference engine's context,{kept}")

    def facts(self, server_args: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
        """What the flags mean (``contracts.plan.FACT_KEYS``): the TP size and the all-reduce backend as the
        engine's own parser resolves them, from the flags alone (no file is read: a plan does not depend on
        the host that resolves it); the backend None when the flags do not parse (preflight names them)."""
        ns = _flags([*args_to_argv(server_args), *self.address_args("127.0.0.1", self.container_port)])
        if ns is not None:
            return {**common_facts(server_args, env), "tp_size": ns.tp_size,
                    "all_reduce_backend": ns.all_reduce_backend}
        # flags the parser refuses (another one's value, say): the TP size as given, if it is a number
        given = next((server_args[k] for k in ("tp-size", "tensor-parallel-size") if server_args.get(k)), 1)
        return {**common_facts(server_args, env), "tp_size": int(given) if str(given).isdigit() else None,
                "all_reduce_backend": None}

    def check_labels(
        self, plan: Plan, labels: Mapping[str, Any], images: Mapping[str, Any] | None = None
    ) -> PreflightResult:
        """``variant`` names the backend the log must show (``all-reduce:<backend>``, ``variant_evidence``):
        an unknown name could never be proven, and one other than the backend the flags select contradicts
        them; both are errors naming the key, the allowed values and the fix."""
        value = labels.get("variant") or []
        variants = sorted(set([value] if isinstance(value, str) else value))
        errors = []
        key = f"configurations.{plan.name}.variant"
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            errors.append(f"{key}: unknown variant(s) {unknown} for the reference engine; allowed: "
                          f"{sorted(VARIANTS)} (the all-reduce backend its log must show); remove it or name one")
        elif variants and (backend := self._checked(plan)[1]) is not None:  # bad flags: preflight names them
            if variants != [f"{REFERENCE_PREFIX}{backend}"]:
                errors.append(f"{key}: {variants} contradicts the flags, which select --all-reduce-backend "
                              f"{backend}; set variant: all-reduce:{backend} or change server_args.all-reduce-backend")
        return PreflightResult(errors=errors, checked_with="specsweep.engines.reference")

    def variant_evidence(self, server_log: str, plan: Plan, labels: Mapping[str, Any], ready: bool = False
                         ) -> dict:
        """The engine logs the all-reduce backend it really uses; compare with the plan's (its flag is the
        request, so the labels add nothing; ``ready`` is not needed: no failure signatures are read from this
        engine's log)."""
        requested = plan.server_args.get("all-reduce-backend")
        found = _BACKEND_LINE.findall(server_log)
        evidence: dict[str, Any] = {
            "requested": [f"{REFERENCE_PREFIX}{requested}"] if requested else [],
            "active": [f"{REFERENCE_PREFIX}{b}" for b in dict.fromkeys(found)],
            "fell_back": [],
        }
        if requested and found and requested not in found:
            evidence["fell_back"].append(
                {"variant": f"{REFERENCE_PREFIX}{requested}", "line": f"all-reduce backend: {found[0]}"}
            )
        return evidence

    def comm_profile(self, plan: Plan) -> dict:
        """The reference engine's all-reduce: its own backend, one process per rank, 2 per layer exactly."""
        ns = resolve_args(build_parser().parse_args([*plan.argv[3:], "--port", str(self.container_port)]))
        spec = ns.speculative_algorithm != "NONE"
        out: dict[str, Any] = {
            "runner": "refengine",
            "backend": ns.all_reduce_backend,
            # Between the layers of this very model, as the server runs them (serve/allreduce_bench.py, Timing).
            "timing": "in_forward",
            "world_size": ns.tp_size,
            "device": ns.device,
            "model_path": ns.model_path,
            "dtype": ns.dtype,
            "draft_tokens": ns.speculative_num_draft_tokens if spec else 1,
            "allreduces_per_layer": 2,
            "allreduces_outside_layers": 0,
            "note": "attention and MLP/MoE outputs are all-reduced once per layer each; embedding, router, norms "
                    "and LM head are replicated (refengine/README.md, Model)",
        }
        if ns.tp_size < 2:
            out["skip"] = "tp-size 1: the all-reduce is a no-op, nothing to time"
        return out
