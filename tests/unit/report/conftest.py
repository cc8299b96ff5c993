"""The report tests' shared fixture: the figures a plot function draws, kept for inspection
(``specsweep.testing.reports.kept_figures``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from specsweep.testing.reports import kept_figures


@pytest.fixture
def drawn() -> Iterator[list[Any]]:
    """The figures the plot functions would save, kept open for inspection instead."""
    with kept_figures() as figures:
        yield figures
