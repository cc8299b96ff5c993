"""The server job's lines on the terminal: prefixed, progress rate-limited, each round's last line always."""

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


def test_progress_reaches_the_terminal_at_most_every_interval_and_always_at_the_end_of_a_round():
    clock, term, log = _Clock(), io.StringIO(), io.StringIO()
    console = Console(term, "eagle3-shm launch-1", every_s=5.0, clock=clock)
    progress = _Progress(log, "measured 1/2", 10, every=1, console=console)
    for i in range(10):
        clock.t = i * 2.0  # a request every 2 s: 0, 2, 4, ... 18
        progress.update(_record(status="error" if i == 3 else "ok"))
    assert len(log.getvalue().splitlines()) == 10  # the log keeps every line
    shown = term.getvalue().splitlines()
    # first at once (t=0), then t=6, 12, 18 (>= 5 s apart), and the last (10/10) is t=18 itself
    assert [line.split("] ")[1].split(" requests")[0] for line in shown] == ["1/10", "4/10", "7/10", "10/10"]
    assert all(line.startswith("specsweep eagle3-shm launch-1: [measured 1/2] ") for line in shown)
    assert "10/10 requests, 1 failed" in shown[-1] and "output tok/s running" in shown[-1]


def test_each_round_has_its_own_interval_and_say_is_never_limited():
    clock, term = _Clock(), io.StringIO()
    console = Console(term, "nospec launch-aa", clock=clock)
    console.progress("measured 1/2", "a")
    console.progress("measured 2/2", "b")  # another round: shown at once
    console.progress("measured 2/2", "c")  # same round, no time passed: dropped
    console.say("outcome: ok")
    console.point("c2").say("ready")
    assert term.getvalue().splitlines() == [
        "specsweep nospec launch-aa: a", "specsweep nospec launch-aa: b", "specsweep nospec launch-aa: outcome: ok",
        "specsweep nospec launch-aa c2: ready"]


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
