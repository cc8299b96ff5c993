"""What a server job says on the terminal Snakemake runs in (stdlib only).

The job's log (``launch-<n>/logs/benchmark_server.log``) keeps every line; the
terminal gets a few: the stage (launching, ready, each point), the running
progress of warmup and of each measured round (requests done of planned,
failures, output tok/s so far), at most one progress line every
``every_s`` seconds plus the last of each round, and the outcome. Each line
names the configuration and launch, since several jobs may share a terminal.
Snakemake runs a ``script:`` job as a child that inherits its stderr, so a
line written here reaches the console (or, under Slurm, the job's Slurm log)
without any terminal handling of our own.
"""

from __future__ import annotations

import time
from typing import TextIO

#: Seconds between two progress lines of one round on the terminal (the log gets every line).
PROGRESS_EVERY_S = 5.0


class Console:
    """Prefixed lines for the terminal; ``progress`` lines rate-limited, ``say`` lines always."""

    def __init__(self, stream: TextIO | None, prefix: str, every_s: float = PROGRESS_EVERY_S,
                 clock=time.monotonic) -> None:
        self.stream, self.prefix, self.every_s, self.clock = stream, prefix, every_s, clock
        self._last: dict[str, float] = {}

    def say(self, text: str) -> None:
        """One line, always shown; a terminal that went away (a closed pipe) ends the console, never the job:
        the log has every line."""
        if self.stream is None:
            return
        try:
            self.stream.write(f"specsweep {self.prefix}: {text}\n")
            self.stream.flush()
        except OSError:
            self.stream = None

    def progress(self, label: str, text: str, final: bool = False) -> None:
        """A progress line of the round ``label``: shown when ``final`` (the round's last) or when
        ``every_s`` have passed since this round's last shown line (the first is shown at once)."""
        now = self.clock()
        last = self._last.get(label)
        if final or last is None or now - last >= self.every_s:
            self._last[label] = now
            self.say(text)

    def point(self, name: str) -> "Console":
        """The same terminal, lines naming the workload point too."""
        return Console(self.stream, f"{self.prefix} {name}", self.every_s, self.clock)


def job_console(stream: TextIO | None, config: str, launch: str) -> Console | None:
    """The console of one launch's job, or None without a terminal stream."""
    return Console(stream, f"{config} launch-{launch}") if stream is not None else None
