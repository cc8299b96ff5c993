"""The two engines behind one interface.

``reference`` is specsweep's own PyTorch engine (``specsweep.refengine``), the
embedded default that runs anywhere; ``sglang`` is SGLang's launch_server in
the images, the real target. The orchestrator (``specsweep.job``) and the
workflow only talk to an :class:`Engine`.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from specsweep.argv import args_to_argv


class Engine(Protocol):
    name: str
    ready_path: str
    container_port: int

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]: ...

    def address_args(self, host: str, port: int) -> list[str]: ...

    def preflight(self, plan: dict) -> list[str]: ...

    def variant_evidence(self, server_log: str, plan: dict) -> dict: ...


_BACKEND_LINE = re.compile(r"all-reduce backend: (?P<backend>\w+)")


class ReferenceEngine:
    """specsweep's own tensor-parallel speculative-decoding server."""

    name = "reference"
    ready_path = "/ready"
    container_port = 30000

    def launch_argv(self, python: str, server_args: dict[str, Any]) -> list[str]:
        return [python, "-m", "specsweep.refengine", *args_to_argv(server_args)]

    def address_args(self, host: str, port: int) -> list[str]:
        return ["--host", host, "--port", str(port)]

    def preflight(self, plan: dict) -> list[str]:
        """Parse the plan's argv with the engine's own parser, without launching it."""
        from specsweep.refengine.cli import check_args

        argv = plan["argv"][3:] + self.address_args(plan["host"], plan.get("port") or self.container_port)
        return [f"configurations.{plan['name']}: {msg}" for msg in check_args(argv)]

    def variant_evidence(self, server_log: str, plan: dict) -> dict:
        """The engine logs the all-reduce backend it really uses; compare with the request."""
        requested = plan["server_args"].get("all-reduce-backend")
        found = _BACKEND_LINE.findall(server_log)
        evidence: dict[str, Any] = {
            "requested": [f"all-reduce:{requested}"] if requested else [],
            "active": [f"all-reduce:{b}" for b in dict.fromkeys(found)],
            "fell_back": [],
        }
        if requested and found and requested not in found:
            evidence["fell_back"].append(
                {"variant": f"all-reduce:{requested}", "line": f"all-reduce backend: {found[0]}"}
            )
        return evidence


def get_engine(name: str) -> Engine:
    if name == "reference":
        return ReferenceEngine()
    if name == "sglang":
        from specsweep.sglang.engine import SGLangEngine

        return SGLangEngine()
    raise ValueError(f"unknown engine {name!r}; allowed: ['reference', 'sglang']")
