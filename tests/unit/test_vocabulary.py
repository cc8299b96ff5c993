"""The words results are told in: members write exactly the files' strings, and the package spells
statuses, stages and reasons through them, not as literals."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from specsweep.contracts.vocabulary import (
    CALLED,
    COMPARED,
    COMPARISON_VERDICTS,
    STATUS_ORDER,
    Expect,
    Failure,
    Reason,
    RequestStatus,
    Stage,
    StageStatus,
    Status,
    Verdict,
)
from specsweep.testing.workflow import REPO

VOCABULARIES = (Status, RequestStatus, StageStatus, Stage, Reason, Expect, Verdict)


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
    assert {s.value for s in Verdict} == {"faster", "slower", "no significant difference", "insufficient samples",
                                          "baseline", "no baseline", "no baseline at this point"}
    assert COMPARISON_VERDICTS == tuple(stats_compare_verdicts())
    assert set(CALLED) < set(COMPARISON_VERDICTS) and set(COMPARED) < set(Status)


def stats_compare_verdicts() -> list[Verdict]:
    """What ``analysis.stats.compare`` says of a higher side, a lower one, an equal one and one too small to
    judge: ``COMPARISON_VERDICTS``, in its order."""
    from specsweep.analysis.stats import Noise, Sample, compare

    noise = Noise(var=0.0004, df=10, request_var=None, unit="launch", sides=2, units=6)

    def side(value: float) -> Sample:
        return Sample([value] * 12, [f"l{i % 3}" for i in range(12)])

    return [compare(side(2.0), side(1.0), noise)["verdict"], compare(side(1.0), side(2.0), noise)["verdict"],
            compare(side(1.0), side(1.0), noise)["verdict"],
            compare(Sample([1.0], ["l0"]), side(1.0), noise)["verdict"]]


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

#: What a status, stage, reason or verdict literal would be (``ok`` counts only where a status is meant).
WORDS = {m.value for v in (Status, StageStatus, Stage, Reason, Verdict) for m in v} | {
    RequestStatus.ERROR.value, RequestStatus.INCOMPLETE.value}
KEYS = {"status", "stage", "reason", "verdict"}
#: Words no other string of the package is: a literal of one, anywhere but a docstring, is the word.
DISTINCT = {Status.CONTAMINATED.value, *(v.value for v in Verdict if v is not Verdict.BASELINE)}
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


def _keyed(key: str | None) -> bool:
    """A field that holds a word: ``status``, ``stage``, ``reason``, ``verdict`` (and ``own_verdict``, ...)."""
    return key is not None and (key in KEYS or key.endswith("_verdict"))


def keyed_literals(path: Path) -> list[tuple[int, str]]:
    """(line, string) of every string written where a status, stage, reason or verdict is meant: a keyword
    ``status=``/``stage=``/``reason=``/``verdict=``, the value of such a dict key, or a comparison with such
    a field."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        hits: list[ast.AST] = []
        if isinstance(node, ast.keyword) and _keyed(node.arg):
            hits.append(node.value)
        elif isinstance(node, ast.Dict):
            hits += [v for k, v in zip(node.keys, node.values) if _keyed(_word(k))]
        elif isinstance(node, ast.Compare) and _keyed(_key_of(node.left)):
            for right in node.comparators:
                hits += list(right.elts) if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        found += [(hit.lineno, word) for hit in hits if (word := _word(hit)) is not None]
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)}
    found += [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
              and n.value in DISTINCT and id(n) not in docstrings]
    return found


def literals(path: Path) -> list[str]:
    """``line: word`` of each status, stage, reason or verdict written as a string where one is meant
    (``keyed_literals``), or of a word no other string is (``DISTINCT``) anywhere but in a docstring."""
    return sorted({f"{line}: {word!r}" for line, word in keyed_literals(path) if word in WORDS or word == "ok"})


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


#: The scripts that run in another interpreter keep their own copies of the words they write.
PROBES = sorted(EXEMPT - {"specsweep/contracts/vocabulary.py", "specsweep/testing/loopback.py"})


@pytest.mark.parametrize("probe", PROBES)
def test_the_standard_library_scripts_copies_are_the_vocabulary_s_words(probe):
    """Where a probe writes a status, stage, reason or verdict (it cannot import the vocabulary), it is one of
    the vocabulary's words: a word renamed there and not in the copy fails here."""
    vocabulary = {m.value for v in VOCABULARIES for m in v}
    assert [f"{line}: {word!r}" for line, word in keyed_literals(REPO / probe) if word not in vocabulary] == []
