"""Container images and containers, through the docker CLI.

Why the CLI (via ``subprocess`` argv lists) and not the docker SDK: the SDK
cannot drive BuildKit (secret mounts are how the build host's proxy CA reaches
pip without landing in a layer), it adds a dependency, and the argv we run is
exactly what a person would type to reproduce a step by hand.

Images are *content-addressed*: ``image_tag`` hashes everything that decides
what is inside an image (Dockerfile bytes, patch bytes, hashed build args,
target, and the bytes of every context file the Dockerfile copies or mounts,
plus any staged extra build context). An unchanged image is therefore never
rebuilt, and a changed one always gets a new tag; the per-image manifest
``results/images/<name>.json`` is only rewritten when its content changes, so
configurations that use an unchanged image do not rerun.

Build contexts: ``build_contexts`` (``NAME: PATH``) are *staged* into the build
context under ``_contexts/NAME/``, because the docker.io CLI has no buildx
(``--build-context`` needs it). The context sent to the daemon is a staging
directory holding only the files the Dockerfile references: what is hashed is
exactly what is sent.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST_FORMAT_VERSION = 1
# Bump when the meaning of the content hash changes (forces new tags).
TAG_SCHEME_VERSION = 1

PROJECT_LABEL = "io.specsweep.project=specsweep"
CONFIG_LABEL_KEY = "io.specsweep.config"

# Build args that only feed labels (provenance). They are passed to the build
# but left out of the content hash and of the manifest's compared content, so a
# new commit or a new build time does not rebuild an unchanged image.
LABEL_ONLY_ARGS = frozenset({"SOURCE_URL", "REVISION", "VERSION", "CREATED"})

# Keys of an image spec that do not change what is built.
NON_CONTENT_SPEC_KEYS = frozenset({"description"})

# Manifest keys that vary between identical builds; ignored when deciding
# whether to rewrite the manifest.
VOLATILE_MANIFEST_KEYS = frozenset({"created", "build_seconds", "reused", "builder"})

# The build host's CA bundle, which includes the intercepting proxy's CA. It
# reaches builds only as the BuildKit secret ``proxy_ca``.
DEFAULT_PROXY_CA = Path("/etc/ssl/certs/ca-certificates.crt")

STAGED_CONTEXTS_DIR = "_contexts"

# Files never part of an image's content, wherever they appear.
_IGNORED_NAMES = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".mypy_cache", ".git")


class DockerError(RuntimeError):
    """A docker command failed, or the engine/BuildKit is not usable."""


# --------------------------------------------------------------------------
# hashing


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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


def content_record(name: str, spec: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """Everything the image tag is computed from (also stored in the manifest,
    so that a changed tag can be explained by diffing two manifests)."""
    root = Path(root)
    dockerfile = root / spec["dockerfile"]
    context = root / (spec.get("context") or ".")
    text = dockerfile.read_text()
    files = context_files(context, context_sources(text))
    build_contexts = {
        cname: _tree_hashes(Path(cpath), context_files(Path(cpath), ["."]))
        for cname, cpath in sorted((spec.get("build_contexts") or {}).items())
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


def image_tag(name: str, spec: Mapping[str, Any], root: Path) -> str:
    """Content-addressed tag ``specsweep/<name>:<12 hex>``.

    The hash covers the Dockerfile bytes, patch bytes, build args (canonical
    JSON, label-only args excluded), the target, and the bytes of every
    context file the Dockerfile copies or bind-mounts (for the reference image:
    ``specsweep/__init__.py`` and ``specsweep/refengine/**``), plus staged
    build contexts (the torch wheel folder). Nothing else: editing an unrelated
    key, or the image's ``description``, gives the same tag.
    """
    return f"specsweep/{name}:{content_digest(content_record(name, spec, root))[:12]}"


# --------------------------------------------------------------------------
# running docker


def _run(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run one docker command. With ``log``, output is appended there (the
    argv first, so the log says what ran); otherwise it is captured."""
    full_env = None if env is None else {**os.environ, **env}
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"$ {shlex.join(argv)}\n")
            fh.flush()
            proc = subprocess.run(
                list(argv), stdout=fh, stderr=subprocess.STDOUT, text=True,
                input=input_text, env=full_env, timeout=timeout,
            )
            fh.write(f"[exit {proc.returncode}]\n")
    else:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, input=input_text,
            env=full_env, timeout=timeout,
        )
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip()[-2000:] if log is None else f"see {log}"
        raise DockerError(f"{shlex.join(argv)} exited {proc.returncode}: {detail}")
    return proc


def engine_available(docker: str = "docker") -> bool:
    """Whether the docker engine answers (``docker info``)."""
    try:
        return _run([docker, "info", "--format", "{{.ServerVersion}}"], check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _docker_candidates(docker: str) -> list[str]:
    seen: list[str] = []
    first = shutil.which(docker) or docker
    seen.append(first)
    for d in os.get_exec_path():
        cand = Path(d) / "docker"
        if cand.is_file() and os.access(cand, os.X_OK) and str(cand) not in seen:
            seen.append(str(cand))
    return seen


def build_command(docker: str = "docker") -> tuple[list[str], dict[str, str]]:
    """The argv prefix and extra env of a BuildKit build.

    BuildKit is required (secret mounts). ``docker buildx build --load`` when
    buildx is installed; otherwise a CLI older than 23 runs BuildKit itself
    with ``DOCKER_BUILDKIT=1`` (Debian's docker.io 20.10). Newer CLIs without
    buildx refuse BuildKit, so other ``docker`` binaries on PATH are tried.
    """
    tried = []
    for exe in _docker_candidates(docker):
        try:
            if _run([exe, "buildx", "version"], check=False, timeout=30).returncode == 0:
                return [exe, "buildx", "build", "--load"], {}
            ver = _run([exe, "version", "--format", "{{.Client.Version}}"], check=False, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{exe}: {exc}")
            continue
        m = re.match(r"(\d+)\.", (ver.stdout or "").strip())
        if m and int(m.group(1)) < 23:
            return [exe, "build"], {"DOCKER_BUILDKIT": "1"}
        tried.append(f"{exe}: client {(ver.stdout or '?').strip()} without buildx")
    raise DockerError("no BuildKit-capable docker CLI found (" + "; ".join(tried) + ")")


def image_exists(ref: str, docker: str = "docker") -> bool:
    """Whether an image with this reference exists locally."""
    return _run([docker, "image", "inspect", ref], check=False).returncode == 0


def image_inspect(ref: str, docker: str = "docker") -> dict[str, Any]:
    """``docker image inspect`` of one image."""
    return json.loads(_run([docker, "image", "inspect", ref]).stdout)[0]


def _git_revision(root: Path) -> str:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance_args(root: Path, source_url: str | None = None) -> dict[str, str]:
    """Label-only build args: source, revision, version, created."""
    from specsweep import __version__

    return {
        "SOURCE_URL": source_url or "https://github.com/specsweep/specsweep",
        "REVISION": _git_revision(root),
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
    for cname, files in record["build_contexts"].items():
        base = Path(spec["build_contexts"][cname])
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


def write_manifest(manifest: Mapping[str, Any], path: Path) -> bool:
    """Write ``manifest`` atomically, only if its content (volatile keys
    aside) differs from what is there. Returns whether it was written."""
    path = Path(path)
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            old = None
        if old is not None and _manifest_content(old) == _manifest_content(manifest):
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a result file is for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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
    tag = f"specsweep/{name}:{content_digest(record)[:12]}"
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
        labels = {"io.specsweep.image": name, "io.specsweep.content-tag": tag, **({"io.specsweep.project": "specsweep"})}
        with tempfile.TemporaryDirectory(prefix="specsweep-ctx-") as tmp:
            staged = Path(tmp) / "context"
            staged.mkdir()
            dockerfile = stage_context(spec, root, record, staged)
            iidfile = Path(tmp) / "iid"
            argv = build_argv(
                prefix, tag, spec, dockerfile, staged, iidfile, build_args, labels,
                default_secrets() if secrets is None else secrets,
            )
            _run(argv, log=log, env=env)
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
    if Path(manifest_path).exists():
        try:
            old = json.loads(Path(manifest_path).read_text())
            if old.get("image_id") == manifest["image_id"]:
                manifest["created"] = old.get("created", manifest["created"])
        except (OSError, json.JSONDecodeError):
            pass
    manifest_path = Path(manifest_path)
    if state_path is not None:
        return _publish_with_state(manifest, manifest_path, Path(state_path))
    write_manifest(manifest, manifest_path)
    return manifest


def state_path_for(manifest_path: Path) -> Path:
    """Where build_image keeps the previous manifest (``<dir>/.state/<name>``)."""
    manifest_path = Path(manifest_path)
    return manifest_path.parent / ".state" / manifest_path.name


def _publish_with_state(manifest: dict[str, Any], manifest_path: Path, state_path: Path) -> dict[str, Any]:
    previous = None
    if state_path.exists():
        try:
            previous = json.loads(state_path.read_text())
        except (OSError, json.JSONDecodeError):
            previous = None
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


# --------------------------------------------------------------------------
# registry


def registry_ref(manifest: Mapping[str, Any], registry: Mapping[str, Any]) -> str:
    """``<url>/<namespace>/<name>:<hash>`` for an image manifest."""
    tag = manifest["tag"].rsplit(":", 1)[1]
    namespace = (registry.get("namespace") or "specsweep").strip("/")
    return f"{registry['url'].rstrip('/')}/{namespace}/{manifest['name']}:{tag}"


def login(registry: Mapping[str, Any], log: Path | None, environ: Mapping[str, str], docker: str = "docker") -> bool:
    """``docker login --password-stdin`` when the registry names a password
    variable; the password travels on stdin only (never argv, log, manifest)."""
    var = registry.get("password_env")
    if not var:
        return False
    if var not in environ:
        raise DockerError(f"registry.password_env names {var!r}, which is not set in the environment")
    argv = [docker, "login", "--password-stdin"]
    if registry.get("username"):
        argv += ["--username", str(registry["username"])]
    argv.append(str(registry["url"]))
    _run(argv, log=log, input_text=environ[var])
    return True


def push_image(
    manifest: Mapping[str, Any],
    registry: Mapping[str, Any],
    log: Path,
    *,
    environ: Mapping[str, str] | None = None,
    docker: str = "docker",
) -> dict[str, Any]:
    """Tag the manifest's image for ``registry`` and push it. Returns
    ``{"name", "ref", "image_id", "repo_digest"}``."""
    log = Path(log)
    login(registry, log, os.environ if environ is None else environ, docker)
    ref = registry_ref(manifest, registry)
    _run([docker, "tag", manifest["image_id"], ref], log=log)
    _run([docker, "push", ref], log=log)
    digests = image_inspect(ref, docker).get("RepoDigests") or []
    repo = ref.rsplit(":", 1)[0]
    digest = next((d for d in digests if d.startswith(repo + "@")), None)
    return {"name": manifest["name"], "ref": ref, "image_id": manifest["image_id"], "repo_digest": digest}


def pull_image(ref: str, *, docker: str = "docker", log: Path | None = None) -> str:
    """``docker pull`` one reference; returns the local image id."""
    _run([docker, "pull", ref], log=log)
    return image_inspect(ref, docker)["Id"]


# --------------------------------------------------------------------------
# containers


def run_argv(
    plan: Mapping[str, Any],
    image_ref: str,
    host: str,
    port: int,
    container_port: int,
    container_name: str,
    *,
    docker: str = "docker",
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``docker run`` argv for a plan (pure; golden-tested).

    Env vars are passed as ``-e KEY`` only: the caller must put the values in
    the docker client's environment (see ``run_env``), so that no value shows
    up in ``ps``. ``extra_args`` are appended after the plan's argv (the
    engine's address flags, e.g. ``--host 0.0.0.0 --port <container_port>``).
    """
    argv = [
        docker, "run", "--rm",
        "--name", container_name,
        "--label", f"{CONFIG_LABEL_KEY}={plan['name']}",
        "--label", PROJECT_LABEL,
        "-p", f"{host or '127.0.0.1'}:{int(port)}:{int(container_port)}",
        "--init",
    ]
    for key in sorted(plan.get("env") or {}):
        argv += ["-e", str(key)]
    for volume in plan.get("volumes") or []:
        host_path, _, rest = str(volume).partition(":")
        argv += ["-v", f"{os.path.abspath(host_path)}:{rest}"]
    gpus = int(plan.get("gpus") or 0)
    if gpus > 0:
        argv += [
            "--gpus", str(plan.get("gpu_devices") or gpus),
            "--ipc=host",
            "--shm-size", str(plan.get("shm_size") or "16g"),
            "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864",
        ]
    elif plan.get("shm_size"):
        argv += ["--shm-size", str(plan["shm_size"])]
    argv.append(image_ref)
    argv += [str(a) for a in plan["argv"]]
    argv += [str(a) for a in extra_args]
    return argv


def run_env(plan: Mapping[str, Any], base_env: Mapping[str, str]) -> dict[str, str]:
    """Environment for the ``docker run`` child: ``base_env`` plus the plan's
    env values (which ``-e KEY`` then forwards into the container)."""
    return {**base_env, **{str(k): str(v) for k, v in (plan.get("env") or {}).items()}}


def containers_with_label(label: str = PROJECT_LABEL, *, docker: str = "docker", all_states: bool = True) -> list[str]:
    """Names of containers carrying ``label`` (``key=value`` or ``key``)."""
    argv = [docker, "ps", "--filter", f"label={label}", "--format", "{{.Names}}"]
    if all_states:
        argv.insert(2, "--all")
    out = _run(argv).stdout
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def remove_container(name: str, *, docker: str = "docker") -> bool:
    """``docker rm -f`` one container; False if it did not exist.

    Existence is checked first: newer CLIs exit 0 from ``rm -f`` on a missing
    container, older ones print "No such container"; both mean False here.
    """
    if _run([docker, "container", "inspect", "--format", "{{.Id}}", name], check=False).returncode != 0:
        return False
    proc = _run([docker, "rm", "-f", name], check=False)
    if proc.returncode == 0:
        return True
    if "No such container" in (proc.stderr or ""):
        return False  # a --rm container that went away meanwhile
    raise DockerError(f"docker rm -f {name} exited {proc.returncode}: {(proc.stderr or '').strip()}")


def remove_leftovers(config_name: str, *, docker: str = "docker") -> list[str]:
    """Remove every container labelled ``io.specsweep.config=<config_name>``
    (a previous run's server killed before its teardown); returns their names."""
    names = containers_with_label(f"{CONFIG_LABEL_KEY}={config_name}", docker=docker)
    return [n for n in names if remove_container(n, docker=docker)]


def ensure_image(
    manifest: Mapping[str, Any],
    registry: Mapping[str, Any] | None,
    *,
    docker: str = "docker",
    log: Path | None = None,
) -> dict[str, Any]:
    """Make the manifest's image present on this host without building it.

    A server job on a cluster node never builds: the image was built (and
    pushed with ``snakemake push``) on the submit host. Present under its
    content tag with the manifest's image id: nothing to do. Absent: pull
    ``registry_ref(manifest, registry)``, check that the pulled image id is
    the manifest's (the id is the digest of the image config, which a push
    and pull keep), then tag it with the content tag, so that ``run_argv``
    runs exactly what a local run would. Returns what happened, for
    launch.json; raises DockerError when the image cannot be had or is not
    the manifest's image.
    """
    tag, want = manifest["tag"], manifest["image_id"]
    if image_exists(tag, docker):
        have = image_inspect(tag, docker)["Id"]
        if have != want:
            raise DockerError(
                f"{tag} on this host is image {have}, the manifest {manifest['name']}.json says {want}: "
                "a stale or foreign image holds the content tag; remove it (docker rmi) so the right one is pulled"
            )
        return {"tag": tag, "image_id": have, "source": "local"}
    if not registry or not registry.get("url"):
        raise DockerError(
            f"{tag} is not on this host and no `registry:` is configured to pull it from; a server job "
            "never builds: set `registry:` and run `snakemake push` on the build host first"
        )
    ref = registry_ref(manifest, registry)
    login(registry, log, os.environ, docker)
    started = time.monotonic()
    try:
        pulled = pull_image(ref, docker=docker, log=log)
    except DockerError as exc:
        raise DockerError(f"could not pull {ref} (was `snakemake push` run?): {exc}") from exc
    if pulled != want:
        raise DockerError(f"pulled {ref} is image {pulled}, the manifest {manifest['name']}.json says {want}")
    _run([docker, "tag", pulled, tag], log=log)
    digests = image_inspect(ref, docker).get("RepoDigests") or []
    return {
        "tag": tag,
        "image_id": pulled,
        "source": "pulled",
        "ref": ref,
        "repo_digest": next((d for d in digests if d.startswith(ref.rsplit(":", 1)[0] + "@")), None),
        "pull_s": round(time.monotonic() - started, 3),
    }


def prepare_launch(
    config_name: str, manifest: Mapping[str, Any], registry: Mapping[str, Any] | None, *, docker: str = "docker"
) -> dict[str, Any]:
    """What the docker runtime does on the node before a launch: remove a
    previous run's leftover containers of this configuration, and make the
    image present (``ensure_image``). Returns the launch.json keys."""
    return {
        "removed_leftover_containers": remove_leftovers(config_name, docker=docker),
        "image_source": ensure_image(manifest, registry, docker=docker),
    }


@dataclass(frozen=True)
class ContainerRuntime:
    """How one container runtime launches a server (the seam for more runtimes).

    ``prepare(config_name, manifest, registry)`` runs on the node before the
    launch and returns launch.json keys; ``run_argv(plan, image_ref, host,
    port, container_port, container_name)`` is the launching argv, whose
    process the server job supervises. ``daemon``: whether the server lives in
    a daemon's container (docker: named, removed by name, provenance read
    with ``docker exec``) rather than as a child process (Apptainer, enroot:
    the process group is the server, as for the local runtime).
    """

    prepare: Callable[..., dict[str, Any]]
    run_argv: Callable[..., list[str]]
    daemon: bool


# A plan's `runtime` (other than `local`) -> its launcher. An Apptainer or
# Pyxis/enroot runtime is one more entry here (and in the schema's enum):
# see docs/slurm.md.
CONTAINER_RUNTIMES: dict[str, ContainerRuntime] = {
    "docker": ContainerRuntime(prepare=prepare_launch, run_argv=run_argv, daemon=True),
}


# --------------------------------------------------------------------------
# Snakemake input functions (rules/images.smk)


class ImageRuleInputs:
    """Named input/params functions of rules/images.smk, bound to the config's
    ``images`` and ``registry`` and to the workflow root.

    Why a class here and not ``def``s in the .smk: the functions stay
    importable and testable, the rule file stays wiring only, and nothing reads
    a global ``config``: it is handed over once, explicitly.
    """

    def __init__(self, images: Mapping[str, Any] | None, registry: Mapping[str, Any] | None, root: Path) -> None:
        self.images = dict(images or {})
        self.registry = dict(registry or {})
        self.root = Path(root)

    def spec_json(self, wildcards: Any) -> str:
        """This image's spec (content keys only) as canonical JSON."""
        return content_spec_json(self.images[wildcards.image])

    def tag(self, wildcards: Any) -> str:
        """The content-addressed tag the build must produce."""
        return image_tag(wildcards.image, self.images[wildcards.image], self.root)

    def all_manifests(self, wildcards: Any) -> list[str]:
        """Every image's manifest (what `push` needs)."""
        return [f"results/images/{name}.json" for name in sorted(self.images)]

    def registry_json(self, wildcards: Any) -> str:
        """The registry mapping as canonical JSON (password_env is a variable NAME)."""
        return canonical_json(self.registry)
