"""Stage render_report: the views of results/report.json (analysis.sweep writes it).

``render``: the stage; ``sections``: report.md, in order; ``figures``: the figure
registry; ``summary_csv``: the CSV writer; ``export``: each grid's files.
"""
