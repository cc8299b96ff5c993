"""A page as a user's browser shows it: headless Chromium (Debian's ``chromium``) driven over its DevTools
protocol, for the HTML report's tests (``snakemake --report`` writes a page that its own scripts render).

``first_screen`` opens a file in a window of a given size, waits until a probe (JavaScript that returns JSON)
finds what it looks for, and returns what the probe returned: what the page shows after its scripts ran, with
the positions a test needs to say what is on the first screen.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

#: The browser CI installs (.ci/run: Debian's chromium).
CHROMIUM = "chromium"


class BrowserError(RuntimeError):
    """No browser, or the page never showed what the probe looks for."""


def first_screen(page: Path, probe: str, width: int = 1280, height: int = 800, timeout_s: float = 30.0) -> Any:
    """The JSON value ``probe`` (a JavaScript expression giving a JSON string) returns on ``page`` in a
    ``width`` x ``height`` window, once it is not null (polled until ``timeout_s``)."""
    binary = shutil.which(CHROMIUM)
    if binary is None:
        raise BrowserError(f"{CHROMIUM} not found: apt-get install -y chromium (.ci/run installs it)")
    with tempfile.TemporaryDirectory() as profile:
        err = Path(profile) / "chromium.err"  # a file, not a pipe: nobody reads the browser's later lines
        with err.open("w") as err_file:
            proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu",  # noqa: S603
                                     "--remote-debugging-port=0", f"--user-data-dir={profile}/data",
                                     f"--window-size={width},{height}", "about:blank"],
                                    stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True)
        try:
            address = _devtools_address(proc, err, timeout_s)
            return asyncio.run(_probe(address, page.resolve().as_uri(), probe, timeout_s))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _devtools_address(proc: subprocess.Popen, err: Path, timeout_s: float) -> str:
    """host:port from Chromium's "DevTools listening on ws://..." line (its stderr, ``err``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = err.read_text(errors="replace")
        if m := re.search(r"DevTools listening on ws://([^/\s]+)/", text):
            return m[1]
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BrowserError(f"{CHROMIUM} gave no DevTools address (exit status {proc.poll()}): {text[-2000:]}")
        time.sleep(0.05)


async def _probe(address: str, url: str, probe: str, timeout_s: float) -> Any:
    import aiohttp

    with urllib.request.urlopen(f"http://{address}/json/list", timeout=10) as resp:  # noqa: S310 - loopback
        targets = json.load(resp)
    ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
    async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
        ids = iter(range(1, 1 << 30))

        async def call(method: str, **params: Any) -> dict:
            n = next(ids)
            await ws.send_json({"id": n, "method": method, "params": params})
            async for msg in ws:
                data = json.loads(msg.data)
                if data.get("id") == n:
                    if "error" in data:
                        raise BrowserError(f"{method}: {data['error']}")
                    return data["result"]
            raise BrowserError(f"{method}: the browser closed the connection")

        await call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while True:
            result = await call("Runtime.evaluate", expression=probe)
            value = result["result"].get("value")
            found = json.loads(value) if isinstance(value, str) else None
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise BrowserError(f"{url}: the probe found nothing within {timeout_s:g} s ({result})")
            await asyncio.sleep(0.2)
