"""Markdown table lines, written one way for every table of the report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table_head(head: Sequence[str]) -> str:
    """A table's header line and its separator line."""
    return "| " + " | ".join(head) + " |\n" + "|" + "---|" * len(head) + "\n"


def table_row(cells: Sequence[Any]) -> str:
    """One table line; a ``|`` inside a cell is escaped, so it cannot split the cell."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |\n"
