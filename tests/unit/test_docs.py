"""README.md and docs/*.md speak to users: no tracker numbers, no insider names, no profile that does not exist.

(docs/measurements/ holds dated records and is not read here.)"""

from __future__ import annotations

import re

import pytest

from specsweep.testing.workflow import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_no_insider_words(path):
    text = path.read_text()
    found = [m.group(0) for m in re.finditer(r"\bissues? #?\d+|\bseeds\b|\bthe 3 s goal\b", text, flags=re.I)]
    assert found == [], f"{path.relative_to(REPO)}: {found}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_profile_named_exists(path):
    named = re.findall(r"--(?:workflow-)?profile[ =](\S+)", path.read_text())
    assert all(p.startswith("profiles/") for p in named), named  # a placeholder (`...`, `<x>`) is no pointer
    missing = [p for p in named if not (REPO / p.strip("`'\"")).is_dir()]
    assert missing == [], f"{path.relative_to(REPO)} names profiles that do not exist: {missing}"
