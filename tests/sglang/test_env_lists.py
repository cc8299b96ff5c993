"""The variable lists the env check reads are the pinned software's: SGLang 0.5.23's table regenerated from
the wheel equals the shipped one, and every NCCL variable of the list is a string in the pinned
libnccl.so.2 (nvidia-nccl-cu13 2.30.7). Read in the preflight venv (fails, never skips, when it cannot
be built). The checks' behaviour on values is unit-tested in tests/unit/plan/test_envcheck.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsweep.engines import nccl
from specsweep.engines.sglang import environ
from specsweep.testing.parser_env import parser_python as build_parser_python
from specsweep.testing.parser_env import wheel_site as site_of


@pytest.fixture(scope="module")
def wheel_site() -> Path:
    return site_of(build_parser_python())  # fails (never skips) when the venv cannot be built


def test_sglang_environ_table_is_the_wheel_s(wheel_site):
    """``python -m specsweep.engines.sglang.environ <site>/sglang`` regenerates the shipped table unchanged."""
    assert next(wheel_site.glob("sglang-*.dist-info")).name.startswith("sglang-0.5.23")
    assert environ.environ_table(wheel_site / "sglang") == json.loads(environ.DATA.read_text())


def test_nccl_variables_are_in_the_pinned_library(wheel_site):
    """Names libnccl itself reads (not the plugins'), each a literal in libnccl.so.2 (NCCL_PARAM builds
    "NCCL_" env into one literal, src/include/param.h:28)."""
    lib = next((wheel_site / "nvidia" / "nccl" / "lib").glob("libnccl.so*")).read_bytes()
    assert next(wheel_site.glob("nvidia_nccl_cu13-*.dist-info")).name.startswith("nvidia_nccl_cu13-2.30.7")
    own = [name for name, entry in nccl.table().items() if entry["kind"] != "plugin"]
    missing = [name for name in own if name.encode() + b"\0" not in lib]
    assert missing == []
