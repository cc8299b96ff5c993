"""The reference engine (``python -m specsweep.refengine``) behind the Engine interface."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.engines.argv import args_to_argv
from specsweep.engines.preflight import PreflightResult
from specsweep.refengine.cli import check_args

_BACKEND_LINE = re.compile(r"all-reduce backend: (?P<backend>\w+)")


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
        self, plan: dict, parser_python: str | Sequence[str] | None = None, images: Mapping[str, Any] | None = None
    ) -> PreflightResult:
        """Parse the plan's argv with the engine's own parser (in-process), without launching it."""
        argv = plan["argv"][3:] + self.address_args(plan["host"], plan.get("port") or self.container_port)
        errors = [f"configurations.{plan['name']}: {msg}" for msg in check_args(argv)]
        return PreflightResult(errors=errors, warnings=[], checked_with="specsweep.refengine.cli")

    def check_labels(
        self, plan: dict, labels: dict, images: Mapping[str, Any] | None = None
    ) -> PreflightResult:
        """Nothing to check: the evidence comes from ``--all-reduce-backend``, not from ``variant``."""
        return PreflightResult(checked_with="specsweep.engines.reference")

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
