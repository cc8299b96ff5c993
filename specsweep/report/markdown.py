"""Markdown table lines, written one way for every table of the report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The flag of a configuration whose greedy outputs differ from the baseline's (report table and plots).
OUTPUTS_DIFFER = "outputs differ from the baseline"


def table_head(head: Sequence[str]) -> str:
    """A table's header line and its separator line."""
    return "| " + " | ".join(head) + " |\n" + "|" + "---|" * len(head) + "\n"


def table_row(cells: Sequence[Any]) -> str:
    """One table line; a ``|`` inside a cell is escaped, so it cannot split the cell."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |\n"


def f(v: float | None, fmt: str = "{:.1f}") -> str:
    """A number, or ``n/a`` for an absent one (never a zero)."""
    return "n/a" if v is None else fmt.format(v)


def pct(v: float | None) -> str:
    """A fraction as a percentage: ``0.053`` -> ``5.3 %``."""
    return "n/a" if v is None else f"{v * 100:.1f} %"


def cpu_share(v: float | None) -> str:
    """A CPU share (cores) as a percentage of one core, two decimals (an idle server's is a few hundredths)."""
    return "n/a" if v is None else f"{v * 100:.2f} %"


def ratio_pct(ratio: float) -> str:
    """A ratio as a signed difference: ``1.053`` -> ``+5.3 %``."""
    return f"{(ratio - 1) * 100:+.1f} %"


def verdict_text(v: Mapping[str, Any] | None, missing: str) -> str:
    """A verdict with its ratio and interval, ``faster (x1.053 [1.021, 1.086])``; ``missing`` when there is none."""
    if not v:
        return missing
    if "ratio" not in v:
        return v["verdict"]
    lo, hi = v["ratio_ci"]
    return f"{v['verdict']} (x{v['ratio']:.3f} [{lo:.3f}, {hi:.3f}])"
