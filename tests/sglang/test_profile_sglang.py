"""What the profiling stage sends to and expects from SGLang, checked against the pinned 0.5.23 wheel's source.

The wheel is the one in the SGLang parser venv (``envs/sglang-parser.txt``, the
same venv the preflight tests build; fails, never skips, when it cannot be
built). Importing ``sglang.srt.managers.io_struct`` needs the GPU image's
dependencies (torchvision...), so the checks read the source with ``ast``.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from specsweep.analysis.kernels import SGLANG_STEP, forward_kind
from specsweep.contracts.layout import TRACE_NAME_RE
from specsweep.contracts.plan import Plan
from specsweep.serve import profile as prof
from specsweep.testing.doubles import plan_dict
from specsweep.testing.parser_env import parser_python, wheel_site

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def srt() -> Path:
    return wheel_site(parser_python()) / "sglang" / "srt"  # the parser venv, built if needed (fails, never skips)


class _FakeServer:
    base_url = "http://127.0.0.1:9"  # nothing listens: the stage must fail as a result, after building its body
    container = None
    proc = None

    def alive(self) -> bool:
        return False


def test_start_profile_body_uses_only_profilereq_fields(srt, tmp_path):
    tree = ast.parse((srt / "managers/io_struct.py").read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ProfileReq")
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    plan = Plan.from_dict(plan_dict(
        name="p", engine="sglang", runtime="local", server_args={"tp-size": 2, "model-path": "/m"},
        profile={"enabled": True, "requests": 1, "num_steps": 4, "activities": ["CPU", "GPU"], "trace_timeout_s": 1}))
    pj = tmp_path / "profile.json"
    rec = prof.after_measure(_FakeServer(), plan, pj, io.StringIO())
    assert rec["status"] == "failed" and rec["reason"] == "start_profile_failed"
    assert set(rec["start_body"]) <= fields, set(rec["start_body"]) - fields
    assert {"output_dir", "num_steps", "activities", "with_stack", "record_shapes", "profile_id"} <= fields


def test_trace_file_names_and_the_auto_stop_message(srt):
    src = (srt / "managers/scheduler_components/profiler_manager.py").read_text()
    assert 'filename_parts = [self.profile_id, f"TP-{get_parallel().tp_rank}"]' in src
    assert '+ ".trace.json.gz"' in src and 'f"EP-{get_parallel().moe_ep_rank}"' in src
    assert "Profiling is not in progress. Call /start_profile first." in src
    assert TRACE_NAME_RE.search("specsweep-1a2b3c4d-TP-7-EP-7.trace.json.gz")


def test_step_span_names(srt):
    src = (srt / "utils/profile_utils.py").read_text()
    for fragment in ('stage = "DRAFT"', 'stage = "VERIFY"', 'base = f"step[{stage} bs={bs} toks={ext_toks}"',
                     'base = f"step[{stage} bs={bs}"'):
        assert fragment in src
    assert "build_step_span_name(" in (srt / "model_executor/model_runner.py").read_text()
    assert SGLANG_STEP.match("step[VERIFY bs=1]") and forward_kind("step[DRAFT bs=3 toks=12]") == "draft_prefill"
