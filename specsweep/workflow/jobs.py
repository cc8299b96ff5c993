"""Job adapters, one per rule with a script: file in, file out.

Each ``scripts/<rule>.py`` reads the ``snakemake`` object and calls one of
these; the real work is done by the stage packages they call. Paths follow
the path grammar of ``results/`` at the top of the Snakefile.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from specsweep.analysis.launches import LaunchFiles, build_config_summary
from specsweep.engines.registry import get_engine
from specsweep.engines.sglang.preflight import ensure_parser_env
from specsweep.files import read_json, read_jsonl, write_json_atomic, write_text_atomic
from specsweep.images.build import build_image, state_path_for
from specsweep.images.registry import push_image
from specsweep.report.render import render_report
from specsweep.serve.job import JobPaths, run_config



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
    parser_python = read_json(parser_ready[0])["python"] if parser_ready else None
    result = engine.preflight(plan, parser_python, images)
    for warning in result.warnings:
        print(f"preflight warning: {warning}", file=log)
    if result.errors:
        for error in result.errors:
            print(f"preflight failed: {error}", file=log)
        raise SystemExit(f"preflight of configuration {plan['name']!r} failed:\n  " + "\n  ".join(result.errors))
    write_json_atomic(
        out_path,
        {"config": plan["name"], "ok": True, "argv": plan["argv"], "checked_with": result.checked_with,
         "warnings": list(result.warnings)},
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
                     launch: str = "1") -> dict:
    """benchmark_server: one launch of one configuration's server, from launch to teardown (``serve.job``)."""
    paths = JobPaths(*(Path(outputs[k]) for k in ("launch", "server_log", "warmup", "requests", "outcome")))
    manifest = read_json(image_manifest[0]) if image_manifest else None
    return run_config(read_json(plan_path), paths, manifest, log, launch)


def read_launch(paths: Mapping[str, str]) -> LaunchFiles:
    """The files one launch left (keys as benchmark_server's outputs), read back."""
    outcome = read_json(paths["outcome"])
    launch = outcome.get("launch") or Path(paths["outcome"]).parent.name.removeprefix("launch-")
    return LaunchFiles(
        launch=str(launch),
        record=read_json(paths["launch"]),
        outcome=outcome,
        warmup=read_jsonl(paths["warmup"]),
        measured=read_jsonl(paths["requests"]),
        server_log=Path(paths["server_log"]).read_text(errors="replace"),
    )


def summarize_files(inputs: Mapping[str, Sequence[str] | str], out_path: str, log: TextIO) -> dict:
    """summarize_config: summary.json of one configuration from the files of all its launches.

    ``inputs``: ``plan`` and, per file kind of a launch (``launch``,
    ``server_log``, ``warmup``, ``requests``, ``outcome``), one path per
    launch in run order (``workflow.inputs.summary_inputs``).
    """
    plan = read_json(paths_of(inputs["plan"])[0])
    kinds = ("launch", "server_log", "warmup", "requests", "outcome")
    columns = [paths_of(inputs[k]) for k in kinds]
    launches = [read_launch(dict(zip(kinds, row))) for row in zip(*columns)]
    engine = get_engine(plan["engine"])

    def evidence_of(launch: LaunchFiles) -> dict | None:
        return engine.variant_evidence(launch.server_log, plan) if launch.outcome.get("status") == "ok" else None

    summary = build_config_summary(plan, launches, evidence_of)
    write_json_atomic(out_path, summary)
    states = ", ".join(f"{p['point']}: {p['status']}" for p in summary["points"])
    print(f"summary {plan['name']}: {summary['status']} ({len(launches)} launches; {states})", file=log)
    return summary


def render_report_files(summary_paths: Sequence[str], params: str, csv_path: str, md_path: str,
                        plot_path: str, best_dir: str | None = None) -> None:
    """render_report: the cross-configuration report from every summary (descriptions, grids and
    the planned launch order from params), and the best-configuration files of every grid."""
    report = json.loads(params)
    summaries = [read_json(p) for p in summary_paths]
    for summary in summaries:
        summary["description"] = report["descriptions"].get(summary["config"], "")
    sweep = {k: report.get(k) for k in ("grids", "launch_order", "aa_control") if k in report}
    render_report(summaries, report["baseline"], Path(csv_path), Path(md_path), Path(plot_path).parent,
                  sweep=sweep, best_dir=Path(best_dir) if best_dir else None)
