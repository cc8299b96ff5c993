"""What Snakemake itself prints on the console: little by default, so that specsweep's own lines are read.

The server jobs say what happens (stage, progress, outcome; ``serve.console``)
and ``onsuccess:`` closes with a summary (``workflow.closing``). Around them
Snakemake would print a banner per job (rule, input, output, ``reason:``), a
step counter, a job table and a host header: 500 lines for the default sweep.
The shipped profile sets ``quiet: [rules, progress, host]``, Snakemake's own
option for those (``snakemake.logging.DefaultFilter``, 9.27.1: rules covers
the job banners and job errors, progress the counter and the job table, host
the header). What Snakemake prints whatever ``quiet`` says (the scheduler's
"Select jobs to execute..." and "Execute N jobs..." per job, "Building DAG of
jobs...", "Using shell: ...", a checkpoint's "DAG of jobs will be updated...",
and the log hint and elapsed time after the closing summary) is dropped here from its console handler only (its log file
under ``.snakemake/log/`` keeps every line), and only while that quietness is
in effect. After a Ctrl-C the interrupted job has said its outcome; the
lines Snakemake adds about the failed job are dropped too, so the outcome is
the last line.

``--verbose`` brings all of it back; so does a dry run (``-n`` lists its jobs),
unless ``--quiet`` was given on the command line.

A Ctrl-C says one line of its own (``Interrupts``): what was interrupted and how
to resume, at once, so that a server job's outcome line still comes after it.
In Snakemake's first seconds (the workflow being read, the DAG built) the
KeyboardInterrupt would leave Snakemake's ``main`` (it catches ``Exception``
only: snakemake/cli.py:2396-2403, 9.27.1) as a traceback; once that line is
said, the traceback is not shown.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
from collections.abc import MutableSet, Sequence
from typing import Any, TextIO

#: The Quietness names (snakemake.settings.enums.Quietness) the shipped profile sets.
PROFILE_QUIET = ("RULES", "PROGRESS", "HOST")
#: The console handler Snakemake's LoggerManager adds (snakemake/logging.py, ``_default_streamhandler``).
STREAM_HANDLER = "DefaultStreamHandler"
#: Lines Snakemake's console prints whatever ``quiet`` says (9.27.1: scheduling/job_scheduler.py:319,335;
#: workflow.py:1275,1465,1616; jobs.py:1107 and dag.py:2245, a checkpoint's; logging.py:754, ``logfile_hint``;
#: api.py:550, local execution's file system assumption).
CHATTER = re.compile(r"(Select jobs to execute\.\.\.|Execute \d+ jobs\.\.\.|Building DAG of jobs\.\.\.|"
                     r"Using shell: .*|Conda environments: ignored|DAG of jobs will be updated after completion\.|"
                     r"Updating checkpoint dependencies\.|Complete log\(s\): .*|Elapsed time: .*|"
                     r"Assuming unrestricted shared filesystem usage\.)")


class ConsoleFilter(logging.Filter):
    """Drops the chatter (``CHATTER``) from Snakemake's console, and every line once interrupted."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interrupted:
            return False
        return CHATTER.fullmatch(str(record.msg or "").strip()) is None


def _explicit_quiet(argv: Sequence[str]) -> bool:
    return any(a in ("-q", "--quiet") or a.startswith("--quiet=") for a in argv)


def quiet_console(logger: logging.Logger, quiet: MutableSet[Any] | None, verbose: bool, dryrun: bool,
                  argv: Sequence[str]) -> ConsoleFilter | None:
    """Set up Snakemake's console for this run (module doc): ``quiet`` is the run's own set of Quietness
    values (``workflow.output_settings.quiet``, shared with its log filters, so a change here is theirs);
    the filter added to its console handler, or None when Snakemake's lines are all shown."""
    if quiet is None:
        return None
    if verbose or (dryrun and not _explicit_quiet(argv)):
        for value in [q for q in quiet if q.name in PROFILE_QUIET]:
            quiet.discard(value)
        return None
    if not any(q.name == "RULES" for q in quiet):
        return None
    console = ConsoleFilter()
    for handler in logger.handlers:
        if handler.name == STREAM_HANDLER:
            handler.addFilter(console)
    _on_interrupt(console)
    return console


def _on_interrupt(console: ConsoleFilter) -> None:
    """Ctrl-C: mark the console interrupted, then do what was done before (a KeyboardInterrupt)."""
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: Any) -> None:
        console.interrupted = True
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # not the main thread: Snakemake's own handling stays
        pass


#: What a Ctrl-C says, before Snakemake's ``onstart`` (the workflow read, the DAG built) and after (jobs run).
READING = ("interrupted (Ctrl-C) while Snakemake read the workflow, before any job ran; "
           "run the same command again to start")
RUNNING = ("interrupted (Ctrl-C): the running jobs stop (a server job says its outcome); "
           "run the same command again to resume (launches measured already are kept)")


class Interrupts:
    """The user's Ctrl-C: one line on ``stream`` (``READING`` until ``started()``, then ``RUNNING``), said once, then
    what was done before (a KeyboardInterrupt); a KeyboardInterrupt that then ends the process shows no traceback."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.running = False
        self.said = False
        self.previous: Any = None
        self.previous_hook = sys.excepthook

    def install(self) -> Interrupts:
        """Ours from now on, unless SIGINT is ignored (then it stays so) or this is not the main thread."""
        previous = signal.getsignal(signal.SIGINT)
        if previous == signal.SIG_IGN:
            return self
        try:
            signal.signal(signal.SIGINT, self.handler)
        except ValueError:  # not the main thread: Snakemake's own handling stays
            return self
        self.previous = previous
        self.previous_hook, sys.excepthook = sys.excepthook, self.excepthook
        return self

    def started(self) -> None:
        """Snakemake's ``onstart``: jobs run from now on."""
        self.running = True

    def handler(self, signum: int, frame: Any) -> None:
        if not self.said:
            self.said = True
            try:
                print(f"specsweep: {RUNNING if self.running else READING}", file=self.stream, flush=True)
            except (OSError, ValueError):  # a terminal gone: the interrupt itself still goes on
                pass
        if callable(self.previous):
            self.previous(signum, frame)
        else:
            raise KeyboardInterrupt

    def excepthook(self, kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if self.said and issubclass(kind, KeyboardInterrupt):
            return  # said in one line already
        self.previous_hook(kind, value, tb)
