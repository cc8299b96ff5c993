"""``NCCL_*`` and ``SGLANG_*`` in a config's ``env``: names their software reads, values it parses.

A misspelled name (``NCCL_ALOG``) is read by nothing, and a value NCCL or SGLang cannot parse
is either refused at communicator start or, worse, replaced by a default without a word; either
way the configuration measures something other than what it says. Both are known from the
config alone, so they are errors before anything runs (``snakemake -n`` and
``specsweep check`` included), at the key path the user wrote: ``defaults.env``,
``configurations.<name>.env`` and every value of a grid axis ``env.<VAR>``.

What each family reads is its software's business: :mod:`specsweep.engines.nccl` (NCCL 2.30.7)
and :mod:`specsweep.engines.sglang.environ` (SGLang 0.5.23). Other names (``GLOO_*``,
``TORCH_*``, ``CUDA_*``, ...) are not checked.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from specsweep.engines import nccl
from specsweep.engines.sglang import environ as sglang_environ


def env_string(value: Any) -> str:
    """An env value of the config as the process sees it: strings as written, numbers as JSON (16, 2.0)."""
    return value if isinstance(value, str) else json.dumps(value)


class _Family(Protocol):
    def name_problem(self, name: str) -> tuple[str, list[str]] | None: ...

    def value_problem(self, name: str, value: Any) -> tuple[str, str] | None: ...


#: Name prefix -> the module that knows the variables of that software.
FAMILIES: dict[str, _Family] = {"NCCL_": nccl, "SGLANG_": sglang_environ}


def _family(name: str) -> _Family | None:
    return next((f for prefix, f in FAMILIES.items() if str(name).startswith(prefix)), None)


def _env_entries(config: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(key path of the mapping, variable name, value) of every env value the config file sets."""
    for name, value in ((config.get("defaults") or {}).get("env") or {}).items():
        yield "defaults.env", name, value
    for entry_name, entry in (config.get("configurations") or {}).items():
        entry = entry or {}
        for name, value in (entry.get("env") or {}).items():
            yield f"configurations.{entry_name}.env", name, value
        for i, axis in enumerate(entry.get("axes") or []):
            for key, values in (axis or {}).items():
                if str(key).startswith("env.") and isinstance(values, list):
                    for j, value in enumerate(values):
                        yield f"configurations.{entry_name}.axes[{i}].env", f"{key[4:]}[{j}]", value


def env_problems(config: Mapping[str, Any]) -> list[str]:
    """One line per unknown ``NCCL_*``/``SGLANG_*`` name or unparsable value: key path, why, allowed values."""
    problems: list[str] = []
    for where, key, value in _env_entries(config):
        name = key.split("[", 1)[0]
        family = _family(name)
        if family is None or value is None:  # null removes an inherited key
            continue
        bad_name = family.name_problem(name)
        if bad_name is not None:
            why, known = bad_name
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            problems.append(f"{where}.{name}: {why}{hint}")
            continue
        bad_value = family.value_problem(name, env_string(value))
        if bad_value is not None:
            why, allowed = bad_value
            problems.append(f"{where}.{key}: {why}; allowed: {allowed}")
    return problems
