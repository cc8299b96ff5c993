"""The server job's lines on the terminal: prefixed, three a launch, progress only after a long quiet."""

from __future__ import annotations

import io

from specsweep.serve.client import _Progress
from specsweep.serve.console import Console, job_console


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _record(tokens: int = 4, status: str = "ok") -> dict:
    return {"status": status, "completion_tokens": tokens if status == "ok" else None}


def test_a_round_is_silent_on_the_terminal_until_a_long_quiet_and_the_last_round_ends_with_its_totals():
    clock, term, log = _Clock(), io.StringIO(), io.StringIO()
    console = Console(term, "eagle3-shm launch-1", every_s=30.0, clock=clock)  # (the default is 60 s)
    first = _Progress(log, "measured 1/2", 10, every=1, console=console)
    for i in range(10):
        clock.t = i * 2.0  # a request every 2 s: 0 .. 18 s, never 30 s without a line
        first.update(_record())
    assert term.getvalue() == ""  # not the last round: its last line is in the log only
    last = _Progress(log, "measured 2/2", 10, every=1, console=console, final_shown=True)
    for i in range(10):
        clock.t = 20.0 + i * 2.0  # 20 .. 38 s: 30 s without a line at t=30
        last.update(_record(status="error" if i == 3 else "ok"))
    assert len(log.getvalue().splitlines()) == 20  # the log keeps every line
    shown = term.getvalue().splitlines()
    assert [line.split("] ")[1].split(" requests")[0] for line in shown] == ["6/10"]  # the totals: with the outcome
    console.say("outcome: ok")
    shown = term.getvalue().splitlines()
    assert all(line.startswith("specsweep eagle3-shm launch-1: [measured 2/2] ") for line in shown)
    assert "10/10 requests, 1 failed" in shown[-1] and "output tok/s running" in shown[-1]
    assert shown[-1].endswith("; outcome: ok") and len(shown) == 2


def test_a_deferred_line_is_said_with_the_next_and_say_is_never_limited():
    clock, term = _Clock(), io.StringIO()
    console = Console(term, "nospec launch-aa", clock=clock)
    console.say("launching")
    console.defer("ready after 8.9 s")
    console.progress("measured 1/2", "a")  # no silence: dropped
    console.say("[warmup] steady after 8 requests")
    console.progress("measured 2/2", "b", final=True)
    console.say("outcome: ok")
    point = console.point("c2")
    point.say("ready")
    point.progress("measured 1/1", "c", final=True)
    console.say("outcome: ok")
    assert term.getvalue().splitlines() == [
        "specsweep nospec launch-aa: launching",
        "specsweep nospec launch-aa: ready after 8.9 s; [warmup] steady after 8 requests",
        "specsweep nospec launch-aa: b; outcome: ok",
        "specsweep nospec launch-aa c2: ready",
        "specsweep nospec launch-aa: c2: c; outcome: ok"]  # a point's totals name the point


def test_no_terminal_no_console():
    assert job_console(None, "nospec", "1") is None
    assert job_console(io.StringIO(), "nospec", "2").prefix == "nospec launch-2"


def test_a_terminal_that_went_away_ends_the_console_not_the_job():
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    console = Console(Closed(), "nospec launch-1")
    console.say("outcome: ok")  # no exception
    assert console.stream is None
    console.progress("measured 1/1", "1/1 requests", final=True)
