"""Where every result lives: the path grammar of ``results/``, in one place for the package.

The grammar is written out at the top of the ``Snakefile`` (and in docs/design.md);
the rules spell the same paths as Snakemake patterns. Python code that names a
results path builds it here, so that the package and the rules cannot drift apart
one function at a time:

    results/<config>/plan.json, preflight.json           the current plan (copies of its stored files)
    results/<config>/summary.json, logs/<rule>.log       from the current plan's launches
    results/<config>/plans/<plan>/plan.json, preflight.json, logs/<rule>.log   one plan (<plan> = plan_key)
    results/<config>/plans/<plan>/launch-<launch>/<LAUNCH_FILES>   one launch (<launch>: LAUNCH_ID_RE)
    results/<config>/plans/<plan>/launch-<launch>/nccl/nccl.<host>.<pid>.log
    results/<config>/plans/<plan>/launch-<launch>/profile/*-TP-<rank>*.trace.json.gz  (TRACE_NAME_RE)
    results/images/<image>.json
    results/prompts/<sha256>.jsonl, index/<key>.json
    results/report.json                                      (analyze_sweep)
    results/summary.csv, report.md, plots/<name>.png
    results/best/<grid>.{env,nccl-tuner.csv,json}

A launch belongs to its plan: launches are stored under the plan's key, so
switching to another config file that gives a configuration of the same name
another plan leaves the launches measured for the first plan in place, and
switching back finds them again (nothing relaunches). The summary of a
configuration reads the launches of its current plan.

Paths are relative to the workflow's directory (Snakemake's working directory), as strings.
"""

from __future__ import annotations

import hashlib
import re

RESULTS = "results"

#: The launch id of the A/A control: the baseline launched once more, after every other launch.
CONTROL = "aa"
#: Launch ids (the rules' ``{launch}``): launch r of a configuration runs in round r (``1``, ``2``, ...); the
#: baseline's further launches in round 1 (``rounds.first_round_baseline``) are ``1b``, ``1c``, ... (at most
#: ``MAX_FIRST_ROUND_BASELINE`` in all); the A/A control is ``CONTROL``.
_COPY_LETTERS = "bcdefghijklmnopqrstuvwxyz"
_COPY_RE = f"1[{_COPY_LETTERS[0]}-{_COPY_LETTERS[-1]}]"
LAUNCH_ID_RE = f"[1-9][0-9]*|{_COPY_RE}|{CONTROL}"
MAX_FIRST_ROUND_BASELINE = 1 + len(_COPY_LETTERS)


def first_round_copy(k: int) -> str:
    """The launch id of the baseline's ``k``-th launch in round 1 (k >= 2): ``1b``, ``1c``, ..."""
    if not 2 <= k <= MAX_FIRST_ROUND_BASELINE:
        raise ValueError(f"the baseline's launch {k} of round 1: allowed 2..{MAX_FIRST_ROUND_BASELINE}")
    return "1" + _COPY_LETTERS[k - 2]


def launch_round(launch: str) -> int | None:
    """The round of a launch id by its name: ``r`` for ``r``, 1 for ``1b``, ``1c``, ... and for the A/A control
    (which joins round 1); None for anything else."""
    launch = str(launch)
    if launch.isdigit():
        return int(launch)
    if launch == CONTROL or re.fullmatch(_COPY_RE, launch):
        return 1
    return None


def launch_sort_key(launch: str) -> tuple[bool, int, str]:
    """A configuration's launch ids in order: by round (``1``, ``1b``, ..., ``2``, ...), the A/A control last."""
    launch = str(launch)
    return (launch == CONTROL, launch_round(launch) or 0, launch)


#: The files of one launch, by kind (``nccl_logs`` a directory). benchmark_server writes them all and declares
#: ``outcome.json`` alone, which it writes last (``workflow.jobs.benchmark_server`` removes the others before a
#: launch runs and checks them after it, as Snakemake does for declared outputs).
LAUNCH_FILES = {"launch": "launch.json", "server_log": "server.log", "warmup": "warmup.jsonl",
                "requests": "requests.jsonl", "outcome": "outcome.json", "nccl_logs": "nccl",
                "profile": "profile.json", "allreduce_bench": "allreduce_bench.json"}
#: The directory of NCCL's per-process debug files, in a launch directory (``LAUNCH_FILES["nccl_logs"]``).
NCCL_LOG_DIR = LAUNCH_FILES["nccl_logs"]
#: NCCL_DEBUG_FILE's pattern (%h = host, %p = pid; NCCL v2.30.7-1 src/debug.cc ncclDebugInit) and its files.
NCCL_FILE_PATTERN = "nccl.%h.%p.log"
NCCL_FILE_GLOB = "nccl.*.log"

#: A PyTorch profiler trace of one TP rank, as SGLang 0.5.23 names it after ``/stop_profile``
#: (``[<prefix>-]<id>-TP-<tp>[-DP-<dp>][-PP-<pp>][-EP-<ep>][-<STAGE>].trace.json.gz``:
#: sglang/srt/managers/scheduler_components/profiler_manager.py:343-358) and the reference engine too
#: (``<tag>-TP-<rank>.trace.json.gz``, refengine/worker.py).
TRACE_NAME_RE = re.compile(r"-TP-(?P<rank>\d+)(?:-[A-Z]+-\d+)*(?:-[A-Z_]+)?\.trace\.json(?:\.gz)?$")
TRACE_GLOB = "*.trace.json.gz"

#: Selected dataset prompts (``plan.datasets``).
PROMPTS_DIR = f"{RESULTS}/prompts"

#: The answer of the whole sweep (analyze_sweep), and its views (render_report).
REPORT_JSON = f"{RESULTS}/report.json"
SUMMARY_CSV = f"{RESULTS}/summary.csv"
REPORT_MD = f"{RESULTS}/report.md"
PLOTS_DIR = f"{RESULTS}/plots"
#: Each grid's winner (``report.export``), by kind: these suffixes after ``results/best/<grid>``.
BEST_FILES = {"env": ".env", "tuner": ".nccl-tuner.csv", "evidence": ".json"}


#: The key of a plan (``plan_key``): as many hex digits of the sha256 of its canonical JSON.
PLAN_KEY_DIGITS = 12
#: The wildcard pattern of a plan key (the rules' ``{plan}``).
PLAN_KEY_RE = f"[0-9a-f]{{{PLAN_KEY_DIGITS}}}"


def plan_key(plan_json: str) -> str:
    """The key a plan's files are stored under: the first ``PLAN_KEY_DIGITS`` hex digits of the sha256 of
    its canonical JSON (``files.canonical_json`` of the plan: resolve_plan's params; callers serialise,
    ``workflow.inputs.plan_key``). Equal plans share their key, so a plan measured once is found again by
    any config file that resolves it."""
    return hashlib.sha256(plan_json.encode()).hexdigest()[:PLAN_KEY_DIGITS]


def config_dir(config: str, root: str = RESULTS) -> str:
    """``root``: the results directory, ``results`` (where the workflow runs) unless another is given."""
    return f"{root}/{config}"


def plan_path(config: str, root: str = RESULTS) -> str:
    """The configuration's current plan (a copy of ``stored_plan_path`` of its current key)."""
    return f"{config_dir(config, root)}/plan.json"


def preflight_path(config: str) -> str:
    """The current plan's preflight (a copy of ``stored_preflight_path``)."""
    return f"{config_dir(config)}/preflight.json"


def summary_path(config: str, root: str = RESULTS) -> str:
    return f"{config_dir(config, root)}/summary.json"


def plan_dir(config: str, key: str, root: str = RESULTS) -> str:
    """Everything of one plan of a configuration: the plan, its preflight, its launches."""
    return f"{config_dir(config, root)}/plans/{key}"


def stored_plan_path(config: str, key: str) -> str:
    return f"{plan_dir(config, key)}/plan.json"


def stored_preflight_path(config: str, key: str) -> str:
    return f"{plan_dir(config, key)}/preflight.json"


def launch_dir(config: str, key: str, launch: str, root: str = RESULTS) -> str:
    """One launch of the plan ``key`` of a configuration."""
    return f"{plan_dir(config, key, root)}/launch-{launch}"


def launch_file(config: str, key: str, launch: str, kind: str, root: str = RESULTS) -> str:
    """One file of a launch, by its kind (a key of ``LAUNCH_FILES``)."""
    return f"{launch_dir(config, key, launch, root)}/{LAUNCH_FILES[kind]}"


def launch_paths(launch_directory: str) -> dict[str, str]:
    """Every file of the launch in ``launch_directory``, by kind (``LAUNCH_FILES``)."""
    return {kind: f"{launch_directory}/{leaf}" for kind, leaf in LAUNCH_FILES.items()}


def launch_id_of(launch_directory: str) -> str:
    """The launch id of ``.../launch-<launch>`` (its last path part, without the prefix)."""
    return launch_directory.rstrip("/").rsplit("/", 1)[-1].removeprefix("launch-")


def image_manifest(image: str) -> str:
    """The manifest of a built image (``images.build``)."""
    return f"{RESULTS}/images/{image}.json"


def best_files(grid: str) -> list[str]:
    """The files of a grid's winner (``report.export``)."""
    return [f"{RESULTS}/best/{grid}{suffix}" for suffix in BEST_FILES.values()]
