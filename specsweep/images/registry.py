"""Pushing images to a registry and pulling them back, by content-addressed tag.

Credentials, if any, come from the environment variable that
``registry.password_env`` names; the password travels on stdin to ``docker
login`` only (never argv, log or manifest).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specsweep.images.cli import DockerError, image_exists, image_inspect, run_docker


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
    run_docker(argv, log=log, input_text=environ[var])
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
    run_docker([docker, "tag", manifest["image_id"], ref], log=log)
    run_docker([docker, "push", ref], log=log)
    digests = image_inspect(ref, docker).get("RepoDigests") or []
    repo = ref.rsplit(":", 1)[0]
    digest = next((d for d in digests if d.startswith(repo + "@")), None)
    return {"name": manifest["name"], "ref": ref, "image_id": manifest["image_id"], "repo_digest": digest}


def pull_image(ref: str, *, docker: str = "docker", log: Path | None = None) -> str:
    """``docker pull`` one reference; returns the local image id."""
    run_docker([docker, "pull", ref], log=log)
    return image_inspect(ref, docker)["Id"]


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
    run_docker([docker, "tag", pulled, tag], log=log)
    digests = image_inspect(ref, docker).get("RepoDigests") or []
    return {
        "tag": tag,
        "image_id": pulled,
        "source": "pulled",
        "ref": ref,
        "repo_digest": next((d for d in digests if d.startswith(ref.rsplit(":", 1)[0] + "@")), None),
        "pull_s": round(time.monotonic() - started, 3),
    }
