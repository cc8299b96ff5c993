"""Glue between Snakemake jobs and the package: file in, file out.

Each function here is what one ``scripts/*.py`` adapter calls; they read and
write the files of the path grammar (see the Snakefile) and leave the real
work to the modules they call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from specsweep.engines import get_engine
from specsweep.io import read_json, write_json_atomic
from specsweep.records import read_jsonl


def preflight_config(plan_path: str, parser_ready: Any, image_spec_json: str, out_path: str, log: TextIO) -> int:
    """Check one plan with its engine's own parser; write the result, or fail the job.

    A configuration that fails preflight must not reach an image build or a
    launch: the error names the configuration and the flag. Warnings (a
    variant that will fall back, a deprecated flag) are kept in the result.
    """
    plan = read_json(plan_path)
    engine = get_engine(plan["engine"])
    errors = list(engine.preflight(plan))
    warnings: list[str] = []
    checked_with = "specsweep.refengine.cli"
    if plan["engine"] == "sglang":
        from specsweep.sglang.preflight import parser_prefix, preflight_plans

        image_spec = json.loads(image_spec_json)
        images = {plan["image"]: image_spec} if plan.get("image") and image_spec else None
        ready = read_json(parser_ready if isinstance(parser_ready, str) else parser_ready[0])
        # ready.json of the parser venv, or the image manifest (preflight_parser: image)
        result = preflight_plans([plan], parser_prefix(ready), images)[plan["name"]]
        errors += [e for e in result["errors"] if e not in errors]
        warnings = list(result.get("warnings", []))
        checked_with = f"sglang {result.get('sglang_version') or '?'} ServerArgs parser"
    for warning in warnings:
        print(f"preflight warning: {warning}", file=log)
    if errors:
        for error in errors:
            print(f"preflight failed: {error}", file=log)
        raise SystemExit(f"preflight of configuration {plan['name']!r} failed:\n  " + "\n  ".join(errors))
    write_json_atomic(
        out_path,
        {"config": plan["name"], "ok": True, "argv": plan["argv"], "checked_with": checked_with, "warnings": warnings},
    )
    print(f"preflight ok: {plan['name']} ({checked_with})", file=log)
    return 0


def make_parser_env(venv_dir: Path, requirements: Path, ready_path: Path, log: TextIO) -> None:
    from specsweep.sglang.preflight import ensure_parser_env

    python = ensure_parser_env(venv_dir, requirements)
    write_json_atomic(ready_path, {"python": str(python), "requirements": str(requirements)})
    print(f"parser environment ready: {python}", file=log)


def summarize_files(inputs: Mapping[str, str], out_path: str, log: TextIO) -> dict:
    """summary.json of one configuration from the files its server job left."""
    from specsweep.summary import build_summary

    plan = read_json(inputs["plan"])
    outcome = read_json(inputs["outcome"])
    launch = read_json(inputs["launch"])
    server_log = Path(inputs["server_log"]).read_text(errors="replace")
    evidence = get_engine(plan["engine"]).variant_evidence(server_log, plan) if outcome["status"] == "ok" else None
    summary = build_summary(
        plan, launch, outcome, read_jsonl(inputs["warmup"]), read_jsonl(inputs["requests"]), evidence
    )
    write_json_atomic(out_path, summary)
    print(f"summary {plan['name']}: {summary['status']}", file=log)
    return summary
