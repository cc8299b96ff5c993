"""Content-addressed image tags: what decides an image's content, hashed.

``image_tag`` hashes everything that decides what is inside an image
(Dockerfile bytes, patch bytes, hashed build args, target, and the bytes of
every context file the Dockerfile copies or mounts, plus any staged extra
build context). An unchanged image is therefore never rebuilt, and a changed
one always gets a new tag.

Build contexts: ``build_contexts`` (``NAME: PATH``) are *staged* into the build
context under ``_contexts/NAME/`` (see ``images.build``), because the docker.io
CLI has no buildx (``--build-context`` needs it); what is hashed is exactly
what is sent.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from specsweep.files import canonical_json

# Format history of the content record (and so of every tag):
#   1  scheme, name, dockerfile_sha256, target, build_args, patches,
#      context_files, build_contexts.
# Bump when the meaning of the content hash changes (forces new tags).
TAG_SCHEME_VERSION = 1

# Build args that only feed labels (provenance). They are passed to the build
# but left out of the content hash and of the manifest's compared content, so a
# new commit or a new build time does not rebuild an unchanged image.
LABEL_ONLY_ARGS = frozenset({"SOURCE_URL", "REVISION", "VERSION", "CREATED"})

# Keys of an image spec that do not change what is built.
NON_CONTENT_SPEC_KEYS = frozenset({"description"})


STAGED_CONTEXTS_DIR = "_contexts"

# Files never part of an image's content, wherever they appear.
_IGNORED_NAMES = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".mypy_cache", ".git")


_FILE_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes (memoised on path, size and mtime: the
    torch wheel is ~200 MB and is hashed for every tag computation)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    cached = _FILE_HASH_CACHE.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    _FILE_HASH_CACHE[key] = digest
    return digest


def _ignored(rel: str) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(part, pat) for part in parts for pat in _IGNORED_NAMES)


def _logical_lines(dockerfile_text: str) -> list[str]:
    """Dockerfile instructions with continuations joined and comments dropped."""
    lines: list[str] = []
    current = ""
    for raw in dockerfile_text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current:
            lines.append(current)
        current = ""
    if current.strip():
        lines.append(current)
    return lines


def _copy_sources(rest: str) -> list[str]:
    """Context sources of a COPY/ADD (none when it copies ``--from`` a stage).

    ``rest`` is the instruction without its keyword: flags, then either the
    JSON-array form or whitespace-separated (shell-quoted) paths.
    """
    m = re.match(r"((?:--\S+\s+)*)(.*)$", rest.strip(), re.S)
    flags, body = (m.group(1).split(), m.group(2).strip()) if m else ([], rest.strip())
    if any(f.startswith("--from=") for f in flags):
        return []
    paths = json.loads(body) if body.startswith("[") else shlex.split(body)
    if len(paths) < 2:
        return []
    return [s for s in paths[:-1] if not re.match(r"^[a-z]+://", s)]


def _mount_sources(args: list[str]) -> list[str]:
    """Context sources bind-mounted by ``RUN --mount=type=bind`` without ``from``."""
    sources = []
    for arg in args:
        if not arg.startswith("--mount="):
            continue
        opts = dict(
            kv.split("=", 1) if "=" in kv else (kv, "") for kv in arg[len("--mount="):].split(",")
        )
        if opts.get("type", "bind") == "bind" and "from" not in opts:
            src = opts.get("source") or opts.get("src") or "."
            sources.append(src)
    return sources


def context_sources(dockerfile_text: str) -> list[str]:
    """Context paths (as written, possibly globs) that a Dockerfile reads.

    COPY/ADD sources (not ``--from``) and ``RUN --mount=type=bind`` sources (not
    ``from=``). Sources under ``_contexts/`` name staged build contexts and
    are handled separately.
    """
    sources: list[str] = []
    for line in _logical_lines(dockerfile_text):
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr in ("COPY", "ADD"):
            sources.extend(_copy_sources(rest))
        elif instr == "RUN":
            sources.extend(_mount_sources(rest.split()))
    out: list[str] = []
    for s in sources:
        s = s.lstrip("/") or "."
        if s.split("/")[0] == STAGED_CONTEXTS_DIR:
            continue
        if s not in out:
            out.append(s)
    return out


def _files_under(base: Path, rel: str) -> list[str]:
    """Context-relative file paths matched by one source (file, dir or glob)."""
    matches = sorted(glob.glob(str(base / rel))) if glob.has_magic(rel) else [str(base / rel)]
    found: list[str] = []
    for m in matches:
        p = Path(m)
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
                for fn in sorted(filenames):
                    full = Path(dirpath) / fn
                    r = full.relative_to(base).as_posix()
                    if not _ignored(r):
                        found.append(r)
        elif p.is_file():
            r = p.relative_to(base).as_posix()
            if not _ignored(r):
                found.append(r)
    return found


def context_files(context: Path, sources: Iterable[str]) -> list[str]:
    """Sorted context-relative files behind ``sources`` (missing ones omitted;
    the build itself fails loudly on those)."""
    files: set[str] = set()
    for src in sources:
        files.update(_files_under(context, "." if src in ("", ".") else src))
    return sorted(files)


def _tree_hashes(base: Path, rels: Iterable[str]) -> dict[str, str]:
    return {rel: sha256_file(base / rel) for rel in rels}


def _hashed_build_args(spec: Mapping[str, Any]) -> dict[str, str]:
    args = spec.get("build_args") or {}
    return {str(k): str(v) for k, v in sorted(args.items()) if k not in LABEL_ONLY_ARGS}


def build_context_dirs(name: str, spec: Mapping[str, Any], root: Path) -> dict[str, Path]:
    """Each extra build context's folder (a relative path is relative to the
    workflow root, like ``context``); a missing one is an error naming its key."""
    out = {}
    for cname, cpath in (spec.get("build_contexts") or {}).items():
        base = Path(root) / str(cpath)
        if not base.is_dir():
            raise ValueError(f"images.{name}.build_contexts.{cname}: {cpath} is not a folder"
                             f" (looked for {base.resolve()})")
        out[str(cname)] = base
    return out


def content_record(name: str, spec: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """Everything the image tag is computed from (also stored in the manifest,
    so that a changed tag can be explained by diffing two manifests)."""
    root = Path(root)
    dockerfile = root / spec["dockerfile"]
    context = root / (spec.get("context") or ".")
    text = dockerfile.read_text()
    files = context_files(context, context_sources(text))
    build_contexts = {
        cname: _tree_hashes(base, context_files(base, ["."]))
        for cname, base in sorted(build_context_dirs(name, spec, root).items())
    }
    return {
        "scheme": TAG_SCHEME_VERSION,
        "name": name,
        "dockerfile_sha256": sha256_file(dockerfile),
        "target": spec.get("target"),
        "build_args": _hashed_build_args(spec),
        "patches": {p: sha256_file(root / p) for p in (spec.get("patches") or [])},
        "context_files": _tree_hashes(context, files),
        "build_contexts": build_contexts,
    }


def content_spec_json(spec: Mapping[str, Any]) -> str:
    """Canonical JSON of an image spec without its non-content keys (what
    the build rule's params hold: a description edit reruns nothing)."""
    return canonical_json({k: v for k, v in spec.items() if k not in NON_CONTENT_SPEC_KEYS})


def content_digest(record: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a content record."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()


def tag_of(name: str, record: Mapping[str, Any]) -> str:
    """The one tag formula: ``specsweep/<name>:<first 12 hex of the content digest>``."""
    return f"specsweep/{name}:{content_digest(record)[:12]}"


def image_tag(name: str, spec: Mapping[str, Any], root: Path) -> str:
    """Content-addressed tag ``specsweep/<name>:<12 hex>``.

    The hash covers the Dockerfile bytes, patch bytes, build args (canonical
    JSON, label-only args excluded), the target, and the bytes of every
    context file the Dockerfile copies or bind-mounts (for the reference image:
    ``specsweep/__init__.py`` and ``specsweep/refengine/**``), plus staged
    build contexts (the torch wheel folder). Nothing else: editing an unrelated
    key, or the image's ``description``, gives the same tag.
    """
    return tag_of(name, content_record(name, spec, root))
