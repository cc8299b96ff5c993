"""Job adapters, one per rule with a script: file in, file out.

Each ``scripts/<rule>.py`` reads the ``snakemake`` object and calls one of
these; the real work is done by the stage packages they call. Paths follow
the path grammar of ``results/`` at the top of the Snakefile.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from specsweep.analysis.profiling import profile_section
from specsweep.analysis.summary import BaselineRun, build_summary
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import ensure_parser_env, parser_prefix
from specsweep.files import read_json, read_jsonl, write_json_atomic, write_text_atomic
from specsweep.images.build import build_image, state_path_for
from specsweep.images.registry import push_image
from specsweep.records import MixedRunsError, check_one_run, run_id_of_log
from specsweep.report.render import render_report
from specsweep.serve.job import JobHost, JobPaths, nccl_logs, run_config



def paths_of(value: str | Sequence[str]) -> list[str]:
    """A named Snakemake input as a list of paths (one path arrives as a str, none as an empty list)."""
    return [value] if isinstance(value, str) else list(value)


def write_plan(plan_json: str, out_path: str, log: TextIO) -> None:
    """resolve_plan: write the plan Snakemake passed as canonical JSON params."""
    plan = json.loads(plan_json)
    write_text_atomic(out_path, json.dumps(plan, indent=2, sort_keys=True) + "\n")
    print(f"plan {plan['name']} written", file=log)


def make_parser_env(venv_dir: Path, requirements: Path, ready_path: Path, log: TextIO) -> None:
    """make_parser_env: the pinned SGLang parser venv, and its ready file."""
    python = ensure_parser_env(venv_dir, requirements)
    write_json_atomic(ready_path, {"python": str(python), "requirements": str(requirements)})
    print(f"parser environment ready: {python}", file=log)


def preflight_config(
    plan_path: str, parser_ready: Sequence[str], image_spec: str, out_path: str, log: TextIO
) -> int:
    """preflight_config: check one plan with its engine's own parser; write the result, or fail the job.

    A configuration that fails preflight must not reach an image build or a
    launch: the error names the configuration and the flag. Warnings (a
    variant that will fall back, a deprecated flag) are kept in the result.
    """
    plan = read_json(plan_path)
    engine = get_engine(plan["engine"])
    spec = json.loads(image_spec)
    images = {plan["image"]: spec} if plan.get("image") and spec else None
    # The parser venv's ready.json, or the image manifest (preflight_parser: image).
    parser = parser_prefix(read_json(parser_ready[0])) if parser_ready else None
    result = engine.preflight(plan, parser, images)
    for warning in result.warnings:
        print(f"preflight warning: {warning}", file=log)
    if result.errors:
        for error in result.errors:
            print(f"preflight failed: {error}", file=log)
        raise SystemExit(f"preflight of configuration {plan['name']!r} failed:\n  " + "\n  ".join(result.errors))
    write_json_atomic(
        out_path,
        {"config": plan["name"], "ok": True, "argv": plan["argv"], "checked_with": result.checked_with,
         "warnings": list(result.warnings), "loaded": list(result.loaded)},
    )
    print(f"preflight ok: {plan['name']} ({result.checked_with})", file=log)
    return 0


def build_image_job(image: str, spec_json: str, expected_tag: str, root: Path, manifest_path: Path, log_path: Path,
                    log: TextIO) -> dict:
    """build_image: build (or reuse) one image; its tag must be the one the DAG computed."""
    manifest = build_image(image, json.loads(spec_json), root, manifest_path, log_path,
                           state_path=state_path_for(manifest_path))
    if manifest["tag"] != expected_tag:
        raise SystemExit(f"built {manifest['tag']}, but the DAG expected {expected_tag}")
    print(f"{image}: {manifest['tag']} {manifest['image_id']} (reused={manifest['reused']})", file=log)
    return manifest


def push_images(manifest_paths: Sequence[str], registry: str, out_path: str, log_path: Path) -> dict:
    """push_images: push every built image to the configured registry; record refs and digests."""
    reg = json.loads(registry)
    if not reg.get("url"):
        raise SystemExit("config has no registry.url: nothing to push to")
    pushed = [push_image(read_json(p), reg, Path(log_path), environ=os.environ) for p in manifest_paths]
    out = {"registry": reg.get("url"), "namespace": reg.get("namespace"), "images": pushed}
    write_json_atomic(out_path, out)
    return out


def benchmark_server(plan_path: str, image_manifest: Sequence[str], outputs: Mapping[str, str], log: TextIO,
                     registry: Mapping[str, Any] | None = None) -> dict:
    """benchmark_server: one configuration's server, from launch to teardown (``serve.job``).

    ``registry`` is where a container runtime pulls an image this host lacks.
    The host settings (lock directory and wait, guard interval) come from this
    process's environment (``JobHost.from_environ``); the checkout is the
    working directory, which Snakemake sets to the workflow's.
    """
    paths = JobPaths(*(Path(outputs[k]) for k in ("launch", "server_log", "warmup", "requests", "outcome")),
                     nccl_logs=Path(outputs["nccl_logs"]) if outputs.get("nccl_logs") else None,
                     profile=Path(outputs["profile"]), allreduce_bench=Path(outputs["allreduce_bench"]))
    manifest = read_json(image_manifest[0]) if image_manifest else None
    # A job waiting for the host says so on the terminal too (the script sends its stderr to the log).
    host = JobHost.from_environ(os.environ, Path.cwd(), notice=sys.__stderr__)
    return run_config(read_json(plan_path), paths, manifest, log, registry, host=host)


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


def summarize_files(inputs: Mapping[str, str], out_path: str, log: TextIO, agreement: str = "{}",
                    labels_json: str = "{}") -> dict:
    """summarize_config: summary.json of one configuration from the files its server job left.

    Files of two different runs are an error, never a summary: the job fails
    and says which file came from which run. ``agreement``: the params
    (baseline name, threshold); the baseline's plan and requests are the named
    inputs ``baseline_plan`` / ``baseline_requests``. ``labels_json`` carries
    the requested ``variant`` (``workflow.inputs.summary_labels``).
    """
    plan = read_json(inputs["plan"])
    outcome = read_json(inputs["outcome"])
    launch = read_json(inputs["launch"])
    server_log = Path(inputs["server_log"]).read_text(errors="replace")
    warmup, measured = read_jsonl(inputs["warmup"]), read_jsonl(inputs["requests"])
    profile_json = Path(inputs["profile"]) if "profile" in inputs.keys() else None
    profile_files = (read_json(profile_json), read_json(inputs["allreduce_bench"])) if profile_json else None
    try:
        others = profile_run_ids(*profile_files, profile_json) if profile_json else None
        run_id = one_run_id(launch, outcome, server_log, warmup, measured, others)
    except MixedRunsError as exc:
        where = Path(inputs["outcome"]).parent
        raise SystemExit(f"{where}: {exc}; not summarising them. Rerun the configuration's server job: "
                         f"snakemake --cores 1 all -R {inputs['outcome']}") from None
    labels = json.loads(labels_json)
    # NCCL writes to its per-process NCCL_DEBUG_FILEs (serve.job.NCCL_LOG_DIR), not to server.log.
    logs = server_log + "".join(nccl_logs(Path(inputs["server_log"]).parent, inputs.get("nccl_logs") or None))
    # Read on failure too: a known-failing case is expected only if its own failure line is there.
    evidence = get_engine(plan["engine"]).variant_evidence(logs, dict(plan, **labels))
    profile = None
    # A contaminated run's numbers are kept for inspection; so is its profile.
    if profile_json is not None and profile_files is not None and outcome["status"] in ("ok", "contaminated"):
        profile = profile_section(plan, *profile_files, profile_json.with_suffix(""), labels.get("variant") or [])
    params = json.loads(agreement)
    baseline = BaselineRun(params.get("baseline"))
    if "baseline_requests" in inputs.keys():
        baseline = BaselineRun(params.get("baseline"), read_json(inputs["baseline_plan"]),
                               read_jsonl(inputs["baseline_requests"]))
    summary = build_summary(plan, launch, outcome, warmup, measured, evidence, baseline, params.get("threshold"),
                            labels=labels, profile=profile)
    print(f"run {run_id}", file=log)
    write_json_atomic(out_path, summary)
    print(f"summary {plan['name']}: {summary['status']}", file=log)
    return summary


def render_report_files(summary_paths: Sequence[str], params: str, csv_path: str, md_path: str,
                        plot_path: str) -> None:
    """render_report: the cross-configuration report from every summary (descriptions from params)."""
    report = json.loads(params)
    summaries = [read_json(p) for p in summary_paths]
    for summary in summaries:
        summary["description"] = report["descriptions"].get(summary["config"], "")
        summary["expect"] = report.get("expects", {}).get(summary["config"], "ok")
    render_report(summaries, report["baseline"], Path(csv_path), Path(md_path), Path(plot_path).parent)
