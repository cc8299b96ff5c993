"""The engine interface and the one list of engines.

The orchestrator (``specsweep.serve``), the plan resolver and the workflow
only talk to an :class:`Engine`; they never branch on an engine's name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Labels
from specsweep.engines.context import ContextLimit
from specsweep.engines.preflight import PreflightResult
from specsweep.engines.reference import ReferenceEngine
from specsweep.engines.sglang.engine import SGLangEngine


class Engine(Protocol):
    name: str
    ready_path: str  # polled until HTTP 200; passive (never a generation while measuring)
    container_port: int  # the port the server listens on inside a container
    needs_parser_env: bool  # preflight needs the workflow's pinned parser environment
    # Tokenizer the engine uses when the model directory holds none (plan.tokenizer.BUILTIN), or None.
    builtin_tokenizer: str | None

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]:
        """The launch command without host/port (flags sorted)."""
        ...

    def address_args(self, host: str, port: int) -> list[str]: ...

    def facts(self, server_args: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
        """What the plan's flags and environment mean, resolved once into the plan (``contracts.plan.FACT_KEYS``):
        analysis and the report read these, never an engine's flags."""
        ...

    def preflight(
        self, plan: Plan, parser_python: str | Sequence[str] | None = None, images: Mapping[str, Any] | None = None,
        labels: Labels = None,
    ) -> PreflightResult:
        """Check the plan with the engine's own parser, without launching anything; ``labels`` (None: not
        known, as in a preflight job, which reads plan.json alone) let the rules that depend on them judge."""
        ...

    def check_labels(
        self, plan: Plan, labels: Mapping[str, Any], images: Mapping[str, Any] | None = None
    ) -> PreflightResult:
        """Static checks of a plan's labels (``variant``, ``expect``; not in the plan, so not in preflight)."""
        ...

    def context_limit(self, plan: Plan, base: Path) -> ContextLimit | None:
        """The largest prompt + output tokens a request of this plan may ask for, and where that comes from
        (``engines.context``); paths relative to ``base``; None when it cannot be known before a launch."""
        ...

    def variant_evidence(self, server_log: str, plan: Plan, labels: Mapping[str, Any], ready: bool = False
                         ) -> dict:
        """What the server log proves about the communication variant that really ran, against the one the
        plan and its labels (``variant``) asked for (``ready``: whether the server answered /ready, which tells
        a failure while starting from one while serving)."""
        ...

    def comm_profile(self, plan: Plan) -> dict:
        """How this plan communicates, for the profiling stages (``specsweep.serve.profile``).

        ``runner``/``backend``/``timing`` (how ``serve/allreduce_bench.py`` times its all-reduce),
        ``world_size``, ``device``, ``model_path`` (as the server sees it), ``dtype``
        (explicit, or ``config``), ``draft_tokens`` (tokens per request in one verify;
        1 without speculation), ``allreduces_per_layer`` and ``allreduces_outside_layers``
        (the expected all-reduces per target forward = layers x the first + the second;
        None when unknown), ``note``; ``skip`` (a reason) when there is nothing to time.
        """
        ...


ENGINES: dict[str, type] = {"reference": ReferenceEngine, "sglang": SGLangEngine}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]()
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; allowed: {sorted(ENGINES)}") from None
