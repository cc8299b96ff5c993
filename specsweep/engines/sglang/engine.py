"""SGLang's ``launch_server`` behind the ``specsweep.engines.registry.Engine`` interface."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.contracts.variants import Labels, requested_variants
from specsweep.engines.argv import common_facts
from specsweep.engines.context import ContextLimit
from specsweep.engines.preflight import PreflightResult
from specsweep.engines.sglang import context, launch
from specsweep.engines.sglang.args import tp_size
from specsweep.engines.sglang.comm_profile import comm_profile
from specsweep.engines.sglang.logcheck import variant_evidence
from specsweep.engines.sglang.preflight import preflight_plans
from specsweep.engines.sglang.rules import check_plan


class SGLangEngine:
    """``python -m sglang.launch_server`` as run in the SGLang images (see ``launch``)."""

    name = "sglang"
    ready_path = launch.READY_PATH
    container_port = launch.CONTAINER_PORT
    # Preflight runs SGLang's own parser, which lives in the workflow's pinned venv.
    needs_parser_env = True
    # SGLang tokenizes with the model's own tokenizer; there is none built in.
    builtin_tokenizer = None

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]:
        """The launch command without host/port (flags sorted, see ``args_to_argv``)."""
        return launch.launch_argv(python, server_args)

    def address_args(self, host: str, port: int) -> list[str]:
        return launch.address_args(host, port)

    def facts(self, server_args: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
        """What the flags mean (``contracts.plan.FACT_KEYS``). SGLang has no one all-reduce backend flag: which
        communicator takes an all-reduce is its dispatch's choice at run time, which the log proves
        (``variant_evidence``), so ``all_reduce_backend`` is None."""
        return {**common_facts(server_args, env), "tp_size": tp_size(server_args), "all_reduce_backend": None}

    def preflight(
        self, plan: Plan, parser_python: str | Sequence[str] | None = None, images: Mapping[str, Any] | None = None,
        labels: Labels = None,
    ) -> PreflightResult:
        """Static rules, then SGLang's own parser (``parser_python``: the pinned venv's python, or an argv prefix
        that runs python in the built image)."""
        if parser_python is None:
            raise ValueError("SGLang preflight needs the parser environment's python (parser_python)")
        known = None if labels is None else {plan.name: labels}
        result = preflight_plans([plan], parser_python, images, labels=known)[plan.name]
        return PreflightResult(
            errors=list(result["errors"]),
            warnings=list(result["warnings"]),
            checked_with=f"sglang {result.get('sglang_version') or '?'} ServerArgs parser, ModelConfig and "
                         f"TokenizerManager's tokenizer/processor calls",
            loaded=list(result.get("loaded") or []),
        )

    def check_labels(
        self, plan: Plan, labels: Mapping[str, Any], images: Mapping[str, Any] | None = None
    ) -> PreflightResult:
        """Every SGLang-free rule on the plan with its labels (``variant``, ``expect``), not only what the
        labels add: the rules are cheap (no SGLang, no parser environment), so a configuration that
        cannot run (EAGLE without a draft model, ``gpus`` below tp-size) stops when the workflow starts,
        ``snakemake -n`` included, and in ``check`` before the parser environment is built."""
        findings = check_plan(plan, labels, images)
        return PreflightResult(
            errors=[f.message for f in findings if f.severity == "error"],
            warnings=[f.message for f in findings if f.severity == "warning"],
            checked_with="specsweep.engines.sglang.rules",
        )

    def variant_evidence(self, server_log: str, plan: Plan, labels: Mapping[str, Any], ready: bool = False
                         ) -> dict:
        """What the server log proves about the communication variants the labels requested."""
        return variant_evidence(server_log, requested_variants(labels), plan.env, ready)

    def comm_profile(self, plan: Plan) -> dict:
        """How the plan communicates, for the profiling stages (``engines.sglang.comm_profile``)."""
        return comm_profile(plan)

    def context_limit(self, plan: Plan, base: Path) -> ContextLimit | None:
        """The largest input + output a request may ask for, as SGLang derives it (``engines.sglang.context``)."""
        return context.context_limit(plan, base)
