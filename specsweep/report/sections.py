"""report.md as an ordered list of sections, each a renderer of report.json.

``SECTIONS`` is the order of the file; each entry is ``(name, render)`` where
``render(ctx)`` returns the section's markdown ('' when it has nothing to say).
A new section is one entry here and one function beside its siblings.
"""

from __future__ import annotations

from collections.abc import Callable

from specsweep.report import answer, head, results, tables
from specsweep.report.linked import Context

Section = Callable[[Context], str]


def _title(ctx: Context) -> str:
    return "# specsweep report\n\n"


def _deploy(ctx: Context) -> str:
    return head.deploy_lines(ctx.report.data["deploy"])


def _controls(ctx: Context) -> str:
    return head.control_lines(ctx.report.data)


def _design(ctx: Context) -> str:
    return head.design_lines(ctx.report.data["design"], ctx.report.data["burn_in"])


def _external(ctx: Context) -> str:
    return head.external_lines(ctx.report.data["external"], head.speculative_baseline(ctx.report.data))


def _launch_cost(ctx: Context) -> str:
    return head.launch_lines(ctx.report.data["launches"])


def _break_even(ctx: Context) -> str:
    return head.break_even_table(ctx.report.curves, ctx.report.data["method"]["crossing"])


def _backends(ctx: Context) -> str:
    return answer.backend_section(ctx.report.rows, ctx.report.baseline)


def _cost_model(ctx: Context) -> str:
    return answer.model_section(ctx.report.rows)


def _budget(ctx: Context) -> str:
    return answer.budget_section(ctx.report.data["budget"], f"{ctx.plots_rel}/{ctx.plot_files['budget']}")


def _concurrency(ctx: Context) -> str:
    return tables.concurrency_table(ctx.report.rows)


def _grids(ctx: Context) -> str:
    return tables.best_section(ctx.report.data["grids"], ctx.best_files)


def _pairwise(ctx: Context) -> str:
    return tables.pairwise_section(ctx.report.data["pairwise"], ctx.report)


def _launches(ctx: Context) -> str:
    return tables.launch_table(ctx.report.data["launches"]["entries"])


#: report.md, in order.
SECTIONS: tuple[tuple[str, Section], ...] = (
    ("title", _title),
    ("deploy", _deploy),
    ("controls", _controls),
    ("verdicts", results.verdicts_section),
    ("design", _design),
    ("external", _external),
    ("launch cost", _launch_cost),
    ("break-even", _break_even),
    ("baseline", results.baseline_section),
    ("when speculation pays", results.when_pays_section),
    ("results", results.results_section),
    ("backends", _backends),
    ("cost model", _cost_model),
    ("budget", _budget),
    ("concurrency", _concurrency),
    ("grids", _grids),
    ("pairwise", _pairwise),
    ("launches", _launches),
    ("methods", results.methods_section),
    ("output agreement", results.agreement_section),
    ("acceptance", results.acceptance_section),
    ("profile", results.profile_section),
    ("configurations", results.configurations_section),
    ("failures", results.failures_section),
    ("warnings", results.warnings_section),
    ("absent metrics", results.absent_section),
    ("plots", results.plots_section),
)


def render_markdown(ctx: Context) -> str:
    """report.md: every section of ``SECTIONS`` in order."""
    return "".join(render(ctx) for _, render in SECTIONS)


def render_sections(ctx: Context, names: tuple[str, ...]) -> list[str]:
    """The markdown of the sections ``names`` (``SECTIONS`` names, in report.md's order): the same text."""
    unknown = set(names) - {name for name, _ in SECTIONS}
    if unknown:
        raise ValueError(f"no report.md section {sorted(unknown)}; the sections: {[n for n, _ in SECTIONS]}")
    return [render(ctx) for name, render in SECTIONS if name in names]
