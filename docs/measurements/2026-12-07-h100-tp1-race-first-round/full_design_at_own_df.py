"""The full design of every race on record, recomputed at that design's own degrees of freedom.

report.json 3 counted a race's full design (``race.launches.full_design``) with the t quantiles at the race's
own degrees of freedom, which are fewer than the full design's; report.json 4 counts it at the design's
((C - 1)(n - 1): ``analysis.race.full_design_df``). This reads each stored report.json (format 3 or 4) and
prints both, with the launches the race spent. Run from the repository root:

    python3 docs/measurements/2026-12-07-h100-tp1-race-first-round/full_design_at_own_df.py docs/measurements/*/report.json docs/measurements/*/*/report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specsweep.analysis.race import full_design_df
from specsweep.analysis.stats import launches_needed_in

for path in sys.argv[1:]:
    report = json.loads(Path(path).read_text())
    race = report.get("race")
    if not race:
        continue
    cost = race["launches"]
    grid = len(cost["per_configuration"]) + len(cost.get("screened_out") or [])
    noise = report["verdicts"][0]["noise"]
    planned = next((s["round"] for s in race["rounds"] if s.get("dropping")), race["rounds"][-1]["round"])
    aa = cost["full_design"] - grid * max(cost["launches_needed"], planned)  # the A/A control: 1 or 0
    needed = launches_needed_in(noise["var"], cost["smallest_effect"], lambda n: full_design_df(grid, n), cost["level"])
    full = grid * max(needed, planned) + aa
    print(f"{path}: format {report['format_version']}, effect {cost['smallest_effect']:.1%}, launch SD "
          f"{noise['sd'] * 100:.2f} % ({noise['df']} df); spent {cost['spent']}; as recorded {cost['launches_needed']} "
          f"a configuration, {cost['full_design']} ({cost['spent'] / cost['full_design']:.0%}); at the design's own "
          f"df {needed}, {full} ({cost['spent'] / full:.0%})")
