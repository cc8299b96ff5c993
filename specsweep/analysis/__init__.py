"""Stage summarize_config: metrics, statistics and the per-configuration summary.

``metrics``: one function per metric and the ``METRICS`` table. ``stats``:
percentiles, bootstrap intervals, verdicts. ``summary``: summary.json.
Nothing here imports serving code: analysis reads only the files a run left.
"""
