"""Test doubles, written once: an in-test HTTP server on 127.0.0.1, a recorder of docker calls, a mini repo.

* ``serve_app``: an aiohttp application served on a real socket of 127.0.0.1 from a
  thread with its own event loop, for tests that give the client the stream shapes
  of SGLang's own code (``sse`` writes one event), with ``MODELS`` answering
  ``GET /v1/models`` as the OpenAI endpoints ask.
* ``DockerRecorder``: stands in for ``subprocess.run`` in the unit tests of the docker
  argv (``images.cli.run_docker``'s callers): it records argv and stdin and answers
  ``docker image inspect`` with one image. The tests that need Docker itself are
  under ``tests/docker`` and use the real engine.
* ``mini_repo``: a small checkout with a Dockerfile, a patch, a build context and
  the cache files a content record must ignore, and the image spec naming them.
* ``plan_dict``: a complete plan.json object (``contracts.plan.Plan``) with the keys a test sets and
  harmless values for the rest, so that a test names only what it is about.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from specsweep import HARNESS_VERSION
from specsweep.contracts.plan import PLAN_FORMAT_VERSION
from specsweep.engines.registry import get_engine

#: The model list the in-test servers give the OpenAI endpoints' ``GET /v1/models``.
MODELS = {"object": "list", "data": [{"id": "served-model", "object": "model"}]}


#: What a test plan holds unless the test sets it: a local reference-engine plan without a server of
#: its own (no argv), synthetic prompts, the schema's target keys at their defaults.
_PLAN_DEFAULTS: dict[str, Any] = {
    "format_version": PLAN_FORMAT_VERSION, "harness_version": HARNESS_VERSION, "name": "p", "engine": "reference",
    "runtime": "local", "image": None, "server_args": {}, "argv": [], "env": {}, "host": "127.0.0.1", "port": None,
    "ready_timeout_s": 60, "gpus": 0, "workload": {}, "prompts": None, "volumes": [], "gpu_arch": None,
    "nvlink": None}


def plan_dict(**keys: Any) -> dict[str, Any]:
    """A complete plan.json object: ``keys`` over ``_PLAN_DEFAULTS`` (``Plan.from_dict`` reads it); its
    ``facts``, unless given, what its engine resolves its flags and environment to (``engine_facts``)."""
    plan = {**_PLAN_DEFAULTS, **keys}
    plan.setdefault("facts", engine_facts(plan["engine"], plan["server_args"], plan["env"]))
    return json.loads(json.dumps(plan))


def engine_facts(engine: str, server_args: dict[str, Any] | None = None, env: dict[str, str] | None = None
                 ) -> dict[str, Any]:
    """A plan's ``facts`` as ``plan.resolve`` puts them there: what ``engine`` says its flags mean."""
    return get_engine(engine).facts(server_args or {}, env or {})


def sse(obj: Any) -> bytes:
    """One server-sent event: ``data: <JSON>`` (or the bytes given, e.g. ``b"[DONE]"``) and a blank line."""
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


async def models(request: web.Request) -> web.Response:
    """``GET /v1/models``: ``MODELS``."""
    return web.json_response(MODELS)


@contextmanager
def serve_app(app: web.Application, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` served on a free port of ``host`` from a background thread; yields its base URL and stops it."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("the in-test server did not start within 10 s")
    try:
        yield f"http://{host}:{holder['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


class DockerRecorder:
    """Stands in for ``subprocess.run`` and records each call's argv and stdin (``calls``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Any]] = []

    def __call__(self, argv: list[str], **kw: Any) -> subprocess.CompletedProcess:
        self.calls.append((list(argv), kw.get("input")))
        out = ""
        if argv[1:3] == ["image", "inspect"]:
            out = json.dumps([{"Id": "sha256:1", "RepoDigests": [argv[3].rsplit(":", 1)[0] + "@sha256:d"]}])
        stdout = kw.get("stdout")
        if stdout is not None and hasattr(stdout, "write"):
            stdout.write("ok\n")
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")


def mini_repo(tmp_path: Path) -> tuple[Path, dict]:
    """``(root, spec)``: a checkout under ``tmp_path/repo`` and an image spec of it (a Dockerfile that
    copies ``pkg/``, a patch, build args, a ``wheels`` build context beside the checkout)."""
    root = tmp_path / "repo"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"junk")
    (root / "other.py").write_text("unrelated\n")
    (root / "p.patch").write_text("--- a/x\n+++ b/x\n")
    (root / "Dockerfile").write_text("FROM base\nCOPY pkg /app/pkg\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "w-1.whl").write_bytes(b"wheel")
    spec = {"dockerfile": "Dockerfile", "target": "runtime", "context": ".", "description": "d",
            "build_args": {"A": "1", "REVISION": "abc"}, "patches": ["p.patch"],
            "build_contexts": {"wheels": str(wheels)}}
    return root, spec
