"""Engine facts: what a plan's flags and environment mean is resolved once, by its engine, into the plan
(``facts``); analysis and the report read the facts and never an engine's flags."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from specsweep.contracts.plan import FACT_KEYS, Plan, PlanError, setting
from specsweep.engines.registry import ENGINES, get_engine
from specsweep.refengine.cli import build_parser
from specsweep.testing.doubles import plan_dict
from specsweep.testing.workflow import REPO

#: Where flags must not be read: the rooms that analyse and report results.
READERS = ("analysis", "report")
#: An engine's own environment variables (SGLang's; the reference engine reads the same names).
ENGINE_ENV = re.compile(r"\bSGLANG_[A-Z0-9_]+")


def engine_flags() -> set[str]:
    """Every multi-word flag an engine takes that the project uses: the reference engine's parser's, and each
    ``server_args`` key of the shipped configurations (SGLang's, as written there)."""
    flags = {opt[2:] for action in build_parser()._actions for opt in action.option_strings
             if opt.startswith("--") and "-" in opt[2:]}
    for path in [REPO / "config.yaml", *sorted((REPO / "config").glob("*.yaml"))]:
        config = yaml.safe_load(path.read_text()) or {}
        entries = [config.get("defaults") or {}, *(config.get("configurations") or {}).values()]
        for entry in entries:
            flags |= {k for k in ((entry or {}).get("server_args") or {}) if "-" in k}
            for axis in (entry or {}).get("axes") or []:
                flags |= {k.split(".", 1)[1] for k in axis if k.startswith("server_args.") and "-" in k}
    return flags


def named_flags(path: Path, flags: set[str]) -> list[str]:
    """``line: text`` of each string in ``path`` (docstrings aside) that is an engine flag, holds ``--<flag>``,
    or names an engine's environment variable."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value
        if text in flags or any(f"--{f}" in text for f in flags) or ENGINE_ENV.search(text):
            found.append(f"{node.lineno}: {text[:80]!r}")
    return found


def test_the_flag_list_is_the_engines():
    flags = engine_flags()
    assert {"tp-size", "all-reduce-backend", "speculative-algorithm", "speculative-num-steps",
            "enable-mscclpp", "moe-a2a-backend"} <= flags


def test_analysis_and_the_report_name_no_engine_flag():
    flags = engine_flags()
    found = {str(p.relative_to(REPO)): hits for room in READERS
             for p in sorted((REPO / "specsweep" / room).glob("*.py")) if (hits := named_flags(p, flags))}
    assert found == {}


def test_the_check_finds_a_flag_read(tmp_path: Path):
    """What the modules did before the facts: the check would have found it."""
    path = tmp_path / "m.py"
    path.write_text('def tp(plan):\n    """Reads "tp-size" (a docstring may say so)."""\n'
                    '    return plan["server_args"].get("tp-size"), "SGLANG_SIMULATE_ACC_LEN=2"\n')
    assert sorted(named_flags(path, engine_flags())) == ["3: 'SGLANG_SIMULATE_ACC_LEN=2'", "3: 'tp-size'"]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_each_engine_resolves_the_facts(engine):
    eng = get_engine(engine)
    spec = {"tp-size": 2, "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3,
            "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
            "speculative-draft-model-path": "/d", "model-path": "/m"}
    facts = eng.facts(spec, {"SGLANG_SIMULATE_ACC_LEN": "2.5", "NCCL_ALGO": "Ring"})
    assert sorted(facts) == sorted(FACT_KEYS)
    assert facts["tp_size"] == 2 and facts["speculative_algorithm"] == "EAGLE3"
    assert facts["simulated_accept_length"] == 2.5
    assert facts["simulated_accept_length_setting"] == "env.SGLANG_SIMULATE_ACC_LEN"
    assert facts["speculation_settings"] == ["env.SGLANG_SIMULATE_ACC_LEN", "server_args.speculative-algorithm",
                                             "server_args.speculative-draft-model-path",
                                             "server_args.speculative-eagle-topk",
                                             "server_args.speculative-num-draft-tokens",
                                             "server_args.speculative-num-steps"]
    # no speculation: nothing is simulated, whatever the environment says; off (<= 0) is off
    plain = eng.facts({"tp-size": 4}, {"SGLANG_SIMULATE_ACC_LEN": "2.5"})
    assert plain["tp_size"] == 4 and plain["speculative_algorithm"] is None
    assert plain["simulated_accept_length"] is None
    assert eng.facts(spec, {"SGLANG_SIMULATE_ACC_LEN": "-1"})["simulated_accept_length"] is None
    assert eng.facts({}, {})["tp_size"] == 1


def test_the_reference_engine_s_backend_is_the_one_its_parser_selects():
    ref = get_engine("reference")
    # from the flags alone: the model directory need not exist where the plan is resolved
    assert ref.facts({"all-reduce-backend": "shm", "tp-size": 2, "model-path": "/m"}, {})["all_reduce_backend"] == "shm"
    assert ref.facts({"device": "cpu", "model-path": "/m"}, {})["all_reduce_backend"] == "shm"  # its default on CPU
    assert ref.facts({"device": "cuda", "model-path": "/m"}, {})["all_reduce_backend"] == "nccl"
    assert ref.facts({"tp-size": "two"}, {})["all_reduce_backend"] is None  # preflight says why
    # SGLang has no one backend flag: its log says what ran
    assert get_engine("sglang").facts({"tp-size": 8, "enable-mscclpp": True}, {})["all_reduce_backend"] is None


def test_a_resolved_plan_carries_its_engine_s_facts_and_a_plan_without_them_is_refused():
    plan = plan_dict(server_args={"tp-size": 2, "all-reduce-backend": "gloo", "model-path": "/m"})
    assert Plan.from_dict(plan).facts["tp_size"] == 2 and Plan.from_dict(plan).to_dict() == plan
    with pytest.raises(PlanError, match="missing keys \\['facts'\\]"):
        Plan.from_dict({k: v for k, v in plan.items() if k != "facts"})
    with pytest.raises(PlanError, match="facts"):
        Plan.from_dict({**plan, "facts": {"tp_size": 2}})
    assert setting(plan, "server_args.tp-size") == 2 and setting(plan, "env.SGLANG_SIMULATE_ACC_LEN") is None
