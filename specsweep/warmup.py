"""Warmup: when a server counts as warmed up, by one criterion the client and the summary share.

The client warms a server up until the throughput of its last warmup windows
agrees (``windows_converged``) or a request cap is reached; the summary reports
the same windows and says whether they converged (``warmup_report``). One
module below both, so that serving does not import analysis and the two cannot
disagree about what "converged" means.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from specsweep.contracts.vocabulary import RequestStatus
from specsweep.records import NS_PER_S

WARMUP_CRITERION = (
    "converged when the last min_windows warmup windows all have a throughput and "
    "max/min - 1 <= tolerance"
)


def windows_converged(windows_tok_s: Sequence[float | None], tolerance: float, min_windows: int) -> bool:
    """True when the last ``min_windows`` windows agree: see ``WARMUP_CRITERION``."""
    if min_windows < 1 or len(windows_tok_s) < min_windows:
        return False
    last = windows_tok_s[-min_windows:]
    if any(v is None or not math.isfinite(v) or v <= 0 for v in last):
        return False
    return max(last) / min(last) - 1 <= tolerance  # type: ignore[type-var]


def warmup_windows_tok_s(records: Sequence[dict[str, Any]], window: int) -> list[float | None]:
    """Throughput of each full warmup window, tok/s (``None`` = no ok request in it).

    Records are taken in completion order (``end_ns``) and grouped by their
    ``window`` index; a window's throughput is
    ``sum(completion_tokens of its ok requests) / (end of its last request -
    max(end of the previous window's last request, first send of this window))``,
    the first window measured from the first send. Only complete windows
    (``window`` requests) count. The ``max`` leaves out a pause between two
    windows in which the client sent nothing (a side-by-side round's other
    servers measuring: ``serve.sidebyside``); without one it is the previous end.
    """
    by: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("window") is not None:
            by.setdefault(int(r["window"]), []).append(r)
    out: list[float | None] = []
    sends = [r["send_ns"] for r in records]
    prev_end = min(sends) if sends else 0
    for w in sorted(by):
        group = by[w]
        if len(group) < window:
            break
        end = max(r["end_ns"] for r in group if r["end_ns"] is not None)
        ok = [r for r in group if r["status"] == RequestStatus.OK and r.get("completion_tokens") is not None]
        span = (end - max(prev_end, min(r["send_ns"] for r in group))) / NS_PER_S
        out.append(sum(r["completion_tokens"] for r in ok) / span if ok and span > 0 else None)
        prev_end = end
    return out


def warmup_report(records: Sequence[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """The warmup section of a run (``cfg`` = the workload's ``warmup`` settings).

    ``windows_tok_s`` by ``warmup_windows_tok_s``; ``converged`` by
    ``windows_converged`` (criterion: ``WARMUP_CRITERION``);
    ``failed`` counts the warmup requests that did not end ok.
    """
    window, tol, min_windows = int(cfg["window"]), float(cfg["tolerance"]), int(cfg["min_windows"])
    tok_s = warmup_windows_tok_s(records, window)
    return {
        "requests": len(records),
        "windows_tok_s": tok_s,
        "converged": windows_converged(tok_s, tol, min_windows),
        "tolerance": tol,
        "window": window,
        "min_windows": min_windows,
        "max_requests": int(cfg["max_requests"]),
        "criterion": WARMUP_CRITERION,
        "failed": sum(r["status"] != RequestStatus.OK for r in records),
    }
