"""Job adapters, one per rule with a script: file in, file out.

Each ``scripts/<rule>.py`` reads the ``snakemake`` object and calls one of
these; the real work is done by the stage packages they call. Paths follow
the path grammar of ``results/`` at the top of the Snakefile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from specsweep.analysis.launches import LaunchFiles, build_config_summary
from specsweep.analysis.profiling import profile_section
from specsweep.analysis.summary import BaselineRun
from specsweep.analysis.sweep import analyze_sweep, load_report, write_report
from specsweep.contracts.layout import LAUNCH_FILES, launch_id_of, launch_paths
from specsweep.contracts.plan import Plan
from specsweep.contracts.rounds import RoundPlanError
from specsweep.contracts.summary import ConfigSummary, SummaryError
from specsweep.contracts.vocabulary import Status
from specsweep.engines.preflight import PreflightResult
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import (
    ParserEnvError,
    build_log,
    ensure_parser_env,
    parser_env_ready,
    parser_env_size,
    parser_prefix,
)
from specsweep.files import read_json, read_jsonl, write_bytes_atomic, write_json_atomic
from specsweep.images.build import build_image, state_path_for
from specsweep.images.cli import DockerError
from specsweep.images.registry import push_image
from specsweep.records import EXTERNAL_RUNTIME, MixedRunsError, check_one_run, run_id_of_log
from specsweep.report.render import HtmlPages, render_report
from specsweep.serve.job import JobHost, JobPaths, run_config
from specsweep.serve.launch import nccl_logs
from specsweep.workflow.stored import missing_files


@contextlib.contextmanager
def job_log(path: str | Path, mode: str = "w", buffering: int = -1) -> Iterator[TextIO]:
    """The job's log file, open as ``sys.stderr`` for the length of the block; every script runs in one.

    An exception leaving the block is written to the log (its traceback) before the file
    closes, and ``sys.stderr`` is given back first, so the job still fails with the same
    exception and Snakemake's console shows it too. Setting ``sys.stderr = log`` inside a
    plain ``with open(...)`` lost both: the traceback was printed after the file had
    closed. A ``SystemExit`` is a chosen end, not a crash: no traceback, only its message.
    Nor is a Ctrl-C (or SIGTERM in a server job, ``serve.job.Interrupted``): the job has torn
    down and said its outcome; one line in the log, and the job fails (exit status 130) without a
    traceback on the console.
    """
    saved = sys.stderr
    with open(path, mode, buffering=buffering) as log:
        sys.stderr = log
        try:
            yield log
        except SystemExit as exc:
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=log)
            raise
        except KeyboardInterrupt as exc:
            print(f"interrupted ({str(exc) or 'SIGINT'}): the job stopped here", file=log)
            raise SystemExit(130) from None
        except BaseException:
            traceback.print_exc(file=log)
            raise
        finally:
            sys.stderr = saved


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def paths_of(value: str | Sequence[str]) -> list[str]:
    """A named Snakemake input as a list of paths (one path arrives as a str, none as an empty list)."""
    return [value] if isinstance(value, str) else list(value)


def write_plan(plan_json: str, out_path: str, log: TextIO) -> None:
    """resolve_plan: write the plan Snakemake passed as canonical JSON params (read as a ``Plan``, so that a
    params string that is no plan of this format fails here, not in a later job)."""
    plan = Plan.from_json(plan_json)
    write_json_atomic(out_path, plan.to_dict())
    print(f"plan {plan.name} written", file=log)


def select_plan(stored_path: str, out_path: str, log: TextIO) -> None:
    """select_plan: results/<config>/plan.json (or preflight.json) as a copy of the current plan's stored file
    (``contracts.layout``), byte for byte."""
    write_bytes_atomic(out_path, Path(stored_path).read_bytes())
    print(f"{out_path}: the current plan's, {stored_path}", file=log)


def make_parser_env(venv_dir: Path, requirements: Path, ready_path: Path, log: TextIO,
                    console: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
    """make_parser_env: the pinned SGLang parser venv, and its ready file; a failed build ends the job with
    the builder's message (what failed, its log, how to resume), not a traceback. A build (a download of
    gigabytes, minutes) is said on ``console`` as it starts and as it ends: Snakemake's quiet console shows no
    job banner."""
    building = not parser_env_ready(venv_dir, requirements)
    print(f"building SGLang's parser environment in {venv_dir} ({parser_env_size(requirements)})", file=log)
    if building and console is not None:
        print(f"specsweep make_parser_env: building SGLang's parser environment in {venv_dir} "
              f"({parser_env_size(requirements)}; log {build_log(venv_dir)})", file=console, flush=True)
    started = clock()
    try:
        python = ensure_parser_env(venv_dir, requirements)
    except ParserEnvError as exc:
        print(f"error: {exc}", file=log)
        raise SystemExit(f"make_parser_env: {exc}") from None
    write_json_atomic(ready_path, {"python": str(python), "requirements": str(requirements)})
    print(f"parser environment ready: {python}", file=log)
    if building and console is not None:
        print(f"specsweep make_parser_env: SGLang's parser environment ready after {clock() - started:.0f} s",
              file=console, flush=True)


def preflight_images(plan: Plan, image_spec: str) -> dict | None:
    """The ``images`` mapping a preflight job gives its engine: the plan's image with the content spec of the
    job's params (``workflow.inputs.config_image_spec_json``), None when the plan runs no image."""
    spec = json.loads(image_spec)
    return {plan.image: spec} if plan.image and spec else None


def preflight_config(
    plan_path: str, parser_ready: Sequence[str], image_spec: str, out_path: str, log: TextIO
) -> int:
    """preflight_config: check one plan with its engine's own parser; write the result, or fail the job.

    A configuration that fails preflight must not reach an image build or a
    launch: the error names the configuration and the flag. Warnings (a
    variant that will fall back, a deprecated flag) are kept in the result.
    """
    typed = Plan.load(plan_path)
    engine = get_engine(typed.engine)
    images = preflight_images(typed, image_spec)
    # The parser venv's ready.json, or the image manifest (preflight_parser: image).
    parser = parser_prefix(read_json(parser_ready[0])) if parser_ready else None
    if typed.runtime == EXTERNAL_RUNTIME:
        # No argv to parse and no model to load: the plan's own checks (plan.resolve.external_problems)
        # ran when the workflow started; what the server runs is recorded when the job attaches.
        result = PreflightResult(checked_with="nothing to check before measuring: an external server is not "
                                              "launched (its settings are read from its /server_info)")
    else:
        result = engine.preflight(typed, parser, images)
    for warning in result.warnings:
        print(f"preflight warning: {warning}", file=log)
    if result.errors:
        for error in result.errors:
            print(f"preflight failed: {error}", file=log)
        raise SystemExit(f"preflight of configuration {typed.name!r} failed:\n  " + "\n  ".join(result.errors))
    write_json_atomic(
        out_path,
        {"config": typed.name, "ok": True, "argv": list(typed.argv), "checked_with": result.checked_with,
         "warnings": list(result.warnings), "loaded": list(result.loaded)},
    )
    print(f"preflight ok: {typed.name} ({result.checked_with})", file=log)
    return 0


def build_image_job(image: str, spec_json: str, expected_tag: str, root: Path, manifest_path: Path, log_path: Path,
                    log: TextIO) -> dict:
    """build_image: build (or reuse) one image; its tag must be the one the DAG computed. Docker that cannot
    build (no BuildKit, a failed build) ends the job with one line naming the image and the log, not a
    traceback: the host's tools, not a bug."""
    try:
        manifest = build_image(image, json.loads(spec_json), root, manifest_path, log_path,
                               state_path=state_path_for(manifest_path))
    except DockerError as exc:
        raise SystemExit(f"specsweep: build_image {image}: {_one_line(exc)} (log {log_path})") from None
    if manifest["tag"] != expected_tag:
        raise SystemExit(f"built {manifest['tag']}, but the DAG expected {expected_tag}")
    print(f"{image}: {manifest['tag']} {manifest['image_id']} (reused={manifest['reused']})", file=log)
    return manifest


def push_images(manifest_paths: Sequence[str], registry: str, out_path: str, log_path: Path) -> dict:
    """push_images: push every built image to the configured registry; record refs and digests."""
    reg = json.loads(registry)
    if not reg.get("url"):
        raise SystemExit("config has no registry.url: nothing to push to")
    try:
        pushed = [push_image(read_json(p), reg, Path(log_path), environ=os.environ) for p in manifest_paths]
    except DockerError as exc:
        raise SystemExit(f"specsweep: push_images: {_one_line(exc)} (log {log_path})") from None
    out = {"registry": reg.get("url"), "namespace": reg.get("namespace"), "images": pushed}
    write_json_atomic(out_path, out)
    return out


def benchmark_server(plan_path: str, image_manifest: Sequence[str], outcome_path: str, log: TextIO,
                     registry: Mapping[str, Any] | None = None, launch: str = "1",
                     round_plan: str | None = None) -> dict:
    """benchmark_server: one launch of one configuration's server, from launch to teardown (``serve.job``).

    ``outcome_path``: the rule's one declared output, the launch's ``outcome.json``; the launch's other files
    (``contracts.layout.LAUNCH_FILES``) go beside it. What Snakemake does for a declared output, this does for
    them: an earlier attempt's are removed before the launch (``clear_launch``), and each must exist after it
    (``missing_files``), or the job fails naming them, its outcome.json removed so that the next run measures
    the launch again.
    ``registry`` is where a container runtime pulls an image this host lacks.
    ``launch``: the launch id (``1``, ``2``, ..., ``1b``, ``1c``, ... or ``aa``: ``contracts.layout.LAUNCH_ID_RE``).
    The host settings (lock directory and wait, guard interval) come from this
    process's environment (``JobHost.from_environ``); the checkout is the
    working directory, which Snakemake sets to the workflow's. ``round_plan``: the round's file
    (``contracts.rounds``; None: no round); one that cannot be used ends the job with its one-line reason.
    """
    where = Path(outcome_path).parent
    files = {kind: Path(path) for kind, path in launch_paths(str(where)).items()}
    if removed := clear_launch(files.values()):
        print(f"removed an earlier attempt's {', '.join(removed)} from {where}", file=log)
    paths = JobPaths(*(files[k] for k in ("launch", "server_log", "warmup", "requests", "outcome")),
                     nccl_logs=files["nccl_logs"], profile=files["profile"], allreduce_bench=files["allreduce_bench"])
    manifest = read_json(image_manifest[0]) if image_manifest else None
    # A job waiting for the host says so on the terminal too (the script sends its stderr to the log).
    host = JobHost.from_environ(os.environ, Path.cwd(), notice=sys.__stderr__)
    try:
        outcome = run_config(Plan.load(plan_path), paths, manifest, log, registry, host=host, launch_id=launch,
                             round_plan=round_plan)
    except RoundPlanError as exc:
        raise SystemExit(f"benchmark_server: {exc}") from None
    if lacking := missing_files(where):
        files["outcome"].unlink(missing_ok=True)
        raise SystemExit(f"benchmark_server: {where} lacks {', '.join(lacking)} after the launch; its outcome.json "
                         f"is removed, so that the next run measures this launch again")
    return outcome


def clear_launch(paths: Iterable[Path]) -> list[str]:
    """Remove ``paths`` (one launch's files: an earlier attempt's), by name those that were there.

    What Snakemake does to a job's declared outputs before it runs (snakemake 9.27.1 jobs.py:797-809,
    ``remove_existing_output``, called by ``prepare`` at 835-836; a ``directory()`` output with its content:
    io/__init__.py:858-860), for the files benchmark_server writes beside its one declared output. The job's log and
    benchmark (``logs/``), and every other launch's files, are not in ``paths``; the rest of a launch directory
    (its points' part files, profile traces) the job resets itself once it owns its files (``serve.phases.own_files``).
    """
    removed = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(path.name)
    return removed


def one_run_id(launch: dict, outcome: dict, server_log: str, warmup: list[dict], measured: list[dict],
               others: Mapping[str, Any] | None = None) -> str:
    """The run id all files of a server job share; ``MixedRunsError`` names each file's run otherwise.

    ``others``: more files of the job, name -> run id (or set of the records' run ids), e.g. the
    profiling stages' (``profile_run_ids``)."""
    return check_one_run({
        "launch.json": launch.get("run_id"),
        "outcome.json": outcome.get("run_id"),
        "server.log": run_id_of_log(server_log),
        "warmup.jsonl": {r.get("run_id") for r in warmup},
        "requests.jsonl": {r.get("run_id") for r in measured},
        **(others or {}),
    })


def profile_run_ids(profile: dict, bench: dict, profile_json: Path) -> dict[str, Any]:
    """The run ids of the profiling stages' files (``serve.profile``): both JSON files and the profiled requests."""
    ids: dict[str, Any] = {"profile.json": profile.get("run_id"), "allreduce_bench.json": bench.get("run_id")}
    requests = profile_json.with_suffix("") / "requests.jsonl"
    if requests.is_file():
        ids["profile/requests.jsonl"] = {r.get("run_id") for r in read_jsonl(requests)}
    return ids


def read_launch(paths: Mapping[str, str],
                profile_of: Callable[[dict, dict, Path, dict], dict | None] | None = None) -> LaunchFiles:
    """The files one launch (one server job) left, read back (keys as benchmark_server's outputs).

    ``profile_of(profile, allreduce_bench, profile_dir, outcome)`` turns the
    launch's profiling files (keys ``profile``, ``allreduce_bench``) into its
    profile section; their run ids join the one-run check.

    Files of two different runs in one launch directory are an error, never a
    summary (``SystemExit`` saying which file came from which run, and how to
    rerun that launch).
    """
    where = Path(paths["outcome"]).parent
    # Declared as a later job's input is the outcome.json alone (workflow.inputs.summary_edges): a file of the launch
    # deleted since is named here, not a traceback (Snakemake reran the launch for it only while it was an input).
    if lacking := [Path(paths[k]).name for k in LAUNCH_FILES if paths.get(k) and not Path(paths[k]).exists()]:
        raise SystemExit(f"{where} lacks {', '.join(lacking)}: not summarising it. Measure this launch again: "
                         f"snakemake --cores 1 all -R {paths['outcome']}")
    outcome = read_json(paths["outcome"])
    launch_id = outcome.get("launch") or launch_id_of(str(Path(paths["outcome"]).parent))
    record = read_json(paths["launch"])
    server_log = Path(paths["server_log"]).read_text(errors="replace")
    warmup, measured = read_jsonl(paths["warmup"]), read_jsonl(paths["requests"])
    profile_json = Path(paths["profile"]) if paths.get("profile") else None
    profile_files = (read_json(profile_json), read_json(paths["allreduce_bench"])) if profile_json else None
    try:
        others = profile_run_ids(*profile_files, profile_json) if profile_files else None
        run_id = one_run_id(record, outcome, server_log, warmup, measured, others)
    except MixedRunsError as exc:
        raise SystemExit(f"{where}: {exc}; not summarising them. Rerun this launch's server job: "
                         f"snakemake --cores 1 all -R {paths['outcome']}") from None
    # NCCL writes to its per-process NCCL_DEBUG_FILEs (contracts.layout.NCCL_LOG_DIR), not to server.log.
    nccl = nccl_logs(Path(paths["server_log"]).parent, paths.get("nccl_logs") or None)
    profile = None
    if profile_files is not None and profile_of is not None:
        profile = profile_of(*profile_files, profile_json.with_suffix(""), outcome)
    return LaunchFiles(launch=str(launch_id), record=record, outcome=outcome, warmup=warmup, measured=measured,
                       server_log=server_log, run_id=run_id, nccl_logs=tuple(nccl), profile=profile)


def summarize_files(inputs: Mapping[str, Sequence[str] | str], out_path: str, log: TextIO, agreement: str = "{}",
                    labels_json: str = "{}") -> ConfigSummary:
    """summarize_config: summary.json of one configuration from the files of all its launches
    (``summary_of_files``), written atomically."""
    summary = summary_of_files(inputs, log, agreement, labels_json)
    write_json_atomic(out_path, summary.to_dict())
    states = ", ".join(f"{p.point}: {p.status}" for p in summary.points)
    print(f"summary {summary.config}: {summary.status} ({len(summary.launches)} launches; {states})", file=log)
    return summary


def summary_of_files(inputs: Mapping[str, Sequence[str] | str], log: TextIO, agreement: str = "{}",
                     labels_json: str = "{}") -> ConfigSummary:
    """The summary of one configuration from the files of all its launches (also what a round's
    judgement reads, ``workflow.rounds``).

    ``inputs``: ``plan`` and, per file kind of a launch (``launch``,
    ``server_log``, ``warmup``, ``requests``, ``outcome``, ``nccl_logs``,
    ``profile``, ``allreduce_bench``: ``contracts.layout.LAUNCH_FILES``), one
    path per launch in run order (``workflow.inputs.summary_inputs``); the
    baseline's plan and requests are the named inputs ``baseline_plan`` /
    ``baseline_requests``. ``agreement``: the params (baseline name,
    threshold). ``labels_json`` carries the requested ``variant``, ``expect``
    and ``expect_signature`` (``workflow.inputs.summary_labels``).
    """
    typed = Plan.load(paths_of(inputs["plan"])[0])
    plan = typed.to_dict()  # the analysis reads plan.json's object
    kinds = tuple(LAUNCH_FILES)
    columns = [paths_of(inputs[k]) if k in inputs.keys() else [] for k in kinds]
    for column in columns[5:]:  # not named: NCCL's default directory beside server.log; no profiling files
        column[:] = column or [""] * len(columns[0])
    labels = json.loads(labels_json)
    engine = get_engine(typed.engine)

    def profile_of(profile: dict, bench: dict, directory: Path, outcome: dict) -> dict | None:
        # A contaminated run's numbers are kept for inspection; so is its profile.
        if outcome["status"] not in (Status.OK, Status.CONTAMINATED):
            return None
        return profile_section(plan, profile, bench, directory, labels.get("variant") or [])

    launches = [read_launch(dict(zip(kinds, row)), profile_of) for row in zip(*columns)]

    def evidence_of(launch: LaunchFiles) -> dict | None:
        # Read on failure too: a known-failing case is expected only if its own failure line is there.
        # launch.json has ready_s once the server answered /ready: a failure line after it is a crash
        # while serving, not one while starting (engines.sglang.logcheck.failure_signatures).
        return engine.variant_evidence(launch.server_log + "".join(launch.nccl_logs), typed, labels,
                                       ready=launch.record.get("ready_s") is not None)

    params = json.loads(agreement)
    baseline = BaselineRun(params.get("baseline"))
    if "baseline_requests" in inputs.keys():
        baseline = BaselineRun(params.get("baseline"), Plan.load(paths_of(inputs["baseline_plan"])[0]).to_dict(),
                               read_jsonl(paths_of(inputs["baseline_requests"])[0]))
    summary = build_config_summary(plan, launches, evidence_of, baseline, params.get("threshold"), labels)
    print("runs " + ", ".join(f"launch {launch.launch}: {launch.run_id}" for launch in launches), file=log)
    return summary


def analyze_sweep_files(summary_paths: Sequence[str], params: str, report_path: str,
                        round_plans: Sequence[str] = (), judgements: Sequence[str] = (),
                        screen_path: str | None = None) -> dict[str, Any]:
    """analyze_sweep: results/report.json from every summary (descriptions, grids, the controls, the
    smallest effect and the design from params: ``inputs.report_params``; the order and the rounds from
    each round's plan and judgement; a race's screen from ``screen_path``)."""
    report = json.loads(params)
    if screen_path:
        report["screen"] = read_json(screen_path)
    plans = [read_json(p) for p in round_plans]
    if plans:
        report["launch_order"] = [item for plan in plans for item in plan["order"]]
        report["rounds"] = {"plans": plans, "judgements": [read_json(p) for p in judgements]}
    try:
        summaries = [ConfigSummary.load(p) for p in summary_paths]
    except SummaryError as exc:  # a summary of another format (or none): one line, no traceback
        raise SystemExit(str(exc)) from None
    sweep = {k: report.get(k) for k in ("descriptions", "expects", "grids", "launch_order", "aa_control",
                                        "positive_control", "smallest_effect", "own_baselines", "design", "rounds",
                                        "screen")
             if k in report}
    data = analyze_sweep(summaries, report["baseline"], sweep)
    write_report(report_path, data)
    return data


def render_report_files(report_path: str, csv_path: str, md_path: str, plots_dir: str,
                        best_dir: str | None = None, html: tuple[str, str, str] | None = None) -> None:
    """render_report: summary.csv, report.md, the figures that have data under ``plots_dir``, the
    best-configuration files of every grid and the HTML report's pages (``html``: landing, page, table), all
    from results/report.json."""
    render_report(load_report(report_path), Path(csv_path), Path(md_path), Path(plots_dir),
                  Path(best_dir) if best_dir else None,
                  HtmlPages(*(Path(p) for p in html)) if html is not None else None)
