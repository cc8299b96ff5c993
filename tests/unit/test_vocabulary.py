"""The words results are told in: members write exactly the files' strings, and the package spells
statuses, stages and reasons through them, not as literals."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from specsweep.contracts.vocabulary import (
    STATUS_ORDER,
    Expect,
    Failure,
    Reason,
    RequestStatus,
    Stage,
    StageStatus,
    Status,
)
from specsweep.testing.workflow import REPO

VOCABULARIES = (Status, RequestStatus, StageStatus, Stage, Reason, Expect)


@pytest.mark.parametrize("vocabulary", VOCABULARIES, ids=lambda v: v.__name__)
def test_a_member_is_its_string_in_json_text_and_messages(vocabulary):
    for member in vocabulary:
        word = member.value
        assert member == word and hash(member) == hash(word) and vocabulary(word) is member
        assert json.dumps({member: member}) == json.dumps({word: word})
        assert f"{member}" == str(member) == word and "%s" % member == word
        assert repr([member]) == repr([word])  # a message listing members reads as before


def test_the_words_of_the_file_formats():
    """Changing one of these changes outcome.json and summary.json: a format change, with a version bump."""
    assert [s.value for s in STATUS_ORDER] == ["ok", "fallback", "contaminated", "failed"]
    assert set(Status) == set(STATUS_ORDER)
    assert {s.value for s in RequestStatus} == {"ok", "error", "incomplete"}
    assert {s.value for s in StageStatus} == {"ok", "failed", "off", "not_run", "skipped", "missing"}
    assert {s.value for s in Stage} == {"launch", "ready", "warmup", "benchmark", "summarize", "allreduce_bench",
                                        "profile"}
    assert {s.value for s in Expect} == {"ok", "failure"}


def test_one_failure_type_carries_stage_reason_and_detail():
    from specsweep.serve.client import BenchmarkError
    from specsweep.serve.profile import ProfileError
    from specsweep.serve.server import LaunchError

    for kind in (LaunchError, BenchmarkError, ProfileError):
        with pytest.raises(Failure) as info:
            raise kind(Stage.LAUNCH, Reason.HOST_BUSY, "another server runs")
        assert (info.value.stage, info.value.reason, info.value.detail) == ("launch", "host_busy",
                                                                             "another server runs")
        assert str(info.value) == "launch: host_busy: another server runs"


# --- no module spells these words as literals --------------------------------------------------

#: What a status, stage or reason literal would be (``ok`` counts only where a status is meant).
WORDS = {m.value for v in (Status, StageStatus, Stage, Reason) for m in v} | {RequestStatus.ERROR.value,
                                                                               RequestStatus.INCOMPLETE.value}
KEYS = {"status", "stage", "reason"}
#: Where literals may stay: the vocabulary itself; the reference engine (it imports nothing of the
#: package); the scripts run in other interpreters (the standard library only: tests/unit/test_layers.py);
#: the loopback server's own readiness answer (a server's body, not a result).
EXEMPT = {"specsweep/contracts/vocabulary.py", "specsweep/serve/provenance.py", "specsweep/serve/guard.py",
          "specsweep/serve/watchdog.py", "specsweep/serve/allreduce_bench.py",
          "specsweep/engines/sglang/parse_check.py", "specsweep/engines/sglang/model_check.py",
          "specsweep/testing/loopback.py"}
#: Modules not yet moved to the vocabulary (each is a to-do; the list only shrinks).
REMAINING: set[str] = set()


def _word(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _key_of(node: ast.AST) -> str | None:
    """``status`` for ``x["status"]``, ``x.get("status")``, ``x.status``."""
    if isinstance(node, ast.Subscript):
        return _word(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return _word(node.args[0])
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def literals(path: Path) -> list[str]:
    """``line: word`` of each status, stage or reason written as a string where one is meant: a keyword
    ``status=``/``stage=``/``reason=``, the value of such a dict key, or a comparison with such a field."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        hits: list[ast.AST] = []
        if isinstance(node, ast.keyword) and node.arg in KEYS:
            hits.append(node.value)
        elif isinstance(node, ast.Dict):
            hits += [v for k, v in zip(node.keys, node.values) if _word(k) in KEYS]
        elif isinstance(node, ast.Compare) and _key_of(node.left) in KEYS:
            for right in node.comparators:
                hits += list(right.elts) if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        for hit in hits:
            word = _word(hit)
            if word is not None and (word in WORDS or word == "ok"):
                found.append(f"{hit.lineno}: {word!r}")
    return found


def _modules() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "specsweep").rglob("*.py")
                  if "refengine" not in p.parts)


def test_the_package_spells_its_words_through_the_vocabulary():
    spelled = {m: literals(REPO / m) for m in _modules() if m not in EXEMPT | REMAINING}
    assert {m: hits for m, hits in spelled.items() if hits} == {}


def test_the_list_of_modules_left_to_move_only_shrinks():
    done = sorted(m for m in REMAINING if not literals(REPO / m))
    assert done == [], "these modules use the vocabulary now: take them off REMAINING"
    assert sorted(REMAINING - set(_modules())) == []
