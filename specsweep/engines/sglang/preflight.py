"""Preflight of SGLang plans: static rules, then SGLang 0.5.23's own argument parser.

Why: a typo'd or removed flag, or an unsupported combination, otherwise shows
up only after an 8-GPU server has spent minutes loading a 1T-parameter model
(or, for a silent fallback, never). Everything here runs on a CPU-only host:

1. :mod:`specsweep.engines.sglang.rules` (in-process, no SGLang needed);
2. every argv through ``sglang.srt.server_args.prepare_server_args`` of the
   pinned wheel, inside a separate venv built by :func:`ensure_parser_env`
   (``--system-site-packages`` to reuse the host's CPU torch, sglang installed
   ``--no-deps``), driven by :mod:`specsweep.engines.sglang.parse_check` over JSON.

The parser is the authority for "does 0.5.23 accept this argv": no copy of its
flag list is kept here.

3. every volume's host path exists (:func:`specsweep.engines.volumes.volume_problems`),
   and every model and draft directory, mapped back to the host through the
   plan's volumes, loads through SGLang's own ``ModelConfig`` and the
   tokenizer/processor call its TokenizerManager makes with the plan's flags
   (:mod:`specsweep.engines.sglang.model_check`, in the same venv): a
   multimodal config.json-only directory fails here with SGLang's own
   ``OSError``, not minutes into a launch.

Where the checks run is an argv prefix that starts python (:func:`run_parser`):
``[<venv>/bin/python]`` (:func:`ensure_parser_env`; hosts without Docker), or
``docker run --rm -i ... <image> python3`` (:func:`image_parser_prefix`): the
built image's own SGLang, so preflight checks exactly what will run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.engines.argv import args_to_argv
from specsweep.engines.sglang.launch import launch_argv, server_flags
from specsweep.engines.sglang.logcheck import evidence_warnings
from specsweep.engines.sglang.rules import check_plan
from specsweep.engines.volumes import host_path, volume_problems

PARSE_CHECK = Path(__file__).resolve().parent / "parse_check.py"
MODEL_CHECK = Path(__file__).resolve().parent / "model_check.py"
# What both checks import; the venv counts as built only once all of them import.
IMPORT_CHECK = (
    "import sglang.srt.server_args, sglang.srt.configs.model_config, "
    "sglang.srt.utils.hf_transformers_utils, sglang.srt.arg_groups.model_hook"
)
# Flags whose value is a directory SGLang loads before the first request (model_check.py).
MODEL_PATH_FLAGS = ("model-path", "tokenizer-path", "speculative-draft-model-path")
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_REQUIREMENTS = REPO_ROOT / "envs" / "sglang-parser.txt"
_MARKER = ".specsweep-requirements.sha256"
# Environment variables of this host that must not change the parser's verdict.
_HOST_ENV_DROP = ("SGLANG_", "NCCL_", "PYTHON")


class ParserEnvError(RuntimeError):
    """The parser venv could not be built or the parser could not run (not a verdict on a plan)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _venv_python(venv_dir: Path) -> Path:
    return Path(venv_dir) / "bin" / "python"


def _run(argv: list[str], log: Path, timeout: float) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ {argv!r}\n")
        fh.flush()
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = Path(log).read_text(errors="replace")[-3000:]
        raise ParserEnvError(f"command {argv!r} failed with exit status {proc.returncode}; log {log}:\n{tail}")


# What `python -m venv` creates; only these are removed on a rebuild, so that
# other files in the directory (the workflow keeps its ready.json and job log
# there) survive.
_VENV_ENTRIES = ("bin", "include", "lib", "lib64", "share", "pyvenv.cfg", _MARKER)


def _clear_venv(venv_dir: Path) -> None:
    for name in _VENV_ENTRIES:
        path = venv_dir / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)


def ensure_parser_env(
    venv_dir: Path,
    requirements: Path = DEFAULT_REQUIREMENTS,
    python: str = sys.executable,
    timeout_s: float = 1800,
) -> str:
    """Create (or reuse) the SGLang parser venv and return its python's path.

    Idempotent and keyed on the sha256 of ``requirements``: an existing venv
    whose marker matches (written only after its python imported
    everything the checks import, :data:`IMPORT_CHECK`) is reused; otherwise its venv parts are removed and it is rebuilt, so a
    changed pin never mixes with old packages (other files in ``venv_dir``
    are left alone). Raises :class:`ParserEnvError` (never returns a broken
    env), so a test that needs the parser fails instead of skipping.
    """
    venv_dir = Path(venv_dir).resolve()
    requirements = Path(requirements).resolve()
    digest = _sha256(requirements)
    marker = venv_dir / _MARKER
    vpy = _venv_python(venv_dir)
    if marker.exists() and marker.read_text().strip() == digest and vpy.exists():
        return str(vpy)
    _clear_venv(venv_dir)
    venv_dir.mkdir(parents=True, exist_ok=True)
    log = venv_dir.parent / f"{venv_dir.name}.build.log"
    log.write_text("")
    _run([python, "-m", "venv", "--system-site-packages", str(venv_dir)], log, timeout_s)
    # --no-deps for the whole file: every line is an exact pin and the closure
    # is listed by hand; sglang's declared deps are CUDA wheels the parser never imports.
    _run(
        [str(vpy), "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "-r", str(requirements)],
        log,
        timeout_s,
    )
    _run([str(vpy), "-I", "-W", "ignore", "-c", IMPORT_CHECK], log, timeout_s)
    marker.write_text(digest + "\n")
    return str(vpy)


def _parser_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_HOST_ENV_DROP)}
    # The parser never needs a GPU; keep it off any that this host has.
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def image_parser_prefix(image: str, docker: str = "docker") -> list[str]:
    """The argv prefix that runs python inside a built SGLang image.

    ``image`` is an image id or reference (the manifest's ``image_id``: exactly
    the build that will be launched). No GPU, no network, nothing mounted:
    the script comes on argv (``-c``) and the request on stdin.
    """
    return [docker, "run", "--rm", "-i", "--network", "none", "-e", "CUDA_VISIBLE_DEVICES=", image, "python3"]


def parser_prefix(ready: Mapping[str, Any], docker: str = "docker") -> list[str]:
    """The parser's argv prefix from what preflight's input file holds:
    the parser venv's ``ready.json`` (``python``) or an image manifest
    (``results/images/<name>.json``, ``image_id``)."""
    if ready.get("python"):
        return [str(ready["python"])]
    if ready.get("image_id"):
        return image_parser_prefix(str(ready["image_id"]), docker)
    raise ParserEnvError(f"neither a parser venv (python) nor an image manifest (image_id): keys {sorted(ready)}")


def _prefix(python: str | Sequence[str]) -> list[str]:
    return [str(python)] if isinstance(python, (str, os.PathLike)) else [str(a) for a in python]


def with_mounts(prefix: list[str], paths: Sequence[str]) -> list[str]:
    """An image prefix (``docker run ... IMAGE python3``) that also mounts ``paths`` read-only at the same
    place, so that the model check inside the image reads the host's model directories; a venv prefix as is."""
    if len(prefix) < 3 or prefix[1] != "run":
        return prefix
    mounts = [arg for p in sorted(set(paths)) for arg in ("-v", f"{p}:{p}:ro")]
    return [*prefix[:2], *mounts, *prefix[2:]]


def run_parser(items: list[dict], parser_python: str | Sequence[str], timeout_s: float = 600) -> dict:
    """Run :mod:`parse_check` over ``items`` and return its JSON.

    ``parser_python`` is the venv's python (a path), or an argv prefix that
    starts python (:func:`image_parser_prefix`); the check's source goes on
    argv with ``-I -c``, so the same call works on either side.
    """
    prefix = _prefix(parser_python)
    proc = subprocess.run(
        [*prefix, "-I", "-c", PARSE_CHECK.read_text()],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=_parser_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise ParserEnvError(
            f"SGLang parser check ({shlex.join(map(str, prefix))}) exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ParserEnvError(f"SGLang parser check printed no JSON ({exc}); stderr:\n{proc.stderr[-3000:]}") from exc


def run_model_check(items: list[dict], python_argv: str | Sequence[str], timeout_s: float = 900) -> dict:
    """Run :mod:`model_check` over ``items`` and return its JSON.

    ``python_argv`` is the argv that starts the pinned SGLang's python: the
    venv's python (a path), or a prefix that runs python elsewhere (a built
    image); the check's source goes on argv with ``-I -c``.
    """
    prefix = _prefix(python_argv)
    proc = subprocess.run(
        [*prefix, "-I", "-c", MODEL_CHECK.read_text()],
        input=json.dumps({"items": items}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=_parser_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise ParserEnvError(f"SGLang model check ({prefix[0]}) exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ParserEnvError(f"SGLang model check printed no JSON ({exc}); stderr:\n{proc.stderr[-3000:]}") from exc


def model_check_item(plan: Mapping[str, Any], base: Path) -> tuple[dict | None, list[str], list[str]]:
    """The model check's input for one plan (its flags with host paths), and the errors and warnings found.

    Every directory flag (:data:`MODEL_PATH_FLAGS`) that names a local path is
    mapped to the host through the plan's volumes; one that cannot be (under
    no volume, or missing on the host) is an error naming the flag, and the
    plan is not handed to the check (the volume error says what to fix). A
    relative value that is no directory here is taken for a hub repo id: the
    server would download it, which a preflight must not, so the plan is not
    checked (a warning says so).
    """
    name = plan["name"]
    sa = dict(plan.get("server_args") or {})
    problems: list[str] = []
    mapped = dict(sa)
    for flag in MODEL_PATH_FLAGS:
        value = sa.get(flag)
        if not isinstance(value, str) or not value:
            continue
        if not value.startswith("/") and (plan.get("runtime") == "docker" or not (Path(base) / value).exists()):
            return None, [], [f"configurations.{name}.server_args.{flag}: {value!r} is not a local directory "
                              f"(a hub id?): its model was not loaded by preflight"]
        path, why = host_path(plan, value, base)
        if path is None:
            problems.append(f"configurations.{name}.server_args.{flag}: {why}")
        elif not path.is_dir():
            where = "" if str(path) == value else f" (on this host {path})"
            problems.append(f"configurations.{name}.server_args.{flag}: {value}{where} is not a directory on this host")
        else:
            mapped[flag] = str(path)
    if problems:
        return None, problems, []
    return {"name": name, "argv": args_to_argv(mapped), "env": dict(plan.get("env") or {})}, [], []


def preflight_plans(
    plans: list[dict],
    parser_python: str | Sequence[str],
    images: Mapping[str, Any] | None = None,
    base: Path | None = None,
) -> dict[str, dict]:
    """Check every plan; return ``{name: {"ok", "errors", "warnings", "argv", "sglang_version"}}``.

    ``errors`` and ``warnings`` are messages that name the configuration and
    the flag (``configurations.<name>...``). ``images`` (the config's
    ``images:`` mapping) lets the fusion rule recognise a patched image by its
    target/patches rather than only by name. Plans of other engines are not
    SGLang's to judge and are returned ok with a warning. All SGLang plans go
    through one parser process (one ~3 s import) and one model-check process;
    ``parser_python`` is what :func:`run_parser` takes (venv python or image
    prefix; an image gets the model directories mounted read-only).
    ``base`` is where relative volume host paths start (default: the working
    directory, as for ``docker run``); ``loaded`` lists what the model check
    loaded per directory.
    """
    base = Path.cwd() if base is None else Path(base)
    out: dict[str, dict] = {}
    items: list[dict] = []
    model_items: list[dict] = []
    rejected: set[str] = set()
    for plan in plans:
        name = plan["name"]
        argv = list(plan.get("argv") or launch_argv("python3", plan.get("server_args") or {}))
        if plan.get("engine", "sglang") != "sglang":
            out[name] = {
                "ok": True,
                "errors": [],
                "warnings": [f"configurations.{name}: engine {plan.get('engine')!r}, not checked by SGLang's parser"],
                "argv": argv,
                "sglang_version": None,
            }
            continue
        findings = check_plan(plan, images)
        out[name] = {
            "ok": True,
            "errors": [f.message for f in findings if f.severity == "error"],
            "warnings": [f.message for f in findings if f.severity == "warning"] + evidence_warnings(plan),
            "argv": argv,
            "sglang_version": None,
            "loaded": [],
        }
        items.append({"name": name, "argv": server_flags(plan), "env": dict(plan.get("env") or {})})
        out[name]["errors"] += volume_problems(plan, base)
        model_item, path_problems, path_warnings = model_check_item(plan, base)
        out[name]["errors"] += path_problems
        out[name]["warnings"] += path_warnings
        if model_item is not None:
            model_items.append(model_item)
    if items:
        report = run_parser(items, parser_python)
        for item in items:
            name = item["name"]
            verdict = report["results"][name]
            if not verdict["ok"]:
                rejected.add(name)
            out[name]["sglang_version"] = report.get("sglang_version")
            out[name]["errors"] += [f"configurations.{name}.server_args: {e}" for e in verdict["errors"]]
            out[name]["warnings"] += [f"configurations.{name}.server_args: {w}" for w in verdict["warnings"]]
    # An argv SGLang's parser rejected cannot be loaded either; its parser error says why.
    parsed_ok = [m for m in model_items if m["name"] not in rejected]
    if parsed_ok:
        dirs = [v for m in parsed_ok for flag, v in zip(m["argv"], m["argv"][1:])
                if flag.lstrip("-") in MODEL_PATH_FLAGS]
        report = run_model_check(parsed_ok, with_mounts(_prefix(parser_python), dirs))
        for item in parsed_ok:
            name = item["name"]
            verdict = report["results"][name]
            out[name]["loaded"] = verdict["loaded"]
            out[name]["errors"] += [f"configurations.{name}.server_args.model-path: {e}" if e.startswith("model ")
                                    else f"configurations.{name}.server_args.speculative-draft-model-path: {e}"
                                    for e in verdict["errors"]]
    for result in out.values():
        result["ok"] = not result["errors"]
    return out
