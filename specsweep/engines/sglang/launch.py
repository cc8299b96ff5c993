"""How SGLang 0.5.23 is started: its launch module, address flags and ports (no SGLang import)."""

from __future__ import annotations

from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.engines.argv import args_to_argv

LAUNCH_MODULE = "sglang.launch_server"
# SGLang's default --port; inside a container the orchestrator maps it to a host port.
CONTAINER_PORT = 30000
# /ready is passive: /health and /health_generate send a one-token generation
# when the server is idle, which would run a forward pass (and all-reduces) in
# the middle of a measurement.
READY_PATH = "/ready"


def launch_argv(python: str, server_args: dict[str, Any]) -> list[str]:
    """``python -m sglang.launch_server`` and the flags, sorted (see ``args_to_argv``), without host/port."""
    return [python, "-m", LAUNCH_MODULE, *args_to_argv(server_args)]


def address_args(host: str, port: int) -> list[str]:
    return ["--host", host, "--port", str(port)]


def server_flags(plan: Plan) -> list[str]:
    """The server flags of a plan as SGLang's parser sees them, address included."""
    argv = list(plan.argv)
    if argv[1:3] == ["-m", LAUNCH_MODULE]:
        flags = argv[3:]
    else:
        flags = args_to_argv(plan.server_args)
    port = plan.port or CONTAINER_PORT
    return flags + address_args(plan.host or "127.0.0.1", int(port))
