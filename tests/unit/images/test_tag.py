"""specsweep.images.tag: context sources of a Dockerfile and content-addressed tags."""

from __future__ import annotations

import pytest

from specsweep.images import tag as tags
from specsweep.testing.doubles import mini_repo
from specsweep.testing.workflow import REPO


def test_context_sources_parses_copy_add_and_bind_mounts():
    text = """
    FROM base AS b
    COPY --chown=1:1 a.txt dir/ /dst/
    COPY --from=b /opt/venv /opt/venv
    ADD ["sp ace.txt", "/x/"]
    RUN --mount=type=secret,id=proxy_ca,target=/s \\
        --mount=type=bind,source=containers/x.patch,target=/p \\
        --mount=type=bind,from=b,source=/wheels,target=/w \\
        --mount=type=bind,source=_contexts/wheels,target=/wheels \\
        echo hi
    # COPY commented.txt /nope
    """
    assert tags.context_sources(text) == ["a.txt", "dir/", "sp ace.txt", "containers/x.patch"]


def test_reference_dockerfile_sources():
    text = (REPO / "containers/reference/Dockerfile").read_text()
    assert tags.context_sources(text) == [
        "containers/reference/constraints.txt", "specsweep/__init__.py", "specsweep/refengine",
    ]


def test_image_tag_format_and_stability(tmp_path):
    root, spec = mini_repo(tmp_path)
    tag = tags.image_tag("ref", spec, root)
    assert tag.startswith("specsweep/ref:") and len(tag.split(":")[1]) == 12
    assert tags.image_tag("ref", dict(spec), root) == tag
    # Not content: description, label-only args, unrelated files, bytecode.
    assert tags.image_tag("ref", {**spec, "description": "other"}, root) == tag
    assert tags.image_tag("ref", {**spec, "build_args": {"A": "1", "REVISION": "def", "CREATED": "now"}}, root) == tag
    (root / "other.py").write_text("changed\n")
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"other junk")
    assert tags.image_tag("ref", spec, root) == tag
    # Build-arg order does not matter (canonical JSON).
    assert tags.image_tag("ref", {**spec, "build_args": {"REVISION": "abc", "A": "1"}}, root) == tag


@pytest.mark.parametrize("change", ["build_arg", "target", "dockerfile", "patch", "source", "wheel", "new_source"])
def test_image_tag_changes_with_content(tmp_path, change):
    root, spec = mini_repo(tmp_path)
    before = tags.image_tag("ref", spec, root)
    if change == "build_arg":
        spec = {**spec, "build_args": {"A": "2"}}
    elif change == "target":
        spec = {**spec, "target": "other"}
    elif change == "dockerfile":
        (root / "Dockerfile").write_text("FROM base\nCOPY pkg /app/pkg\nRUN true\n")
    elif change == "patch":
        (root / "p.patch").write_text("--- a/y\n+++ b/y\n")
    elif change == "source":
        (root / "pkg" / "mod.py").write_text("x = 2\n")
    elif change == "wheel":
        (tmp_path / "wheels" / "w-1.whl").write_bytes(b"wheel2")
    elif change == "new_source":
        (root / "pkg" / "new.py").write_text("")
    assert tags.image_tag("ref", spec, root) != before


def test_content_spec_json_drops_description():
    a = tags.content_spec_json({"dockerfile": "D", "description": "x", "build_args": {"B": 1, "A": 2}})
    b = tags.content_spec_json({"build_args": {"A": 2, "B": 1}, "dockerfile": "D"})
    assert a == b


def test_a_relative_build_context_is_relative_to_the_workflow_root_and_a_missing_one_is_named(tmp_path):
    root, spec = mini_repo(tmp_path)
    absolute = tags.image_tag("img", spec, root)
    relative = {**spec, "build_contexts": {"wheels": "../wheels"}}  # tmp_path/wheels, seen from tmp_path/repo
    assert tags.image_tag("img", relative, root) == absolute
    missing = {**spec, "build_contexts": {"wheels": "../not-staged"}}
    with pytest.raises(ValueError, match=r"images\.img\.build_contexts\.wheels: \.\./not-staged is not a folder"):
        tags.image_tag("img", missing, root)
