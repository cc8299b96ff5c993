"""results/summary.csv: one row per configuration and workload point, from report.json's ``rows``.

Metric columns come from ``metrics.METRICS``; the comparison and answer columns are
the row's keys of the same names (``analysis.rows``, ``analysis.answer``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

from specsweep.analysis.answer import ANSWER_COLUMNS
from specsweep.analysis.metrics import METRIC_COLUMNS
from specsweep.analysis.rows import SECONDARY

#: Columns that describe a configuration and its outcome (before the metric columns).
ID_COLUMNS = ("config", "point", "concurrency", "launches", "description", "status", "expect", "stage", "reason",
              "n_ok", "n_error", "n_incomplete")
#: Columns of the comparison with the baseline (after the metric columns); the
#: baseline is the baseline's row at the same workload point.
COMPARISON_COLUMNS = ("verdict", "ratio", "ratio_ci_low", "ratio_ci_high", "threshold", "p_value", "detectable",
                      "launches_needed", "launch_sd", "launch_df", "decode_rate_ci_low", "decode_rate_ci_high",
                      *(f"{prefix}_{k}" for *_, prefix in SECONDARY for k in ("verdict", "ratio", "threshold")),
                      "break_even_accept_length", "speculation_pays", "warmup_converged", "devices",
                      "tok_s_per_gpu", "baseline_tok_s", "baseline_tok_s_per_gpu")
#: summary.csv: one row per configuration; metric columns come from ``metrics.METRICS``.
CSV_COLUMNS = (*ID_COLUMNS, *(c.name for c in METRIC_COLUMNS), *COMPARISON_COLUMNS, *ANSWER_COLUMNS)


def summary_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """The CSV text; csv writes None as an empty cell: absent stays absent, never 0."""
    out = io.StringIO()
    wr = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    wr.writeheader()
    for r in rows:
        wr.writerow(r)
    return out.getvalue()
