"""The ground floor: what every stage agrees on, importing nothing of the package above it.

``vocabulary``: the words a result is told in (statuses, stages, reasons) and the one
``Failure`` a stage raises; ``layout``: where each result lives under ``results/``;
``plan``: the resolved launch plan as one typed record, with its format history;
``summary``: a configuration's summary.json as typed records, with its format history;
``endpoints``: the endpoint registry (each endpoint's path, prompt form, streaming, model name);
``rounds``: the round plan (a round's launches in run order, measured side by side or one at a time).
"""
