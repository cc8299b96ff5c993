"""A configuration's summary, ``results/<config>/summary.json``, as typed, frozen records.

``summarize_config`` builds it (``analysis.launches.build_config_summary``: one
``PointSummary`` per workload point, its launches pooled) and writes
``ConfigSummary.to_dict()`` with the one JSON writer (``files.write_json_atomic``;
this floor imports nothing of the package above it). Every stage that reads a
summary file loads it here (``ConfigSummary.load``: ``analyze_sweep``, the
tests); a round's judgement builds the same record in memory. A file of another
format version is refused with one line that names the file, its version, the
one this checkout reads and how to rebuild it. (``workflow.stored`` reads only
a summary's launch ids, of any version: it runs at every Snakemake start,
before an older summary is rebuilt.)

``from_dict`` / ``to_dict`` are exact inverses for a summary of this format, so a
summary read and written again is the same bytes. What is typed and what stays a
mapping (the seam): the records hold the keys every reader asks for by name
(status, stage, reason, the launches as they ran, each point's launches); the
sections with a shape of their own, documented and built elsewhere, stay read-only
mappings, copied in and out:

* ``plan``: plan.json's object as the summary embeds it (a point's with that
  point's workload); ``contracts.plan.Plan.from_dict`` types it where a stage needs it;
* ``metrics``: ``analysis.compute.compute_metrics`` (``analysis.metrics.METRICS``:
  each metric's value, unit and definition; ``absent`` with reasons; ``samples``);
* ``warmup`` (``warmup.warmup_report``), ``provenance`` (``serve.provenance``,
  with ``launch``: the rest of launch.json), ``variant`` (the engine's log
  evidence), ``agreement``, ``host`` (``serve.guard``), ``expected_failure``,
  ``profile`` (``analysis.profiling.profile_section``), ``server`` (runtime
  external only: what the server's ``/server_info`` says it runs).

Shape of the file (``SUMMARY_FORMAT_VERSION``)::

    {"format_version": 8, "config": name, "status": worst point status, "plan": {...},
     "launches": [<LaunchSection>], "points": [<PointSummary>]}
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsweep.contracts.vocabulary import Status

# Format history of results/<config>/summary.json:
#   1  one launch at one point: config, run_id, status, stage, reason, detail, log_tail, engine, image, plan,
#      metrics, warmup, provenance, variant, speculative_algorithm, warnings.
#   2  + agreement; metrics prompt_tokens, accept_histogram, accept_rate_by_position,
#      output_match_share, output_common_prefix_tokens; status failed/outputs_differ.
#   3  + run_id (the server job's), host (load and other servers seen), status "contaminated".
#   4  + expected_failure; variant evidence gains shadowed and failures.
#   5  + "profile" (the profiling stages; null when off), profile-kind metrics, trace evidence
#      in variant.fell_back.
#   6  points x launches (analysis.launches): {"format_version", "config",
#      "status", "plan", "launches": [...], "points": [<the shape of 5 without
#      format_version, plus point, workload, launches>]}; a point pooled over
#      several launches has run_id null (each launch's run_id is in its launches);
#      "profile" is the first regular launch's, in its first point only.
#   7  verdicts on decode: metric decode_rate (geometric mean over launches of each launch's median
#      decode tok/s: the verdicts' statistic and the baseline tok/s); ttft_ms gains median_ci,
#      per_repeat_median and its samples (with their launches), for its own verdict; launch entries
#      gain ttft_ms_median.
#      (runtime external adds "server" to a point, only in such summaries: what the running server's
#      /server_info says it runs; the other summaries read as before, so the version stays.)
#   8  + metrics target_forward_ms and target_forward_comm_ms (per target forward, with or without
#      speculation: the cost model's no-speculation step).
#      (plan format 5 adds facts to the plan each summary embeds; every other byte is as before, so the
#      version stays.)
#      (the launch sections gained host_wait_s and server_s: the wait for the host apart from the
#      server's own time; a summary without them is refused and rebuilt from its launches.)
#      (the typed records ConfigSummary, PointSummary, LaunchSection, PointLaunch, here; the file is
#      byte for byte as before, and only this format is read: a summary of an older one is rebuilt.)
SUMMARY_FORMAT_VERSION = 8

#: How to rebuild a summary of another format (its launches are kept; no server runs again).
REBUILD = "rebuild it from its launches: snakemake --cores 1 all --forcerun summarize_config"


class SummaryError(ValueError):
    """A summary that cannot be read: the message names the file (or the part of it), the key and what is
    allowed."""


def _values(cls: type, data: Any, where: str, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``cls``'s fields from ``data`` (deep copies), refused with the keys missing or unknown."""
    names = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(data, Mapping):
        raise SummaryError(f"{where}: expected a JSON object with keys {names}, got {type(data).__name__}")
    missing = [n for n in names if n not in data and n not in optional]
    unknown = sorted(set(data) - set(names))
    if missing or unknown:
        raise SummaryError(f"{where}: " + "; ".join(p for p in (
            f"missing keys {missing}" if missing else "", f"unknown keys {unknown}" if unknown else "") if p)
            + f"; {REBUILD}")
    return {n: copy.deepcopy(data[n]) for n in names if n in data}


def _status(value: Any, where: str) -> Status:
    if value not in tuple(Status):
        raise SummaryError(f"{where}: status {value!r}: allowed {[s.value for s in Status]}")
    return Status(value)


def _out(record: Any, skip_none: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's fields as fresh copies (tuples as lists), leaving out the ``skip_none`` fields that are None,
    keys sorted as the file has them (``files.write_json_atomic`` sorts): a mapping of a record built in memory
    reads as one loaded from its file."""
    out: dict[str, Any] = {}
    for name in sorted(f.name for f in dataclasses.fields(record)):
        value = getattr(record, name)
        if name in skip_none and value is None:
            continue
        out[name] = list(value) if isinstance(value, tuple) else copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class LaunchSection:
    """One server job of the configuration as it ran (summary.json's ``launches``): its outcome and times.

    ``wall_s`` = ``ended_at`` - ``started_at``; ``host_wait_s`` the job's waits for the host (the host lock,
    the quiet-host wait; None where launch.json records neither); ``server_s`` = ``wall_s`` - ``host_wait_s``.
    """

    launch: str
    control: bool  # the A/A control (contracts.layout.CONTROL)
    run_id: str | None
    status: str | None  # outcome.json's (a Status word), None when the job left none
    stage: str | None
    reason: str | None
    started_at: float | None
    ended_at: float | None
    wall_s: float | None
    host_wait_s: float | None
    server_s: float | None
    ready_s: float | None
    # a launch of a side-by-side round only (analysis.launches.side_by_side: its partners up, windows, their CPU
    # share, its first window); absent from the file for a launch measured alone
    side_by_side: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Any, where: str = "launch") -> LaunchSection:
        return cls(**_values(cls, data, where, optional=("side_by_side",)))

    def to_dict(self) -> dict[str, Any]:
        return _out(self, skip_none=("side_by_side",))


@dataclass(frozen=True)
class PointLaunch:
    """One launch at one point (a point's ``launches``): its status and the medians the verdicts pool."""

    launch: str
    control: bool
    status: Status
    stage: str | None
    reason: str | None
    run_id: str | None
    n_ok: int
    tok_s_median: float | None  # end-to-end output tok/s, median over its ok requests
    decode_tok_s_median: float | None
    ttft_ms_median: float | None
    per_repeat_median: tuple[float, ...]
    repeats: tuple[int, ...]  # its repeats, numbered after the earlier launches'

    @classmethod
    def from_dict(cls, data: Any, where: str = "point launch") -> PointLaunch:
        values = _values(cls, data, where)
        values.update(status=_status(values["status"], where), per_repeat_median=tuple(values["per_repeat_median"]),
                      repeats=tuple(values["repeats"]))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return _out(self)


@dataclass(frozen=True)
class PointSummary:
    """One workload point of a configuration, its launches pooled (``analysis.launches.summarize_point``;
    the status rules: ``analysis.summary``). The mappings are the sections of the module docstring."""

    config: str
    point: str
    workload: Mapping[str, Any]
    run_id: str | None  # the one launch's run; None when several launches are pooled
    status: Status
    stage: str | None
    reason: str | None
    detail: str | None
    log_tail: str | None
    engine: str | None
    image: str | None
    plan: Mapping[str, Any]
    speculative_algorithm: str | None
    metrics: Mapping[str, Any]
    warmup: Mapping[str, Any]
    provenance: Mapping[str, Any]
    variant: Mapping[str, Any] | None
    warnings: tuple[str, ...]
    agreement: Mapping[str, Any]
    host: Mapping[str, Any] | None
    expected_failure: Mapping[str, Any] | None
    profile: Mapping[str, Any] | None
    launches: tuple[PointLaunch, ...]
    server: Mapping[str, Any] | None = None  # runtime external only (absent from the file otherwise)

    @classmethod
    def from_dict(cls, data: Any, where: str = "point") -> PointSummary:
        values = _values(cls, data, where, optional=("server",))
        values.update(status=_status(values["status"], where), warnings=tuple(values["warnings"]),
                      launches=tuple(PointLaunch.from_dict(e, f"{where}: launches[{k}]")
                                     for k, e in enumerate(values["launches"])))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = _out(self, skip_none=("server",))
        out["launches"] = [e.to_dict() for e in self.launches]
        return out


@dataclass(frozen=True)
class ConfigSummary:
    """summary.json of one configuration (module docstring); ``SUMMARY_FORMAT_VERSION``."""

    config: str
    status: Status  # the worst of its points' (vocabulary.STATUS_ORDER)
    plan: Mapping[str, Any]
    launches: tuple[LaunchSection, ...]  # in run order
    points: tuple[PointSummary, ...]  # in the plan's order
    format_version: int = SUMMARY_FORMAT_VERSION

    @classmethod
    def from_dict(cls, data: Any, where: str = "summary") -> ConfigSummary:
        """The summary a mapping holds; ``SummaryError`` names ``where``, the version or the keys at fault."""
        version = data.get("format_version") if isinstance(data, Mapping) else None
        if version != SUMMARY_FORMAT_VERSION:
            raise SummaryError(f"{where}: summary format_version {version!r}, this checkout reads "
                               f"{SUMMARY_FORMAT_VERSION}; {REBUILD}")
        values = _values(cls, data, where)
        values.update(status=_status(values["status"], where),
                      launches=tuple(LaunchSection.from_dict(e, f"{where}: launches[{k}]")
                                     for k, e in enumerate(values["launches"])),
                      points=tuple(PointSummary.from_dict(p, f"{where}: points[{k}]")
                                   for k, p in enumerate(values["points"])))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """summary.json's object (``from_dict``'s inverse), as fresh copies."""
        out = _out(self)
        out["launches"] = [e.to_dict() for e in self.launches]
        out["points"] = [p.to_dict() for p in self.points]
        return out

    @classmethod
    def from_json(cls, text: str, where: str = "summary") -> ConfigSummary:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SummaryError(f"{where}: not a JSON summary ({exc}); {REBUILD}") from None
        return cls.from_dict(data, where)

    @classmethod
    def load(cls, path: Path | str) -> ConfigSummary:
        """``results/<config>/summary.json``, refused with the file named when it is of another format."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SummaryError(f"{path}: cannot read the summary ({exc.strerror})") from None
        return cls.from_json(text, str(path))

    def point(self, name: str) -> PointSummary:
        """The point named ``name``; ``SummaryError`` lists the points there are."""
        for p in self.points:
            if p.point == name:
                return p
        raise SummaryError(f"summary of {self.config!r}: no point {name!r} (points: {[p.point for p in self.points]})")
