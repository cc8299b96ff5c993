"""A SIGINT or SIGTERM that lands while the client streams must end the benchmark.

Regression test: asyncio's event loop logs and swallows a BaseException raised
inside a callback (anything but KeyboardInterrupt and SystemExit), so a signal
turned into a plain BaseException could be lost and the benchmark would run on
with the server up. The client streams from a real loopback server here, with
1 ms tokens so that the loop spends its time in callbacks.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

CHILD = r"""
import signal, sys
from pathlib import Path
from specsweep.serve import client, job
signal.signal(signal.SIGINT, job._raise_interrupted)
signal.signal(signal.SIGTERM, job._raise_interrupted)
workload = {"endpoint": "generate", "num_prompts": 100000, "input_len": 8, "output_len": 64, "concurrency": 32,
            "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 30,
            "warmup": {"window": 1, "tolerance": 10.0, "min_windows": 1, "max_requests": 1}}
print("START", flush=True)
try:
    client.run_workload(sys.argv[1], workload, Path(sys.argv[2]) / "w.jsonl", Path(sys.argv[2]) / "m.jsonl", sys.stderr)
except job.Interrupted:
    print("INTERRUPTED", flush=True)
    sys.exit(7)
"""


def test_interrupted_raised_inside_an_event_loop_callback_escapes_the_loop():
    import asyncio

    from specsweep.serve.job import Interrupted

    async def main() -> None:
        asyncio.get_running_loop().call_soon(_raise, Interrupted("SIGTERM"))
        await asyncio.sleep(5)

    def _raise(exc: BaseException) -> None:
        raise exc

    t0 = time.monotonic()
    with pytest.raises(Interrupted):
        asyncio.run(main())
    assert time.monotonic() - t0 < 4, "the loop swallowed the interrupt and slept on"


@pytest.fixture(scope="module")
def loopback():
    proc = subprocess.Popen([sys.executable, "-m", "specsweep.testing.loopback", "--port", "0", "--ttft-ms", "0",
                             "--itl-ms", "0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("sig,delay_s", [(signal.SIGINT, 0.7), (signal.SIGTERM, 1.3)])
def test_signal_during_streaming_ends_the_benchmark(loopback, tmp_path, sig, delay_s):
    child = subprocess.Popen([sys.executable, "-c", CHILD, loopback, str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout.readline().strip() == "START"
        time.sleep(delay_s)
        assert child.poll() is None, "the benchmark ended before the signal"
        child.send_signal(sig)
        out, _ = child.communicate(timeout=20)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 7 and "INTERRUPTED" in out
