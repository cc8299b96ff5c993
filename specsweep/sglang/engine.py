"""SGLang's ``launch_server`` behind the :class:`specsweep.engines.Engine` interface."""

from __future__ import annotations

from typing import Any

from specsweep.argv import args_to_argv


class SGLangEngine:
    """``python -m sglang.launch_server`` as run in the SGLang images.

    ``ready_path`` is ``/ready`` because it is passive: ``/health`` and
    ``/health_generate`` send a one-token generation when the server is idle,
    which would run a forward pass (and all-reduces) in the middle of a
    measurement.
    """

    name = "sglang"
    ready_path = "/ready"
    container_port = 30000  # SGLang's default --port; the orchestrator maps it

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]:
        """The launch command without host/port (flags sorted, see :func:`args_to_argv`)."""
        return [python, "-m", "sglang.launch_server", *args_to_argv(server_args)]

    def address_args(self, host: str, port: int) -> list[str]:
        return ["--host", host, "--port", str(port)]

    def preflight(self, plan: dict) -> list[str]:
        """In-process static rules only (no SGLang import); see :mod:`specsweep.sglang.preflight`
        for the check through SGLang's own parser, which needs the parser venv."""
        from specsweep.sglang.rules import check_plan

        return [f.message for f in check_plan(plan) if f.severity == "error"]

    def variant_evidence(self, server_log: str, plan: dict) -> dict:
        """What the server log proves about the communication variants the plan requested."""
        from specsweep.sglang.logcheck import variant_evidence

        return variant_evidence(server_log, plan)
