"""The rendezvous of the reference engine's ranks: how they find each other before they all-reduce.

Rank 0 prepares a ``CommSpec`` (``prepare_spec``: a free port on the server's
address for the ``torch.distributed`` store, or the shared-memory segment of
the ``shm`` backend) and hands it to every rank, which joins the communicator
with it (``comm.make_communicator``). The ranks' sockets listen on the
server's own address (``comm_host``), never on every interface; the store's
listening socket is bound before torch sees it (``tcp_store``). The layout of
the shm segment (one generation flag per rank, then two slots per rank) is
here, where the segment is made, and read by ``comm.ShmComm``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

CACHE_LINE = 64  # one rank's generation flag per cache line of the shm segment
ALIGN = 4096  # the shm segment's slots start on page boundaries


class CommError(RuntimeError):
    """A requested all-reduce backend is unavailable or a peer stopped answering."""


@dataclass
class CommSpec:
    """Everything a rank needs to join the communicator (picklable, made by rank 0)."""

    backend: str
    world_size: int
    device: str = "cpu"
    master_port: int | None = None
    host: str = "127.0.0.1"  # where the torch.distributed store and gloo's sockets listen (``comm_host``)
    shm_path: str | None = None
    max_bytes: int = 1 << 20
    timeout_s: float = 600.0
    force_collectives: bool = False  # run the real collective even with one rank (to check a backend on one device)
    fault: float | None = None  # TEST ONLY: scale every all-reduce result by this factor (see CorruptedComm)

    @property
    def active(self) -> bool:
        """Whether calls really communicate (else a validated no-op)."""
        return self.world_size > 1 or self.force_collectives


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host`` (for the torch.distributed store)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def comm_host(server_host: str) -> str:
    """Where the ranks' own sockets listen: the server's configured address; loopback when that is a
    wildcard (``0.0.0.0`` in a container), since all ranks are processes of one host. IPv4."""
    import socket

    try:
        address = socket.gethostbyname(server_host)
    except OSError as exc:
        raise CommError(f"cannot resolve the server host {server_host!r}: {exc}") from None
    return "127.0.0.1" if address in ("0.0.0.0", "") else address


def interface_of(address: str) -> str | None:
    """The network interface holding IPv4 ``address`` (``lo`` for 127.0.0.1), or None."""
    import fcntl
    import socket
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                ifreq = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on this interface
            if socket.inet_ntoa(ifreq[20:24]) == address:
                return name
    return None


def tcp_store(spec: CommSpec, rank: int) -> Any:
    """The torch.distributed store, rank 0 listening on ``spec.host`` only.

    ``init_method="tcp://..."`` makes rank 0's TCPStore listen on every
    interface whatever the host in the URL; handing it a socket already bound
    to the host (``master_listen_fd``) keeps it there.
    """
    import socket

    import torch.distributed as dist

    timeout = timedelta(seconds=spec.timeout_s)
    if rank != 0:
        return dist.TCPStore(spec.host, spec.master_port, spec.world_size, False, timeout)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((spec.host, spec.master_port))
    sock.listen()
    # detach: the descriptor is the store's from now on (Python must not close it when `sock` goes)
    return dist.TCPStore(spec.host, spec.master_port, spec.world_size, True, timeout,
                         master_listen_fd=sock.detach())


def shm_segment_bytes(world_size: int, max_bytes: int) -> int:
    """Size of the shm segment: one flag line per rank, then 2 x world slots."""
    return shm_data_offset(world_size) + 2 * world_size * shm_slot_bytes(max_bytes)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def shm_slot_bytes(max_bytes: int) -> int:
    """One rank's slot of the shm segment: ``max_bytes`` rounded up to a page."""
    return _round_up(max_bytes, ALIGN)


def shm_data_offset(world_size: int) -> int:
    """Where the slots start: after one flag line per rank, on a page boundary."""
    return _round_up(world_size * CACHE_LINE, ALIGN)


def create_shm_segment(world_size: int, max_bytes: int) -> str:
    """Create the zeroed shm file rank 0 hands to the others; returns its path."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(os.environ.get("TMPDIR", "/tmp"))
    path = base / f"specsweep-refengine-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(path, "wb") as f:
        f.truncate(shm_segment_bytes(world_size, max_bytes))
    return str(path)


def prepare_spec(backend: str, world_size: int, device: str, max_bytes: int = 1 << 20,
                 force_collectives: bool = False, fault: float | None = None,
                 host: str = "127.0.0.1") -> CommSpec:
    """Rank 0's half of the rendezvous: pick a port on ``host`` or create the shm segment."""
    if backend not in ("gloo", "shm", "nccl", "symm_mem"):
        raise CommError(f"unknown all-reduce backend {backend!r}")
    spec = CommSpec(backend=backend, world_size=world_size, device=device, max_bytes=max_bytes,
                    force_collectives=force_collectives, fault=fault, host=host)
    if spec.active:
        if backend == "shm":
            spec.shm_path = create_shm_segment(world_size, max_bytes)
        else:
            spec.master_port = free_port(host)
    return spec
