"""The test tree itself: pytest imports test modules by their file name (rootdir-relative, no packages),
so two modules of one name anywhere under tests/ stop the whole collection ("import file mismatch")."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def modules_by_name(root: Path) -> dict[str, list[str]]:
    names: dict[str, list[str]] = defaultdict(list)
    for path in root.rglob("test_*.py"):
        names[path.name].append(str(path.relative_to(root)))
    return names


def test_no_two_test_modules_share_a_file_name():
    shared = {name: paths for name, paths in modules_by_name(TESTS).items() if len(paths) > 1}
    assert not shared, f"test modules of one name (pytest collects only one of each): {shared}"


def test_the_check_sees_a_shared_name(tmp_path):
    for folder in ("unit", "e2e"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same.py").write_text("")
    assert sorted(modules_by_name(tmp_path)["test_same.py"]) == ["e2e/test_same.py", "unit/test_same.py"]
