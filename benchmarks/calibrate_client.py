"""Calibrate the benchmark client against a loopback server whose timing is known.

1. Accuracy at concurrency 1: the loopback server (``specsweep.testing.loopback``,
   its own process) sends the first chunk ``--ttft-ms`` after receiving a
   request and one chunk every ``--itl-ms`` after that, at absolute
   deadlines, and stamps every write with ``time.perf_counter_ns`` (CLOCK_MONOTONIC
   on Linux, shared by processes of one host). The client's TTFT and ITL are
   compared with the configured values and with the server's own stamps;
   target: error < 1%.
2. Capacity: the server streams with zero delay to many concurrent requests;
   the client's streamed tokens per second of wall time and per CPU-second of
   the client process (one core) are printed; target >= 20,000 tokens/s.

Run: ``python benchmarks/calibrate_client.py`` (about 30 s).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from specsweep.analysis import formulas as M
from specsweep.files import read_jsonl
from specsweep.serve.client import run_workload

ACCURACY_TARGET = 0.01
THROUGHPUT_TARGET = 20_000


@contextmanager
def loopback(*args: str) -> Iterator[str]:
    """Start ``python -m specsweep.testing.loopback`` with ``args``; yield its base URL; stop it."""
    proc = subprocess.Popen([sys.executable, "-m", "specsweep.testing.loopback", "--port", "0", *args],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"loopback server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(10)


def _workload(**kw: Any) -> dict[str, Any]:
    w = {"endpoint": "generate", "num_prompts": 20, "input_len": 16, "output_len": 32, "concurrency": 1,
         "request_rate": None, "repeats": 1, "seed": 0, "temperature": 0.0, "request_timeout_s": 60,
         "warmup": {"window": 2, "tolerance": 0.5, "min_windows": 2, "max_requests": 4}}
    w.update(kw)
    return w


def _pct(measured: float, true: float) -> str:
    return f"{(measured - true) / true * 100:+.3f}%"


def accuracy(ttft_ms: float, itl_ms: float, n: int, endpoint: str) -> bool:
    """Part 1; returns whether both errors are within the target."""
    with loopback("--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--precise") as url, \
            tempfile.TemporaryDirectory() as tmp:
        run_workload(url, _workload(num_prompts=n, endpoint=endpoint), Path(tmp) / "w.jsonl",
                     Path(tmp) / "m.jsonl", io.StringIO())
        with urllib.request.urlopen(url + "/stamps") as resp:
            stamps = json.load(resp)
        warm, meas = read_jsonl(Path(tmp) / "w.jsonl"), read_jsonl(Path(tmp) / "m.jsonl")
    stamps = stamps[len(warm):]  # concurrency 1: server arrival order = client order
    meas.sort(key=lambda r: r["send_ns"])
    assert len(stamps) == len(meas) and all(r["status"] == "ok" for r in meas)

    c_ttft = [M.ttft_ms(r) for r in meas]
    c_itl = [g for r in meas for g in M.itl_ms(r)]
    s_ttft = [(s["chunk_ns"][0] - s["recv_ns"]) / 1e6 for s in stamps]
    s_itl = [(b - a) / 1e6 for s in stamps for a, b in zip(s["chunk_ns"], s["chunk_ns"][1:])]
    # The truth as the client should see it: client send -> server's first write (one clock).
    t_ttft = [(s["chunk_ns"][0] - r["send_ns"]) / 1e6 for r, s in zip(meas, stamps)]
    lag_us = []  # client arrival - server write, per token chunk
    for r, s in zip(meas, stamps):
        token_chunks = [t for t, k in zip(r["chunk_ns"], r["chunk_tokens"]) if k is None or k > 0]
        lag_us += [(c - w) / 1e3 for c, w in zip(token_chunks, s["chunk_ns"])]
    send_lag_us = [(s["recv_ns"] - r["send_ns"]) / 1e3 for r, s in zip(meas, stamps)]

    mean, med = statistics.fmean, statistics.median
    print(f"== accuracy, endpoint {endpoint}, concurrency 1, {len(meas)} requests x "
          f"{meas[0]['completion_tokens']} tokens (server: TTFT {ttft_ms} ms, ITL {itl_ms} ms)")
    print(f"TTFT configured {ttft_ms:.3f} ms | server-stamped (receive -> first write) {mean(s_ttft):.3f} ms | "
          f"true from client send (client send -> server first write) {mean(t_ttft):.3f} ms | "
          f"client measured {mean(c_ttft):.3f} ms (median {med(c_ttft):.3f})")
    print(f"      client error vs true-from-send {_pct(mean(c_ttft), mean(t_ttft))} (median "
          f"{_pct(med(c_ttft), med(t_ttft))}); vs configured {_pct(mean(c_ttft), ttft_ms)} (median "
          f"{_pct(med(c_ttft), ttft_ms)}): the latter includes loopback transport and the server's HTTP "
          f"handling, mean {mean(send_lag_us):.0f} us send -> server receive")
    print(f"ITL  configured {itl_ms:.3f} ms | server-stamped {mean(s_itl):.3f} ms | client measured "
          f"{mean(c_itl):.3f} ms (median {med(c_itl):.3f}, n={len(c_itl)}) | client error vs server stamps "
          f"{_pct(mean(c_itl), mean(s_itl))}, vs configured {_pct(mean(c_itl), itl_ms)}")
    lag_sorted = sorted(lag_us)
    print(f"chunk delivery lag (client arrival - server write): mean {mean(lag_us):.1f} us, median "
          f"{med(lag_us):.1f} us, p99 {lag_sorted[int(0.99 * (len(lag_sorted) - 1))]:.1f} us")
    err_ttft = abs(mean(c_ttft) - mean(t_ttft)) / mean(t_ttft)
    err_itl = abs(mean(c_itl) - itl_ms) / itl_ms
    ok = err_ttft < ACCURACY_TARGET and err_itl < ACCURACY_TARGET
    print(f"accuracy target |error| < {ACCURACY_TARGET:.0%} (TTFT vs true-from-send {err_ttft:.3%}, ITL vs "
          f"configured {err_itl:.3%}): {'PASS' if ok else 'FAIL'}; TTFT vs configured "
          f"{abs(mean(c_ttft) - ttft_ms) / ttft_ms:.3%}")
    return ok


def capacity(endpoint: str, streams: int, requests: int, output_len: int, events_per_write: int) -> bool:
    """Part 2; returns whether the client sustained the target per CPU-second."""
    with loopback("--ttft-ms", "0", "--itl-ms", "0", "--events-per-write", str(events_per_write)) as url, \
            tempfile.TemporaryDirectory() as tmp:
        w = _workload(endpoint=endpoint, num_prompts=requests, output_len=output_len, concurrency=streams,
                      warmup={"window": streams, "tolerance": 0.5, "min_windows": 2, "max_requests": 0})
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run_workload(url, w, Path(tmp) / "w.jsonl", Path(tmp) / "m.jsonl", io.StringIO())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        meas = read_jsonl(Path(tmp) / "m.jsonl")
    ok_recs = [r for r in meas if r["status"] == "ok"]
    tokens = sum(r["completion_tokens"] for r in ok_recs)
    chunks = sum(len(r["chunk_ns"]) for r in ok_recs)
    span = (max(r["end_ns"] for r in ok_recs) - min(r["send_ns"] for r in ok_recs)) / 1e9
    per_cpu = tokens / cpu
    print(f"== capacity, endpoint {endpoint}: {streams} concurrent streams, {requests} requests x {output_len} "
          f"tokens, 1 token per SSE event, {events_per_write} events per server write, "
          f"{len(ok_recs)}/{len(meas)} ok")
    print(f"streamed {tokens} tokens ({chunks} chunks) in {span:.2f} s wall: {tokens / span:,.0f} tok/s wall; "
          f"client CPU {cpu:.2f} s (of {wall:.2f} s): {per_cpu:,.0f} tok/s per client CPU-second")
    ok = per_cpu >= THROUGHPUT_TARGET
    print(f"capacity target >= {THROUGHPUT_TARGET:,} tok/s on one client core: {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=20, help="measured requests for the accuracy part")
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--capacity-requests", type=int, default=256)
    p.add_argument("--capacity-output-len", type=int, default=256)
    p.add_argument("--events-per-write", type=int, default=8)
    a = p.parse_args(argv)
    results = [accuracy(a.ttft_ms, a.itl_ms, a.requests, "generate")]
    for endpoint in ("generate", "completions"):
        results.append(capacity(endpoint, a.streams, a.capacity_requests, a.capacity_output_len, a.events_per_write))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
