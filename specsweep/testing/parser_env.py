"""Where tests build the pinned SGLang preflight venv (one per requirements file).

``$SPECSWEEP_PARSER_ENV`` if set, else where the workflow keeps it
(:func:`specsweep.engines.sglang.preflight.parser_env_dir`: the user's cache,
keyed by the content of ``envs/sglang-parser.txt``): a branch that changes the
pins gets its own venv instead of rebuilding, back and forth, the one another
branch's tests use.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path

from specsweep.contracts.plan import Plan
from specsweep.engines.sglang.preflight import DEFAULT_REQUIREMENTS, ensure_parser_env, preflight_plans
from specsweep.engines.sglang.preflight import parser_env_dir as _default_dir
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_labels, resolve_plans, resolve_sweep
from specsweep.testing.workflow import REPO
from specsweep.workflow.inputs import config_image_spec_json, plan_params
from specsweep.workflow.jobs import preflight_images


def parser_env_dir(requirements: Path = DEFAULT_REQUIREMENTS) -> Path:
    if os.environ.get("SPECSWEEP_PARSER_ENV"):
        return Path(os.environ["SPECSWEEP_PARSER_ENV"])
    return _default_dir(requirements)


def parser_python(requirements: Path = DEFAULT_REQUIREMENTS) -> str:
    """The venv's python, built if needed; raises (never skips) when it cannot be built."""
    return ensure_parser_env(parser_env_dir(requirements), requirements)


def wheel_site(python: str) -> Path:
    """The site-packages directory holding the parser venv's ``sglang`` (to read the pinned wheel's sources)."""
    import subprocess

    out = subprocess.run(
        [python, "-I", "-c", "import importlib.util, pathlib; "
         "print(pathlib.Path(importlib.util.find_spec('sglang').origin).parent.parent)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    return Path(out)


def labelled_plans(paths: Sequence[Path]) -> tuple[dict, dict[str, Plan], dict[str, dict]]:
    """(the merged config of ``paths``, each configuration's resolved plan, its labels), as preflight reads them."""
    config = load_configs(list(paths))
    plans = {name: Plan.from_dict(plan) for name, plan in resolve_plans(config).items()}
    return config, plans, resolve_labels(config)


def preflight_config_set(paths: Sequence[Path], python: str) -> tuple[dict, dict, dict]:
    """Every configuration of the merged ``paths`` with its labels through SGLang's own parser in the venv of
    ``python``: (plans by name, preflight results by name, the errors of those that failed by name)."""
    config, plans, labels = labelled_plans(paths)
    results = preflight_plans(list(plans.values()), python, config["images"], base=REPO, labels=labels)
    bad = {name: r["errors"] for name, r in results.items() if not r["ok"]}
    return plans, results, bad


@functools.cache
def job_preflights(paths: tuple[Path, ...]) -> tuple[dict[str, Plan], dict[str, dict]]:
    """Every configuration of the merged ``paths`` as its preflight_config job reads it (the plan.json that
    resolve_plan writes from the plan's params, the images its image-spec params give), through SGLang's parser
    and model check in one process in the tests' venv: (the plans, the results), by name.

    Computed once per session (the SGLang import alone is ~8 s of CPU): the tests that read these verdicts
    share them and must not change them.
    """
    config = load_configs(list(paths))
    plans, _launches = resolve_sweep(config)
    jobs = {name: Plan.from_json(plan_params(plans, name)) for name in plans}
    images: dict = {}
    for name, plan in jobs.items():
        for image, spec in (preflight_images(plan, config_image_spec_json(plans, config, name)) or {}).items():
            if images.setdefault(image, spec) != spec:
                raise AssertionError(f"image {image}: two specs {json.dumps(images[image])} and {json.dumps(spec)}")
    return jobs, preflight_plans(list(jobs.values()), parser_python(), images, base=REPO)


def assert_only_unmounted_weights(bad: dict[str, list[str]]) -> None:
    """No weights on this host: the only errors are the unmounted weights, each naming its key (none the parser's)."""
    for name, errors in bad.items():
        assert errors and all(e.startswith((f"configurations.{name}.volumes[0]: host path /models",
                                            f"configurations.{name}.server_args.")) for e in errors), errors
        assert all("parser" not in e for e in errors), errors
