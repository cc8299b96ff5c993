"""What a server job says on the terminal Snakemake runs in (stdlib only).

The job's log (``launch-<n>/logs/benchmark_server.log``) keeps every line; the
terminal gets three a launch, so that a sweep of many launches reads in one
screen: that the server is launching (with how long it waited for the host,
when it did), when it was ready together with the warmup's result (``defer``:
a line said with the next one), and the last measured round's totals together
with the outcome. A long phase also shows a progress line
(requests done of planned, failures, output tok/s so far) when ``every_s``
seconds have passed without a line from this job. Each line names the
configuration and launch, since several jobs may share a terminal.
Snakemake runs a ``script:`` job as a child that inherits its stderr, so a
line written here reaches the console (or, under Slurm, the job's Slurm log)
without any terminal handling of our own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TextIO

#: Seconds without a line from the job after which a progress line is shown (the log gets every line).
PROGRESS_EVERY_S = 60.0


@dataclass
class _Shared:
    """What every console of one job shares (its points' too): the terminal, when it last got a line from this
    job, and a line kept to be said with the next one."""

    stream: TextIO | None
    last: float
    pending: str | None = None


class Console:
    """Prefixed lines for the terminal; ``progress`` lines only after ``every_s`` of silence (or ``final``),
    ``say`` lines always, ``defer`` lines with the next one."""

    def __init__(self, stream: TextIO | None, prefix: str, every_s: float = PROGRESS_EVERY_S,
                 clock=time.monotonic, shared: _Shared | None = None) -> None:
        self.prefix, self.every_s, self.clock = prefix, every_s, clock
        self.shared = shared if shared is not None else _Shared(stream, clock())
        self.point_name: str | None = None  # a point's console: its deferred lines name the point

    @property
    def stream(self) -> TextIO | None:
        return self.shared.stream

    def say(self, text: str) -> None:
        """One line, always shown (after a deferred one, on the same line); a terminal that went away (a closed
        pipe) ends the console, never the job: the log has every line."""
        shared = self.shared
        if shared.stream is None:
            return
        if shared.pending is not None:
            text, shared.pending = f"{shared.pending}; {text}", None
        try:
            shared.stream.write(f"specsweep {self.prefix}: {text}\n")
            shared.stream.flush()
        except OSError:
            shared.stream = None
        shared.last = self.clock()

    def defer(self, text: str) -> None:
        """A line said at the start of the next one (``ready after ...``, with the warmup's result)."""
        pending = self.shared.pending
        self.shared.pending = text if pending is None else f"{pending}; {text}"

    def progress(self, label: str, text: str, final: bool = False) -> None:
        """A progress line of the round ``label``: when ``final`` (the last measured round's totals) said with
        the job's next line (the outcome, or the next point's first), else shown when ``every_s`` have passed
        since this job's last line on the terminal."""
        if final:
            self.defer(text if self.point_name is None else f"{self.point_name}: {text}")
        elif self.clock() - self.shared.last >= self.every_s:
            self.say(text)

    def point(self, name: str) -> Console:
        """The same terminal, lines naming the workload point too."""
        console = Console(None, f"{self.prefix} {name}", self.every_s, self.clock, self.shared)
        console.point_name = name
        return console


def job_console(stream: TextIO | None, config: str, launch: str) -> Console | None:
    """The console of one launch's job, or None without a terminal stream."""
    return Console(stream, f"{config} launch-{launch}") if stream is not None else None
