"""What ``results/`` already holds of the plans: each configuration's current plan, and launches missing a file.

A launch belongs to its plan (``contracts.layout``: results/<config>/plans/<plan>/launch-<launch>/).
A summary is built from the launches of the current plan; when a file of one of those
launches is deleted afterwards, Snakemake does not notice: it reruns a job for a missing
output only when the job is asked for or something below it reruns, and an up-to-date
summary whose input is gone is neither (snakemake/snakemake#1978, "Deleted intermediate
files are ignored", open; Snakemake 9.27.1 dag.py:1481-1511, ``update_needrun``, checks the
missing output of target jobs only). So every start says which launches lack a file and how to measure
them again (``stale_launch_lines``), and ``specsweep failed`` lists them beside the failed
ones (their outcome files, for ``snakemake -R``).

Imported at every Snakemake start by ``rules/common.smk``: light, a few stat calls per launch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from specsweep.contracts import layout
from specsweep.files import read_json
from specsweep.workflow.inputs import plan_key


def current_key(results: Path | str, config_name: str) -> str | None:
    """The key of the configuration's current plan (``results/<config>/plan.json``, copied there by the
    last run that summarized it), or None when there is none yet."""
    path = Path(layout.plan_path(config_name, str(results)))
    return plan_key(read_json(path)) if path.exists() else None


def missing_files(launch_dir: Path) -> list[str]:
    """The files of a launch (``layout.LAUNCH_FILES``) its directory lacks, by name."""
    return [leaf for leaf in layout.LAUNCH_FILES.values() if not (launch_dir / leaf).exists()]


def incomplete_launches(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]] = ()
                        ) -> list[tuple[str, Path, list[str]]]:
    """(configuration, launch directory, missing files) of every launch of a configuration's plan ``keys[name]``
    that lacks a file: its planned launches (``planned``: (configuration, launch id)) and every launch
    directory of that plan there is. Only launches that ran: a planned launch with no file at all is one
    not measured yet, unless its configuration's summary of this plan exists (then it was deleted)."""
    results = Path(results)
    ids: dict[str, set[str]] = {name: set() for name in keys}
    for name, lid in planned:
        if name in ids:
            ids[name].add(lid)
    out = []
    for name, key in sorted(keys.items()):
        plan_dir = Path(layout.plan_dir(name, key, str(results)))
        ids[name].update(d.name.removeprefix("launch-") for d in plan_dir.glob("launch-*") if d.is_dir())
        summarized = (results / name / "summary.json").exists() and current_key(results, name) == key
        for lid in sorted(ids[name]):
            launch = Path(layout.launch_dir(name, key, lid, str(results)))
            missing = missing_files(launch)
            if missing and (summarized or len(missing) < len(layout.LAUNCH_FILES)):
                out.append((name, launch, missing))
    return out


def stale_launch_lines(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]] = ()
                       ) -> list[str]:
    """One line per summarized launch of a current plan that lacks a file: the summary and the report built
    from it are stale, and the command that measures it again."""
    lines = []
    for name, launch, missing in incomplete_launches(results, keys, planned):
        summary = Path(results) / name / "summary.json"
        if not summary.exists() or current_key(results, name) != keys[name]:
            continue  # no summary of this plan yet: Snakemake builds it, and runs the launch first
        outcome = launch / layout.LAUNCH_FILES["outcome"]
        lines.append(f"{launch} lacks {', '.join(missing)}, and {summary} and the report were built from it: "
                     f"Snakemake does not rerun a launch whose file was deleted (snakemake#1978); measure it "
                     f"again with `-R {outcome}` (`specsweep failed` lists it)")
    return lines
