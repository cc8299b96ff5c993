"""Containers of server jobs: the ``docker run`` argv, labels, teardown, leftovers.

Only the part of docker the server job needs; images are ``specsweep.images``'s
business.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsweep.contracts.plan import Plan
from specsweep.images.cli import DockerError, run_docker
from specsweep.images.registry import ensure_image
from specsweep.serve.guard import (
    CHECKOUT_LABEL_KEY,
    CONFIG_LABEL_KEY,
    PROJECT_LABEL_KEY,
    RUN_LABEL_KEY,
    WORKDIR_LABEL_KEY,
)

# Label keys live in serve.guard (stdlib only, it also runs by path) and are used from here.
PROJECT_LABEL = f"{PROJECT_LABEL_KEY}=specsweep"


def checkout_id(workdir: Path | str) -> str:
    """Who owns a container: a hash of the workflow's directory (where ``results/`` is), 16 hex digits.

    Two checkouts (or two copies of one) have different directories, so a run
    in one never removes the other's containers, even for a configuration of
    the same name.
    """
    return hashlib.sha256(os.path.realpath(workdir).encode()).hexdigest()[:16]


def run_labels(config: str, checkout: str, workdir: Path | str, run_id: str) -> dict[str, str]:
    """The labels of one run's container, beyond the project and config labels ``run_argv`` always sets."""
    return {CHECKOUT_LABEL_KEY: checkout, WORKDIR_LABEL_KEY: os.path.realpath(workdir), RUN_LABEL_KEY: run_id}


# Where the kernel puts the RDMA devices of the host's HCAs (rdma-core): one uverbs<N> per HCA port
# for verbs, rdma_cm for connection management. NVSHMEM's IBGDA transport (DeepEP's low-latency
# kernels) opens an HCA through them (NVSHMEM v3.4.5 src/host/transport/transport.cpp:282 reports
# "init failed for transport: IBGDA" when it cannot).
RDMA_DEVICE_DIR = Path("/dev/infiniband")


def rdma_devices(root: Path = RDMA_DEVICE_DIR) -> list[str]:
    """The host's verbs and RDMA-CM devices (``uverbs*``, ``rdma_cm``) under ``root``, sorted."""
    if not root.is_dir():
        return []
    return sorted(str(p) for p in root.iterdir() if p.name.startswith("uverbs") or p.name == "rdma_cm")


def uses_host_network(plan: Plan) -> bool:
    """Whether the container shares the host's network namespace: with ``rdma: true`` (RoCE's GIDs
    belong to the host's network interfaces, which a container's own namespace does not have).
    The server then binds the job's host and port itself; nothing is published with ``-p``."""
    return plan.rdma is True and plan.gpus > 0


def run_argv(
    plan: Plan,
    image_ref: str,
    host: str,
    port: int,
    container_port: int,
    container_name: str,
    *,
    docker: str = "docker",
    extra_args: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    rdma_device_paths: Sequence[str] | None = None,
) -> list[str]:
    """The ``docker run`` argv for a plan (pure; golden-tested): its argv, env and volumes as the server
    job's launch gives them (``serve.launch.build_launch``: the address flags and volumes added).

    Env vars are passed as ``-e KEY`` only: the caller must put the values in
    the docker client's environment (see ``run_env``), so that no value shows
    up in ``ps``. ``extra_args`` are appended after the plan's argv (the
    engine's address flags, e.g. ``--host 0.0.0.0 --port <container_port>``).
    ``labels`` (``run_labels``) add the checkout and run identity.

    With ``rdma: true`` on a GPU plan the container gets the host's RDMA
    devices (``rdma_device_paths``, default :func:`rdma_devices`), ``IPC_LOCK``
    (verbs pin memory; ``--ulimit memlock=-1`` alone does not grant it) and the
    host's network (:func:`uses_host_network`; no ``-p``, the server's own
    address args carry the job's host and port).
    """
    argv = [
        docker, "run", "--rm",
        "--name", container_name,
        "--label", f"{CONFIG_LABEL_KEY}={plan.name}",
        "--label", PROJECT_LABEL,
    ]
    for key in sorted(labels or {}):
        argv += ["--label", f"{key}={labels[key]}"]
    host_network = uses_host_network(plan)
    argv += (["--network", "host"] if host_network
             else ["-p", f"{host or '127.0.0.1'}:{int(port)}:{int(container_port)}"])
    argv += ["--init"]
    for key in sorted(plan.env):
        argv += ["-e", str(key)]
    for volume in plan.volumes:
        host_path, _, rest = str(volume).partition(":")
        argv += ["-v", f"{os.path.abspath(host_path)}:{rest}"]
    if plan.gpus > 0:
        argv += [
            "--gpus", str(plan.gpus),
            "--ipc=host",
            "--shm-size", "16g",
            "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864",
        ]
        if host_network:
            devices = rdma_devices() if rdma_device_paths is None else list(rdma_device_paths)
            for device in devices:
                argv += ["--device", device]
            argv += ["--cap-add", "IPC_LOCK"]
    argv.append(image_ref)
    argv += [str(a) for a in plan.argv]
    argv += [str(a) for a in extra_args]
    return argv


def containers_with_label(label: str = PROJECT_LABEL, *, docker: str = "docker", all_states: bool = True) -> list[str]:
    """Names of containers carrying ``label`` (``key=value`` or ``key``)."""
    return containers_with_labels([label], docker=docker, all_states=all_states)


def containers_with_labels(labels: Sequence[str], *, docker: str = "docker", all_states: bool = True) -> list[str]:
    """Names of containers carrying every one of ``labels`` (docker ANDs repeated label filters)."""
    argv = [docker, "ps", "--format", "{{.Names}}"]
    if all_states:
        argv.insert(2, "--all")
    for label in labels:
        argv += ["--filter", f"label={label}"]
    out = run_docker(argv).stdout
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def remove_container(name: str, *, docker: str = "docker") -> bool:
    """``docker rm -f`` one container; False if it did not exist.

    Existence is checked first: newer CLIs exit 0 from ``rm -f`` on a missing
    container, older ones print "No such container"; both mean False here.
    """
    if run_docker([docker, "container", "inspect", "--format", "{{.Id}}", name], check=False).returncode != 0:
        return False
    proc = run_docker([docker, "rm", "-f", name], check=False)
    if proc.returncode == 0:
        return True
    if "No such container" in (proc.stderr or ""):
        return False  # a --rm container that went away meanwhile
    raise DockerError(f"docker rm -f {name} exited {proc.returncode}: {(proc.stderr or '').strip()}")


def remove_leftovers(config_name: str, checkout: str, *, docker: str = "docker") -> list[str]:
    """Remove this checkout's containers of ``config_name`` (a previous run's server killed before its
    teardown); returns their names. Another checkout's container of the same name is never touched."""
    names = containers_with_labels([f"{CONFIG_LABEL_KEY}={config_name}", f"{CHECKOUT_LABEL_KEY}={checkout}"],
                                   docker=docker)
    return [n for n in names if remove_container(n, docker=docker)]


def container_name(config: str) -> str:
    """Unique per launch; the config label (not the name) finds leftovers."""
    return f"specsweep-{config}-{uuid.uuid4().hex[:8]}"


def prepare_launch(
    config_name: str, manifest: Mapping[str, Any], registry: Mapping[str, Any] | None, *, checkout: str,
    docker: str = "docker",
) -> dict[str, Any]:
    """What the docker runtime does on the node before a launch: remove a
    previous run's leftover containers of this configuration in this checkout
    (``checkout_id``), and make the image present (``ensure_image``). Returns
    the launch.json keys."""
    return {
        "removed_leftover_containers": remove_leftovers(config_name, checkout, docker=docker),
        "image_source": ensure_image(manifest, registry, docker=docker),
    }


@dataclass(frozen=True)
class ContainerRuntime:
    """How one container runtime launches a server (the seam for more runtimes).

    ``prepare(config_name, manifest, registry, checkout=...)`` runs on the node
    before the launch and returns launch.json keys; ``run_argv(plan,
    image_ref, host, port, container_port, container_name, labels=...)`` is
    the launching argv (``labels``: ``run_labels``), whose
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


def container_runtime(name: str) -> ContainerRuntime | None:
    """The launcher of a plan's ``runtime`` (None for ``local``: a process here)."""
    if name == "local":
        return None
    try:
        return CONTAINER_RUNTIMES[name]
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}; known: local, {', '.join(sorted(CONTAINER_RUNTIMES))}") from None
