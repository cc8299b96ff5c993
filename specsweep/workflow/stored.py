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
from typing import Any, NoReturn

from specsweep.contracts import layout
from specsweep.files import read_json
from specsweep.workflow.inputs import plan_key
from specsweep.workflow.round_inputs import BURN_IN_PATH


def current_key(results: Path | str, config_name: str) -> str | None:
    """The key of the configuration's current plan (``results/<config>/plan.json``, copied there by the
    last run that summarized it), or None when there is none yet."""
    path = Path(layout.plan_path(config_name, str(results)))
    return plan_key(read_json(path)) if path.exists() else None


def missing_files(launch_dir: Path) -> list[str]:
    """The files of a launch (``layout.LAUNCH_FILES``) its directory lacks, by name."""
    return [leaf for leaf in layout.LAUNCH_FILES.values() if not (launch_dir / leaf).exists()]


def summarized_launches(results: Path | str, config_name: str) -> set[str]:
    """The launch ids the configuration's summary was built from (its ``launches``); empty without one.

    Read as plain JSON, not as ``contracts.summary.ConfigSummary``: this runs at every Snakemake start, also
    over a summary of an older format that the run is about to rebuild."""
    path = Path(layout.summary_path(config_name, str(results)))
    return {str(e["launch"]) for e in read_json(path).get("launches") or []} if path.exists() else set()


def stale_launches(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]] = ()
                   ) -> list[tuple[str, Path, list[str]]]:
    """(configuration, launch directory, missing files) of every launch that the summary of a current plan
    (``keys``: configuration -> the key of the plan the loaded config files resolve) was built from and
    that lacks a file now. Candidates are the planned launches (``planned``: (configuration, launch id))
    and every launch directory of the plan; the summary is read only for a configuration with a candidate
    (a launch not measured yet lacks every file too, and is no summary's)."""
    results = Path(results)
    ids: dict[str, set[str]] = {name: set() for name in keys}
    for name, lid in planned:
        if name in ids:
            ids[name].add(lid)
    out = []
    for name, key in sorted(keys.items()):
        if current_key(results, name) != key or not Path(layout.summary_path(name, str(results))).exists():
            continue  # no summary of this plan: Snakemake builds it, and runs a launch that lacks a file first
        plan_dir = Path(layout.plan_dir(name, key, str(results)))
        ids[name].update(d.name.removeprefix("launch-") for d in plan_dir.glob("launch-*") if d.is_dir())
        lacking = {lid: missing for lid in sorted(ids[name])
                   if (missing := missing_files(Path(layout.launch_dir(name, key, lid, str(results)))))}
        if lacking:
            used = summarized_launches(results, name)
            out += [(name, Path(layout.launch_dir(name, key, lid, str(results))), missing)
                    for lid, missing in lacking.items() if lid in used]
    return out


def stale_launch_lines(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]] = ()
                       ) -> list[str]:
    """One line per launch of ``stale_launches``: the summary and the report built from it are stale, and the
    command that measures it again."""
    lines = []
    for name, launch, missing in stale_launches(results, keys, planned):
        summary = layout.summary_path(name, str(results))
        outcome = launch / layout.LAUNCH_FILES["outcome"]
        lines.append(f"{launch} lacks {', '.join(missing)}, and {summary} and the report were built from it: "
                     f"Snakemake does not rerun a launch whose file was deleted (snakemake#1978); measure it "
                     f"again with `-R {outcome}` (`specsweep failed` lists it)")
    return lines


def launch_moved(keys: Mapping[str, str], config_name: str, launch: str, leaf: str) -> NoReturn:
    """Stop with one line (as ``round_inputs.no_launch``) for a launch's file asked for where launches were stored
    before they belonged to their plan (``results/<config>/launch-<n>/...``): where the current plan keeps it."""
    asked = f"{layout.config_dir(config_name)}/launch-{launch}/{leaf}"
    now = f"{layout.launch_dir(config_name, keys[config_name], launch)}/{leaf}"
    raise SystemExit(f"specsweep: {asked} is not a path of this workflow: a launch is stored under its plan, "
                     f"{now} for `{config_name}`'s current plan ({layout.plan_path(config_name)})")


def launch_file_asked(config_name: str, key: str, launch: str, leaf: str) -> NoReturn:
    """Stop with one line for a launch's file other than its outcome.json asked for as a target: benchmark_server
    declares the outcome.json alone, written after every other file of the launch (rules/benchmark.smk), so that
    is the target that measures the launch (and names it measured once it exists)."""
    outcome = layout.launch_file(config_name, key, launch, "outcome")
    raise SystemExit(f"specsweep: {layout.launch_dir(config_name, key, launch)}/{leaf} is written by its launch's "
                     f"job with {outcome}, the one file the job declares: ask for {outcome}")


def launch_measured(config_name: str, key: str, launch: str, results: Path | str = layout.RESULTS) -> bool:
    """Whether a launch has its outcome (measured, or failed: a result either way). Its edge from the burn-in is
    ancient() then, and only then (rules/common.smk, launch_inputs): a burn-in run again reruns no launch measured;
    and an unmeasured one must be reached through a plain edge, since Snakemake 9.27.1 masks every job below a
    job that must run (the burn-in, whose params changed) and then walks down from it skipping ancient edges
    (dag.py:1632-1668): a planned launch due only because its round is new (``launches`` raised, a race run in
    the results of a sweep, an outcome deleted to measure it again) then never ran, with the burn-in alone."""
    return Path(layout.launch_file(config_name, key, launch, "outcome", str(results))).exists()


def unmeasured(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]]) -> list[str]:
    """The planned launches of the current plans that have no outcome yet (``<config> launch-<id>``): what a
    run would measure now."""
    return [f"{name} launch-{launch}" for name, launch in planned
            if name in keys and not launch_measured(name, keys[name], launch, results)]


def burn_in_for(results: Path | str, keys: Mapping[str, str], planned: Iterable[tuple[str, str]],
                started_at: float) -> Any:
    """What the burn-in runs for (its params' ``for``, ``round_inputs.burn_in_params``). The launches wait for its
    record through an ancient() edge, so that a burn-in run again reruns none of the launches measured
    already (its record a temp() file, every edit reran every launch of the planned rounds: the missing file
    made each of them wait for a new one). It runs again, before them, in an invocation that measures
    launches (``unmeasured``: this invocation's start makes the params new); when none is to be measured,
    the params are those its record holds (None before any), and it does not run."""
    due = unmeasured(results, keys, planned)
    if due:
        return {"launches": due, "invocation": round(started_at, 3)}
    record = Path(results) / Path(BURN_IN_PATH).relative_to(layout.RESULTS)
    return read_json(record).get("for") if record.is_file() else None
