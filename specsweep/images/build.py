"""Building an image from its content record, and its manifest ``results/images/<name>.json``.

The manifest is only rewritten when its content changes, so configurations
that use an unchanged image do not rerun (``_publish_with_state``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specsweep import __version__
from specsweep.files import canonical_json, write_json_atomic
from specsweep.images.cli import DockerError, build_command, image_exists, image_inspect, run_docker
from specsweep.images.tag import STAGED_CONTEXTS_DIR, build_context_dirs, content_record, tag_of

# Format history of results/images/<name>.json:
#   1  name, tag, image_id, size_bytes, target, dockerfile(+_sha256), patches,
#      build_args, context_sha256, build_contexts_sha256, base_image, labels,
#      and the volatile keys below.
MANIFEST_FORMAT_VERSION = 1

# Manifest keys that vary between identical builds; ignored when deciding
# whether to rewrite the manifest.
VOLATILE_MANIFEST_KEYS = frozenset({"created", "build_seconds", "reused", "builder"})

# The build host's CA bundle, which includes the intercepting proxy's CA. It
# reaches builds only as the BuildKit secret ``proxy_ca``.
DEFAULT_PROXY_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def git_revision(root: Path) -> str:
    """The checkout's HEAD, or ``unknown`` (no git, or a copy without .git). ``safe.directory`` for this
    one read: a checkout owned by another user (a CI runner's, read as root) is otherwise refused by git
    (>= 2.35.2, "detected dubious ownership"); the label is provenance, nothing runs from it."""
    try:
        proc = subprocess.run(["git", "-c", f"safe.directory={root}", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True)
    except FileNotFoundError:
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance_args(root: Path, source_url: str | None = None) -> dict[str, str]:
    """Label-only build args: source, revision, version, created."""
    return {
        "SOURCE_URL": source_url or "https://github.com/specsweep/specsweep",
        "REVISION": git_revision(root),
        "VERSION": __version__,
        "CREATED": _utc_now(),
    }


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def stage_context(spec: Mapping[str, Any], root: Path, record: Mapping[str, Any], dest: Path) -> Path:
    """Fill ``dest`` with exactly the hashed files (hard links where possible)
    and the Dockerfile; return the Dockerfile's path inside ``dest``."""
    root = Path(root)
    context = root / (spec.get("context") or ".")
    for rel in record["context_files"]:
        _link_or_copy(context / rel, dest / rel)
    bases = build_context_dirs(record["name"], spec, root)
    for cname, files in record["build_contexts"].items():
        base = bases[cname]
        (dest / STAGED_CONTEXTS_DIR / cname).mkdir(parents=True, exist_ok=True)
        for rel in files:
            _link_or_copy(base / rel, dest / STAGED_CONTEXTS_DIR / cname / rel)
    dockerfile = dest / ".specsweep.Dockerfile"
    shutil.copyfile(root / spec["dockerfile"], dockerfile)
    return dockerfile


def build_argv(
    prefix: Sequence[str],
    tag: str,
    spec: Mapping[str, Any],
    dockerfile: Path,
    context: Path,
    iidfile: Path,
    build_args: Mapping[str, str],
    labels: Mapping[str, str],
    secrets: Mapping[str, Path],
) -> list[str]:
    """The full ``docker build`` argv (pure; golden-tested)."""
    argv = [*prefix, "--progress=plain", "--file", str(dockerfile), "--tag", tag, "--iidfile", str(iidfile)]
    if spec.get("target"):
        argv += ["--target", str(spec["target"])]
    for key in sorted(build_args):
        argv += ["--build-arg", f"{key}={build_args[key]}"]
    for key in sorted(labels):
        argv += ["--label", f"{key}={labels[key]}"]
    for sid in sorted(secrets):
        argv += ["--secret", f"id={sid},src={secrets[sid]}"]
    argv.append(str(context))
    return argv


def default_secrets() -> dict[str, Path]:
    """The proxy CA as BuildKit secret ``proxy_ca``, when the host has one."""
    return {"proxy_ca": DEFAULT_PROXY_CA} if DEFAULT_PROXY_CA.is_file() else {}


def _manifest_content(manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in VOLATILE_MANIFEST_KEYS}


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A manifest written earlier, or None when there is none (or it is unreadable: it is then rewritten)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def write_manifest(manifest: Mapping[str, Any], path: Path) -> bool:
    """Write ``manifest`` atomically, only if its content (volatile keys
    aside) differs from what is there. Returns whether it was written."""
    old = read_manifest(path)
    if old is not None and _manifest_content(old) == _manifest_content(manifest):
        return False
    write_json_atomic(path, manifest)
    return True


def build_image(
    name: str,
    spec: Mapping[str, Any],
    root: Path,
    manifest_path: Path,
    log: Path,
    *,
    docker: str = "docker",
    secrets: Mapping[str, Path] | None = None,
    force: bool = False,
    source_url: str | None = None,
    state_path: Path | None = None,
) -> dict[str, Any]:
    """Build image ``name`` from ``spec`` unless its content tag exists.

    Writes ``manifest_path`` (atomically, and only when its content changes)
    and returns the manifest. ``secrets`` defaults to the host's proxy CA as
    ``proxy_ca``; secret *paths* are logged, never their contents.

    ``state_path`` keeps a copy of the last manifest with its mtime. Snakemake
    deletes a job's output before running it, so "do not rewrite an unchanged
    manifest" needs that copy: when the content is unchanged the copy (old
    ``created``, old mtime) is put back, and jobs downstream of the manifest
    see no newer input.
    """
    root = Path(root)
    log = Path(log)
    record = content_record(name, spec, root)
    tag = tag_of(name, record)
    started = time.monotonic()
    reused = (not force) and image_exists(tag, docker)
    builder = "none (reused)"
    if reused:
        with log.open("a") as fh:
            fh.write(f"{tag} exists locally: build skipped\n")
    else:
        prefix, env = build_command(docker)
        builder = " ".join(Path(prefix[0]).name if i == 0 else p for i, p in enumerate(prefix))
        build_args = {str(k): str(v) for k, v in (spec.get("build_args") or {}).items()}
        build_args = {**provenance_args(root, source_url), **build_args}
        labels = {"io.specsweep.image": name, "io.specsweep.content-tag": tag,
                  **({"io.specsweep.project": "specsweep"})}
        with tempfile.TemporaryDirectory(prefix="specsweep-ctx-") as tmp:
            staged = Path(tmp) / "context"
            staged.mkdir()
            dockerfile = stage_context(spec, root, record, staged)
            iidfile = Path(tmp) / "iid"
            argv = build_argv(
                prefix, tag, spec, dockerfile, staged, iidfile, build_args, labels,
                default_secrets() if secrets is None else secrets,
            )
            run_docker(argv, log=log, env=env)
            built_id = iidfile.read_text().strip()
        if image_inspect(tag, docker)["Id"] != built_id:
            raise DockerError(f"{tag} does not point at the image just built ({built_id})")
    info = image_inspect(tag, docker)
    base = (spec.get("build_args") or {}).get("BASE_IMAGE")
    manifest = {
        "format_version": MANIFEST_FORMAT_VERSION,
        "name": name,
        "tag": tag,
        "image_id": info["Id"],
        "size_bytes": info.get("Size"),
        "target": spec.get("target"),
        "dockerfile": spec["dockerfile"],
        "dockerfile_sha256": record["dockerfile_sha256"],
        "patches": record["patches"],
        "build_args": record["build_args"],
        "context_sha256": hashlib.sha256(canonical_json(record["context_files"]).encode()).hexdigest(),
        "build_contexts_sha256": {
            k: hashlib.sha256(canonical_json(v).encode()).hexdigest() for k, v in record["build_contexts"].items()
        },
        "base_image": base,
        "labels": (info.get("Config") or {}).get("Labels") or {},
        "created": _utc_now(),
        "build_seconds": round(time.monotonic() - started, 3),
        "reused": reused,
        "builder": builder,
    }
    # Labels carry provenance args (revision, created) that differ between
    # builds of the same content; keep only the content-defining ones in the
    # compared part of the manifest.
    manifest["labels"] = {
        k: v for k, v in manifest["labels"].items()
        if k not in ("org.opencontainers.image.created", "org.opencontainers.image.revision")
    }
    manifest_path = Path(manifest_path)
    old = read_manifest(manifest_path)
    if old is not None and old.get("image_id") == manifest["image_id"]:
        manifest["created"] = old.get("created", manifest["created"])
    if state_path is not None:
        return _publish_with_state(manifest, manifest_path, Path(state_path))
    write_manifest(manifest, manifest_path)
    return manifest


def state_path_for(manifest_path: Path) -> Path:
    """Where build_image keeps the previous manifest (``<dir>/.state/<name>``)."""
    manifest_path = Path(manifest_path)
    return manifest_path.parent / ".state" / manifest_path.name


def _publish_with_state(manifest: dict[str, Any], manifest_path: Path, state_path: Path) -> dict[str, Any]:
    previous = read_manifest(state_path)
    if previous is not None and _manifest_content(previous) == _manifest_content(manifest):
        if not manifest_path.exists() or manifest_path.read_bytes() != state_path.read_bytes():
            tmp = manifest_path.with_name(f".{manifest_path.name}.restore")
            manifest_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(state_path, tmp)  # copy2: keeps the old mtime
            os.replace(tmp, manifest_path)
        return {**previous, "reused": manifest["reused"], "build_seconds": manifest["build_seconds"]}
    write_manifest(manifest, manifest_path)
    state_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_path.with_name(f".{state_path.name}.tmp")
    shutil.copy2(manifest_path, tmp)
    os.replace(tmp, state_path)
    return manifest
