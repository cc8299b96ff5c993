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


#: What ships and is read by users: the config files (config.yaml first: the file a new user reads), the docs
#: (a measurement record's own words: its README; the files it copied from a run, report.md and summary.csv,
#: are quoted output and keep theirs), the package, the workflow (Snakefile, rules, schema, profiles, captions)
#: and the scripts, images and benchmarks a user runs. Not the tests.
SHIPPED_ROOTS = ("config", "docs", "specsweep", "rules", "schemas", "profiles", "report", "envs", "scripts",
                 "containers", "benchmarks", ".ci")
SHIPPED_FILES = ("config.yaml", "Snakefile", "README.md", "pyproject.toml", "requirements.txt")
SHIPPED = [*(REPO / f for f in SHIPPED_FILES)] + [
    p for root in SHIPPED_ROOTS for p in sorted((REPO / root).rglob("*"))
    if p.is_file() and "__pycache__" not in p.parts
    and p.suffix in {".py", ".md", ".yaml", ".yml", ".json", ".txt", ".sh", ".smk", ".rst", ".cu", ".patch", ""}
    and not (p.parts[len(REPO.parts):][:2] == ("docs", "measurements") and p.name != "README.md")]
#: Paths no user has: this project's working tree and notes outside the repository.
OUTSIDE = re.compile(r"/work/|\bDOMAIN\.md\b|/root/|/home/[a-z]")


def tracker_numbers(text: str) -> list[str]:
    """"issue 12" of this project's own tracker; an upstream one named with its repository ("deepseek-ai/DeepEP
    issue 164 (and issue 9)") is a citation."""
    return [m.group(0) for m in re.finditer(r"\bissues? #?\d+", text, flags=re.I)
            if not re.search(r"[\w.-]+/[\w.-]+ issues? #?\d+", text[max(0, m.start() - 80):m.end()])]


def test_a_tracker_number_is_found_and_an_upstream_citation_is_not():
    assert tracker_numbers("plans made before issue 12 stay valid") == ["issue 12"]
    assert tracker_numbers("deepseek-ai/DeepEP issue 164 (and issue 9)") == []


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_what_ships_names_no_path_outside_the_repository_and_no_seeds(path):
    text = path.read_text(errors="replace")
    found = [m.group(0) for m in re.finditer(r"\bseeds\b", text, flags=re.IGNORECASE)] + OUTSIDE.findall(text)
    found += tracker_numbers(text)
    assert found == [], f"{path.relative_to(REPO)}: {found}"
    if path.suffix == ".md":  # a relative link stays inside the checkout
        for target in re.findall(r"\]\((?!https?:|#|mailto:)([^)#\s]+)", text):
            resolved = (path.parent / target).resolve()
            assert resolved.is_relative_to(REPO.resolve()), f"{path.relative_to(REPO)} links outside: {target}"


def test_the_kimi_case_facts_live_in_the_projects_docs():
    config = (REPO / "config/kimi-k25-8gpu.yaml").read_text()
    assert "docs/sglang.md" in config.splitlines()[1]
    case = (REPO / "docs/sglang.md").read_text()
    facts = ("82 tok/s", "60 tok/s", "52 tok/s", "~25 ms communication", "2.46", "failed during CUDA graph capture")
    for fact in facts:
        assert fact in case, fact
