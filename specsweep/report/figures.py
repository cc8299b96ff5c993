"""The figure registry: every figure of results/plots, its file, how it is drawn from report.json and
its caption (the HTML report's, ``report.captions``).

A figure is written only when it has data; ``draw_figures`` returns, for each
figure, None when it was drawn, else why there was nothing to draw (report.md
lists both).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specsweep.contracts.acceptance import SIMULATE_ACC_LEN
from specsweep.contracts.vocabulary import Status
from specsweep.report import plots, plots_parts, race
from specsweep.report.linked import Linked


@dataclass(frozen=True)
class Figure:
    """One figure: ``key`` (its name in report.md and the HTML report), its file under ``results/plots``,
    ``draw(report, path)`` (None when drawn, else why not) and its caption."""

    key: str
    file: str
    draw: Callable[[Linked, Path], str | None]
    caption: str


def _base_ok(report: Linked) -> dict | None:
    return report.base if report.base is not None and report.base["status"] == Status.OK else None


FIGURES: tuple[Figure, ...] = (
    Figure("tok_s", "tok_s.png", lambda r, p: plots.plot_tok_s(r.rows, _base_ok(r), p),
           "The decode rate of each configuration (per request: tokens after the first / decode time; a "
           "configuration's rate is the geometric mean over its launches of each launch's median), with its 95 % "
           "Student-t interval under the launch-to-launch variance pooled at the point, the baseline's as a dashed "
           "line. Colour = the decode verdict against the baseline (faster, slower, no significant difference, "
           "insufficient samples; the launch the unit, the round a block); hatched bars are "
           "configurations whose status is fallback (the requested variant did not run) or failed."),
    Figure("cycle_time", "cycle_time.png", lambda r, p: plots.plot_cycle_time(r.rows, p),
           "Time per speculation cycle (the draft steps plus one verify). Stacked bars: the engine's own timing "
           "per cycle, split into draft, verify compute and verify communication (all-reduce), where the engine "
           "reports it. Diamond: the cycle time the client measured (decode time / spec_verify_ct, decode time = "
           "last token chunk minus first token chunk). Configurations without speculation have no cycle and are "
           "not shown."),
    Figure("accept_length", "accept_length.png", lambda r, p: plots.plot_accept_length(r.rows, _base_ok(r), p),
           "The decode rate (geometric mean of launch medians) against accept length for each speculative "
           "configuration, one panel per workload point. The dotted line through each point is accept_length / "
           "cycle_time at that configuration's measured cycle time; it crosses the baseline's decode rate (dashed) "
           "at the break-even accept length, marked x: cycle_time_s x baseline_tok_s. Speculation pays only above "
           "the baseline line, i.e. when accept_length > cycle_time_s x baseline_tok_s."),
    Figure("break_even", "break_even.png", lambda r, p: plots.plot_break_even(r.curves, p),
           f"The decode rate against accept length for configurations that differ only in {SIMULATE_ACC_LEN} "
           "(one line per backend group, one panel per workload point), with 95 % intervals; the baseline's decode "
           "rate as a dashed line, the measured crossing (dotted, its 95 % bootstrap interval shaded) and the "
           "computed break-even (cycle time x baseline tok/s, x)."),
    Figure("pareto", "pareto.png", lambda r, p: plots.plot_pareto(r.rows, r.baseline, p),
           "Throughput per user (the decode rate the verdicts judge: per request, tokens after the first / decode "
           "time, the geometric mean of launch medians) against throughput per GPU (aggregate output tok/s / GPUs; "
           "TP ranks on a CPU run) at every workload point of every configuration, with the Pareto frontier."),
    Figure("acceptance", "acceptance.png", lambda r, p: plots_parts.plot_acceptance(r.rows, p),
           "Acceptance per draft position, for each speculative configuration whose engine reports it "
           "(spec_correct_drafts_histogram), one column per workload point. Top: the share of verify steps that "
           "accepted exactly 0, 1, 2, ... draft tokens (the bonus token excluded). Bottom: the acceptance rate of "
           "draft position p, the share of verify steps that accepted at least p draft tokens. One colour per "
           "configuration, the same in every panel, and a marker of its own, the lines offset a little so that "
           "equal rates stay visible; a configuration whose greedy outputs differ from the baseline's is outlined "
           f"and labelled in red. Where {SIMULATE_ACC_LEN} fixed the accept length the title says so: the "
           "acceptance is simulated, not a draft model's."),
    Figure("comm_split", "comm_split.png", lambda r, p: plots_parts.plot_comm_split(r.rows, p),
           "The verify forward split into compute and communication, per configuration. Solid bars: the engine's "
           "own timing per cycle (measured repeats; only the reference engine reports one). Hatched bars: the "
           "PyTorch profiler trace of the profiling stage (rank 0, the profiled requests): compute, communication "
           "and idle time, with the trace's all-reduces per verify and the implementation its kernel names show. "
           "Black tick: the all-reduce micro-benchmark's latency at the verify's message size x the trace's "
           "all-reduces per verify. Only configurations with profile.enabled have a trace bar; the title names the "
           "sources drawn."),
    Figure("budget", "budget.png", lambda r, p: plots_parts.plot_budget(r.data["budget"], p),
           "The communication budget, per workload point. Each line is one speculative configuration's cost "
           "model: the accept length it needs to equal the baseline's decode rate B, against the latency of one "
           "all-reduce at the verify's message size, B x (draft + verify compute + all-reduces x latency). Above "
           "a line speculation pays. Each configuration is placed at its micro-benchmark latency and measured "
           "accept length (filled: it pays), and as an x at the latency of the same call timed inside the server; "
           "the dotted line is its budget. Where no configuration all-reduces (TP=1) the figure says that "
           "communication is absent and shows the accept length needed beside the measured one."),
    Figure("race", "race.png", race.plot_race,
           "The race (rounds.mode: race): after each judged round, every configuration still racing as its decode "
           "rate relative to the best of that round (the verdicts' model, the round a block), with its Holm-step "
           "95 % interval from the first round that drops (a planned round before it has its point only); a "
           "configuration called slower than the best is dropped (its line ends with an x in that round). The "
           "shaded band is within smallest_effect of the best: survivors all inside it tie. Green: the winner (or "
           "the best so far when the budget ended the race)."),
)

#: File names under ``plots_dir`` by figure key (the Snakefile declares the directory).
PLOT_FILES = {f.key: f.file for f in FIGURES}


def draw_figures(report: Linked, plots_dir: Path) -> dict[str, str | None]:
    """Draw every figure that has data under ``plots_dir``; each figure's reason it was not drawn, or None."""
    plots_dir.mkdir(parents=True, exist_ok=True)  # the rule's output, even when no figure has data
    return {f.key: f.draw(report, plots_dir / f.file) for f in FIGURES}
