"""Every CPU all-reduce backend agrees with a reference sum (several sizes, dtypes, world sizes)."""

from __future__ import annotations

import pytest
import torch

from specsweep.refengine.comm import make_communicator
from specsweep.refengine.multirank import run_on_ranks
from specsweep.refengine.rendezvous import CommError, prepare_spec

DTYPES = ("float32", "bfloat16", "float64")
NUMELS = (1, 7, 1024, 7168, 65536)


def _tensor(rank: int, numel: int, dtype: str, rep: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rank * 1_000_003 + numel * 31 + rep)
    return torch.randn(numel, generator=gen).to(getattr(torch, dtype))


def _check_sums(rank: int, comm, world_size: int) -> list[tuple[str, int, float, float]]:
    """On each rank: all-reduce several tensors (repeated, to cycle the double buffer) and compare."""
    out = []
    for rep in range(3):
        for dtype in DTYPES:
            for numel in NUMELS:
                t = _tensor(rank, numel, dtype, rep)
                comm.all_reduce(t)
                ref = sum(_tensor(r, numel, dtype, rep).double() for r in range(world_size))
                err = (t.double() - ref).abs().max().item()
                scale = ref.abs().max().item() + 1e-12
                out.append((dtype, numel, err, scale))
    count, _ = comm.stats()
    out.append(("count", count, 0.0, 1.0))
    return out


TOL = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2}


@pytest.mark.parametrize(("backend", "world_size"), [("gloo", 2), ("shm", 2), ("shm", 3)])
def test_all_reduce_matches_reference(backend: str, world_size: int) -> None:
    results = run_on_ranks(_check_sums, backend, world_size, args=(world_size,), max_bytes=1 << 20)
    for rank_result in results:
        *cases, (_, count, _, _) = rank_result
        assert count == 3 * len(DTYPES) * len(NUMELS)
        for dtype, numel, err, scale in cases:
            assert err <= TOL[dtype] * max(scale, 1.0), (backend, world_size, dtype, numel, err)


def _shm_identical(rank: int, comm) -> list[float]:
    t = _tensor(rank, 4096, "float32", 0)
    return comm.all_reduce(t).tolist()


def test_shm_results_identical_on_every_rank() -> None:
    """Ranks sum in rank order, so replicated activations stay bit-identical across ranks."""
    results = run_on_ranks(_shm_identical, "shm", 3)
    assert results[0] == results[1] == results[2]


def _too_big(rank: int, comm) -> str:
    try:
        comm.all_reduce(torch.zeros(1 << 20))
    except CommError as exc:
        return str(exc)
    return "no error"


def test_shm_rejects_oversized_tensor() -> None:
    msgs = run_on_ranks(_too_big, "shm", 2, max_bytes=4096)
    assert all("exceeds" in m for m in msgs)


def test_cuda_backend_unavailable_is_an_error_not_a_fallback() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    for backend in ("nccl", "symm_mem"):
        with pytest.raises(CommError, match="needs CUDA"):
            make_communicator(0, prepare_spec(backend, 1, "cuda"))


def test_world_size_one_is_noop_but_counted() -> None:
    comm = make_communicator(0, prepare_spec("shm", 1, "cpu"))
    t = torch.ones(4)
    comm.all_reduce(t)
    assert t.tolist() == [1.0] * 4
    assert comm.stats()[0] == 1
    assert "world_size=1" in comm.describe()


def _listening_addresses(rank: int, comm) -> list[str]:
    """This rank's listening TCP sockets as /proc/net/tcp{,6} local addresses (hex ip:port)."""
    import os

    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                out.append(fields[1])
    return out


def test_gloo_listens_on_the_configured_host_only():
    """The store of rank 0 and gloo's own sockets: on 127.0.0.1, never on every interface."""
    listening = run_on_ranks(_listening_addresses, "gloo", 2)
    assert listening[0], "rank 0 serves the store"
    loopback = "0100007F:"  # 127.0.0.1 in /proc/net/tcp's little-endian hex
    for rank, addresses in enumerate(listening):
        assert all(a.startswith(loopback) for a in addresses), (rank, addresses)


def test_comm_host_is_the_configured_address_or_loopback_for_a_wildcard():
    from specsweep.refengine.rendezvous import comm_host, interface_of

    assert comm_host("0.0.0.0") == "127.0.0.1"
    assert comm_host("127.0.0.1") == "127.0.0.1"
    assert comm_host("localhost") == "127.0.0.1"
    assert interface_of("127.0.0.1") == "lo"
    with pytest.raises(CommError, match="cannot resolve"):
        comm_host("no-such-host.invalid")
