"""Stage render_report: the cross-configuration table, CSV and plots.

``render``: rows, verdicts, break-even, report.md and summary.csv. ``plots``: the figures.
"""
