"""Preflight of SGLang plans: static rules, then SGLang 0.5.23's own argument parser.

Why: a typo'd or removed flag, or an unsupported combination, otherwise shows
up only after an 8-GPU server has spent minutes loading a 1T-parameter model
(or, for a silent fallback, never). Everything here runs on a CPU-only host:

1. :mod:`specsweep.engines.sglang.rules` (in-process, no SGLang needed);
2. every argv through ``sglang.srt.server_args.prepare_server_args`` of the
   pinned wheel, inside a separate, self-contained venv built by
   :func:`ensure_parser_env` (the complete pinned closure of
   ``envs/sglang-parser.txt``, nothing from the interpreter that built it),
   driven by :mod:`specsweep.engines.sglang.parse_check` over JSON.

The parser is the authority for "does 0.5.23 accept this argv": no copy of its
flag list is kept here.

3. every volume's host path exists (:func:`specsweep.engines.volumes.volume_problems`),
   and every model and draft directory, mapped back to the host through the
   plan's volumes, loads through SGLang's own ``ModelConfig`` and the
   tokenizer/processor call its TokenizerManager makes with the plan's flags
   (:mod:`specsweep.engines.sglang.model_check`, in the same venv): a
   multimodal config.json-only directory fails here with SGLang's own
   ``OSError``, not minutes into a launch.

Where the checks run is an argv prefix that starts python (:func:`run_checks`):
``[<venv>/bin/python]`` (:func:`ensure_parser_env`; hosts without Docker), or
``docker run --rm -i ... <image> python3`` (:func:`image_parser_prefix`): the
built image's own SGLang, so preflight checks exactly what will run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
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
    """The parser venv could not be built or the parser could not run (not a verdict on a plan).

    Its message is one paragraph for a user (what failed, the log, how to resume), never a traceback.
    """


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _venv_python(venv_dir: Path) -> Path:
    return Path(venv_dir) / "bin" / "python"


def parser_env_dir(requirements: Path = DEFAULT_REQUIREMENTS, cache: Path | None = None) -> Path:
    """Where the parser venv of ``requirements`` lives unless the config's ``parser_env`` says otherwise.

    ``<cache>/specsweep/sglang-parser-<sha256[:12]>``, ``cache`` defaulting to ``$XDG_CACHE_HOME`` or
    ``~/.cache``: outside ``results/`` (``rm -rf results`` and ``scripts/gpu_launches.sh``, which moves
    ``results/`` aside, leave it), and one per content of the pins, so two checkouts or branches with
    different pins do not rebuild each other's.
    """
    digest = _sha256(requirements)[:12]
    if cache is None:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(cache) / "specsweep" / f"sglang-parser-{digest}"


_SIZE_LINE = re.compile(r"^#\s*size:\s*(?P<size>.+?)\s*$", re.MULTILINE)


def parser_env_size(requirements: Path = DEFAULT_REQUIREMENTS) -> str:
    """What building the venv of ``requirements`` costs, as its ``# size:`` line records it (measured when
    the pins were last changed); ``"size not recorded"`` without one."""
    m = _SIZE_LINE.search(Path(requirements).read_text())
    return m.group("size") if m else "size not recorded"


def build_log(venv_dir: Path) -> Path:
    """Where :func:`ensure_parser_env` logs a build of ``venv_dir`` (beside it: the venv is made anew)."""
    return Path(venv_dir).parent / f"{Path(venv_dir).name}.build.log"


def build_notice(venv_dir: Path, requirements: Path, names: Sequence[str]) -> str:
    """What building the parser venv costs and where it goes, said before it starts (a download of gigabytes),
    for the configurations ``names`` that need it."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"building SGLang's parser environment in {venv_dir} (once per {requirements}: "
            f"{parser_env_size(requirements)}; log {build_log(venv_dir)}), to check {len(names)} SGLang "
            f"configuration(s) ({shown}) with SGLang's own parser")


def _tail(log: Path, lines: int = 8) -> str:
    text = Path(log).read_text(errors="replace").rstrip().splitlines()
    return "\n".join("    " + line for line in text[-lines:])


def _run(argv: list[str], log: Path, timeout: float, what: str, resume: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ {argv!r}\n")
        fh.flush()
        try:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise ParserEnvError(f"SGLang's parser environment: {what} took longer than {timeout:.0f} s "
                                 f"(log {log}); {resume}") from None
    if proc.returncode != 0:
        raise ParserEnvError(f"SGLang's parser environment: {what} failed (exit status {proc.returncode}); "
                             f"last lines of {log}:\n{_tail(log)}\n{resume}")


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


def parser_env_ready(venv_dir: Path, requirements: Path = DEFAULT_REQUIREMENTS) -> bool:
    """Whether ``venv_dir`` holds a finished venv of exactly ``requirements`` (nothing to build)."""
    venv_dir = Path(venv_dir)
    marker = venv_dir / _MARKER
    return (marker.exists() and marker.read_text().strip() == _sha256(requirements)
            and _venv_python(venv_dir).exists())


def wheels_dir(venv_dir: Path) -> Path:
    """Where the build keeps what it downloaded until it has finished (so a failed build resumes)."""
    venv_dir = Path(venv_dir)
    return venv_dir.parent / f"{venv_dir.name}.wheels"


def ensure_parser_env(
    venv_dir: Path,
    requirements: Path = DEFAULT_REQUIREMENTS,
    python: str = sys.executable,
    timeout_s: float = 3600,
) -> str:
    """Create (or reuse) the SGLang parser venv and return its python's path.

    Self-contained: a plain venv (no ``--system-site-packages``: from inside a
    virtualenv that would expose the BASE interpreter's packages, not the
    user's) holding exactly the pinned closure of ``requirements``, installed
    ``--no-deps`` (SGLang's declared dependencies are CUDA kernels neither
    check imports). Two steps, so that a failed or interrupted build resumes:
    ``pip download`` into :func:`wheels_dir` (files already there are kept),
    then ``pip install --no-index`` from it into a new venv. The wheels are
    removed once the venv has imported everything the checks import
    (:data:`IMPORT_CHECK`) and its marker (the sha256 of ``requirements``) is
    written; a venv whose marker matches is reused, any other is rebuilt (only
    its venv parts are removed). Raises :class:`ParserEnvError` with a
    message for the user (never returns a broken env), so a test that needs the
    parser fails instead of skipping.
    """
    venv_dir = Path(venv_dir).resolve()
    requirements = Path(requirements).resolve()
    if parser_env_ready(venv_dir, requirements):
        return str(_venv_python(venv_dir))
    digest = _sha256(requirements)
    vpy = _venv_python(venv_dir)
    wheels = wheels_dir(venv_dir)
    venv_dir.mkdir(parents=True, exist_ok=True)
    wheels.mkdir(parents=True, exist_ok=True)
    log = build_log(venv_dir)
    with open(log, "a") as fh:
        fh.write(f"# building {venv_dir} from {requirements} (sha256 {digest})\n")
    resume = (f"Run the same command again to resume: what was downloaded is kept in {wheels} "
              f"(delete it to start from nothing).")
    _clear_venv(venv_dir)
    _run([python, "-m", "venv", str(venv_dir)], log, timeout_s, f"`{python} -m venv {venv_dir}`", resume)
    pip = [str(vpy), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "download", "--no-deps", "-d", str(wheels), "-r", str(requirements)], log, timeout_s,
         f"downloading the pinned packages ({parser_env_size(requirements)}) into {wheels}", resume)
    _run([*pip, "install", "--no-deps", "--no-index", "--find-links", str(wheels), "-r", str(requirements)],
         log, timeout_s, f"installing the downloaded packages into {venv_dir}", resume)
    _run([str(vpy), "-I", "-W", "ignore", "-c", IMPORT_CHECK], log, timeout_s,
         f"importing SGLang's parser and model code in {venv_dir} (a package missing from {requirements}?)",
         f"Add what the import lacked to {requirements} (exact pin), then run again.")
    (venv_dir / _MARKER).write_text(digest + "\n")
    shutil.rmtree(wheels, ignore_errors=True)
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


# Both checks in one interpreter, so that SGLang's import (~7 s of CPU) is paid
# once per preflight, not twice: each check's source becomes a module, its
# main() reads the request from a swapped stdin and writes its JSON to a
# swapped stdout. An argv SGLang's parser rejected is not handed to the model
# check (its parser error says why; loading it would only repeat that).
_DRIVER = """
import io, json, sys, types
request, real_stdout, reports = json.load(sys.stdin), sys.stdout, {}
for key, source in request.pop("sources"):
    items = request[key]
    if key == "model" and "parse" in reports:
        items = [i for i in items if reports["parse"]["results"][i["name"]]["ok"]]
    if not items:
        continue
    module = types.ModuleType("specsweep_" + key + "_check")
    sys.modules[module.__name__] = module
    exec(compile(source, module.__name__ + ".py", "exec"), module.__dict__)
    sys.stdin, sys.stdout = io.StringIO(json.dumps({"items": items})), io.StringIO()
    try:
        module.main()
        reports[key] = json.loads(sys.stdout.getvalue())
    finally:
        sys.stdout = real_stdout
json.dump(reports, real_stdout)
"""


def run_checks(parse_items: list[dict], model_items: list[dict], python_argv: str | Sequence[str],
               timeout_s: float = 1500) -> dict:
    """Run :mod:`parse_check` over ``parse_items`` and :mod:`model_check` over ``model_items`` in one process.

    ``python_argv`` is the venv's python (a path), or an argv prefix that
    starts python elsewhere (:func:`image_parser_prefix`, with the model
    directories mounted: :func:`with_mounts`); the driver goes on argv with
    ``-I -c`` and the request on stdin, so the same call works on either side.
    Returns ``{"parse": report, "model": report}``, each key present when it
    had items (model items whose argv the parser rejected are dropped).
    """
    prefix = _prefix(python_argv)
    sources = [["parse", PARSE_CHECK.read_text()], ["model", MODEL_CHECK.read_text()]]
    proc = subprocess.run(
        [*prefix, "-I", "-c", _DRIVER],
        input=json.dumps({"sources": sources, "parse": parse_items, "model": model_items}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=_parser_env(),
        check=False,
    )
    what = f"SGLang preflight checks ({shlex.join(map(str, prefix))})"
    if proc.returncode != 0:
        raise ParserEnvError(f"{what} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ParserEnvError(f"{what} printed no JSON ({exc}); stderr:\n{proc.stderr[-3000:]}") from exc


def run_parser(items: list[dict], parser_python: str | Sequence[str], timeout_s: float = 600) -> dict:
    """:mod:`parse_check`'s JSON over ``items`` (:func:`run_checks` with no model items)."""
    return run_checks(items, [], parser_python, timeout_s)["parse"]


def run_model_check(items: list[dict], python_argv: str | Sequence[str], timeout_s: float = 900) -> dict:
    """:mod:`model_check`'s JSON over ``items`` (:func:`run_checks` with no parser items)."""
    return run_checks([], items, python_argv, timeout_s)["model"]


def model_check_item(plan: Plan, base: Path) -> tuple[dict | None, list[str], list[str]]:
    """The model check's input for one plan (its flags with host paths), and the errors and warnings found.

    Every directory flag (:data:`MODEL_PATH_FLAGS`) that names a local path is
    mapped to the host through the plan's volumes; one that cannot be (under
    no volume, or missing on the host) is an error naming the flag, and the
    plan is not handed to the check (the volume error says what to fix). A
    relative value that is no directory here is taken for a hub repo id: the
    server would download it, which a preflight must not, so the plan is not
    checked (a warning says so).
    """
    name = plan.name
    sa = dict(plan.server_args)
    problems: list[str] = []
    mapped = dict(sa)
    for flag in MODEL_PATH_FLAGS:
        value = sa.get(flag)
        if not isinstance(value, str) or not value:
            continue
        if not value.startswith("/") and (plan.runtime == "docker" or not (Path(base) / value).exists()):
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
    return {"name": name, "argv": args_to_argv(mapped), "env": dict(plan.env)}, [], []


def preflight_plans(
    plans: Sequence[Plan],
    parser_python: str | Sequence[str],
    images: Mapping[str, Any] | None = None,
    base: Path | None = None,
    labels: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict]:
    """Check every plan; return ``{name: {"ok", "errors", "warnings", "argv", "sglang_version"}}``.

    ``labels``: each configuration's labels by name (``plan.resolve.resolve_labels``), where known: the
    rules that depend on them (``variant``, ``expect``) then give their verdict instead of a warning.
    ``errors`` and ``warnings`` are messages that name the configuration and
    the flag (``configurations.<name>...``). ``images`` (the config's
    ``images:`` mapping) lets the fusion rule recognise a patched image by its
    target/patches rather than only by name. Plans of other engines are not
    SGLang's to judge and are returned ok with a warning. All SGLang plans go
    through one process that runs the parser and then the model check
    (:func:`run_checks`: one SGLang import);
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
    for plan in plans:
        name = plan.name
        argv = list(plan.argv or launch_argv("python3", plan.server_args))
        if plan.engine != "sglang":
            out[name] = {
                "ok": True,
                "errors": [],
                "warnings": [f"configurations.{name}: engine {plan.engine!r}, not checked by SGLang's parser"],
                "argv": argv,
                "sglang_version": None,
            }
            continue
        own = None if labels is None else labels[name]
        findings = check_plan(plan, own, images, base)
        out[name] = {
            "ok": True,
            "errors": [f.message for f in findings if f.severity == "error"],
            "warnings": [f.message for f in findings if f.severity == "warning"] + evidence_warnings(plan, own or {}),
            "argv": argv,
            "sglang_version": None,
            "loaded": [],
        }
        items.append({"name": name, "argv": server_flags(plan), "env": dict(plan.env)})
        out[name]["errors"] += volume_problems(plan, base)
        model_item, path_problems, path_warnings = model_check_item(plan, base)
        out[name]["errors"] += path_problems
        out[name]["warnings"] += path_warnings
        if model_item is not None:
            model_items.append(model_item)
    if not items:
        return out
    dirs = [v for m in model_items for flag, v in zip(m["argv"], m["argv"][1:]) if flag.lstrip("-") in MODEL_PATH_FLAGS]
    reports = run_checks(items, model_items, with_mounts(_prefix(parser_python), dirs))
    for item in items:
        name = item["name"]
        verdict = reports["parse"]["results"][name]
        out[name]["sglang_version"] = reports["parse"].get("sglang_version")
        out[name]["errors"] += [f"configurations.{name}.server_args: {e}" for e in verdict["errors"]]
        out[name]["warnings"] += [f"configurations.{name}.server_args: {w}" for w in verdict["warnings"]]
    for name, verdict in reports.get("model", {}).get("results", {}).items():
        out[name]["loaded"] = verdict["loaded"]
        out[name]["errors"] += [f"configurations.{name}.server_args.model-path: {e}" if e.startswith("model ")
                                else f"configurations.{name}.server_args.speculative-draft-model-path: {e}"
                                for e in verdict["errors"]]
    for result in out.values():
        result["ok"] = not result["errors"]
    return out
