"""mpi4py_check: mpi4py's collectives through wanmpi, checked exactly.

Usage: python mpi4py_check.py buffer|pickle [--seed S] [--big-bytes B]

buffer: the buffer API on NumPy arrays (comm.Bcast, Allreduce, Reduce,
  Allgather, Allgatherv, Gather(v), Scatter(v), Scan, Exscan, Alltoall,
  Reduce_scatter_block, Barrier; in place too) for every common dtype and counts from 0 up, each result compared element by element
  with what this rank computes itself from every rank's data. Every rank
  derives every rank's data from (seed, rank, call), so nothing is trusted
  that came over MPI. Values are small integers in every dtype, so sums and
  products are exact whatever order the reduction takes.
pickle: the pickle API on Python objects (comm.bcast, allreduce, gather,
  scatter, allgather, alltoall), compared with the objects expected.

Rank 0 prints one line {"mode": ..., "calls": N, "check": "ok"}; a wrong
result prints what differs and exits 3.
"""
import argparse
import json
import sys

import numpy as np
from mpi4py import MPI

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex64", "complex128"]
COUNTS = [0, 1, 13, 4099]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
calls = 0


def fail(what, got, want):
    print(f"mpi4py_check: rank {rank}: {what}: got {got!r}, want {want!r}", file=sys.stderr, flush=True)
    comm.Abort(3)


def data(seed, of_rank, call, dtype, count, low=-3, high=4):
    """Rank `of_rank`'s send data for call number `call`: small integers."""
    rng = np.random.default_rng([seed, of_rank, call])
    values = rng.integers(max(low, 0) if np.dtype(dtype).kind == "u" else low, high, size=count)
    out = values.astype(dtype)
    if np.dtype(dtype).kind == "c":
        out = out + 1j * rng.integers(low, high, size=count).astype(dtype)
    return out


def same(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        diff = np.flatnonzero(got != want)[:3] if got.shape == want.shape else "shape"
        fail(what, f"{got.dtype}{got.shape} differing at {diff}", f"{want.dtype}{want.shape}")


OPS = [(MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MAX, np.maximum), (MPI.MIN, np.minimum)]


def reduce_all(arrays, op, dtype):
    fn = next(f for o, f in OPS if o == op)
    acc = arrays[0].copy()
    for a in arrays[1:]:
        acc = fn(acc, a)
    return acc.astype(dtype)


def ops_for(dtype):
    return [o for o, _ in OPS if np.dtype(dtype).kind != "c" or o in (MPI.SUM, MPI.PROD)]


def rooted(every, dtype, per, counts, displs):
    """Gather, Gatherv, Scatter, Scatterv at a root that moves with the calls
    (MPI_Gather_c & co under MPICH); the v-variants with irregular counts."""
    global calls
    mpitype = MPI._typedict[np.dtype(dtype).char]
    root = (3 * calls) % size
    mine = rank == root
    got = np.empty(per * size, dtype) if mine else None
    comm.Gather(every[rank][:per], got, root=root)
    if mine:
        same(f"Gather {dtype} x{per} root {root}", got, np.concatenate([e[:per] for e in every]))
    got = np.empty(sum(counts), dtype) if mine else None
    comm.Gatherv(every[rank][:counts[rank]], [got, counts, displs, mpitype] if mine else None, root=root)
    if mine:
        same(f"Gatherv {dtype} x{per} root {root}", got, np.concatenate([every[r][:counts[r]] for r in range(size)]))
    whole = np.resize(every[root], max(per * size, sum(counts)))      # the root's blocks, repeated as needed
    got = np.empty(per, dtype)
    comm.Scatter(whole[:per * size] if mine else None, got, root=root)
    same(f"Scatter {dtype} x{per} root {root}", got, whole[rank * per:(rank + 1) * per])
    got = np.empty(counts[rank], dtype)
    comm.Scatterv([whole, counts, displs, mpitype] if mine else None, got, root=root)
    same(f"Scatterv {dtype} x{per} root {root}", got, whole[displs[rank]:displs[rank] + counts[rank]])
    calls += 4


def scans(every, op, dtype, n):
    """Scan, and Exscan in place (MPI_Scan_c & co under MPICH): rank order kept;
    rank 0's Exscan result is undefined."""
    global calls
    got = np.empty(n, dtype)
    comm.Scan(every[rank], got, op=op)
    same(f"Scan {op} {dtype} x{n}", got, reduce_all(every[:rank + 1], op, dtype))
    got = every[rank].copy()
    comm.Exscan(MPI.IN_PLACE, got, op=op)
    if rank > 0:
        same(f"Exscan in place {op} {dtype} x{n}", got, reduce_all(every[:rank], op, dtype))
    calls += 2


def buffer_api(seed, big):
    global calls
    cases = [(d, n) for d in DTYPES for n in COUNTS] + [("float64", big // 8), ("int32", big // 4)]
    for dtype, n in cases:
        call = calls
        every = [data(seed, r, call, dtype, n) for r in range(size)]
        for root in {0, size - 1}:
            buf = every[root].copy() if rank == root else np.zeros(n, dtype)
            comm.Bcast(buf, root=root)
            calls += 1
            same(f"Bcast {dtype} x{n} root {root}", buf, every[root])
        for op in ops_for(dtype) if n < 5000 else [MPI.SUM]:
            want = reduce_all(every, op, dtype)
            got = np.empty(n, dtype)
            comm.Allreduce(every[rank], got, op=op)
            calls += 1
            same(f"Allreduce {op} {dtype} x{n}", got, want)
            inplace = every[rank].copy()
            comm.Allreduce(MPI.IN_PLACE, inplace, op=op)
            calls += 1
            same(f"Allreduce in place {op} {dtype} x{n}", inplace, want)
            root = (5 * calls) % size
            got = np.zeros(n, dtype)
            comm.Reduce(every[rank], got if rank == root else None, op=op, root=root)
            calls += 1
            if rank == root:
                same(f"Reduce {op} {dtype} x{n} root {root}", got, want)
            scans(every, op, dtype, n)
        per = n // size
        got = np.empty(per * size, dtype)
        comm.Allgather(every[rank][:per], got)
        calls += 1
        same(f"Allgather {dtype} x{per}", got, np.concatenate([e[:per] for e in every]))
        got = np.empty(per * size, dtype)
        comm.Alltoall(every[rank][:per * size], got)
        calls += 1
        same(f"Alltoall {dtype} x{per}", got,
             np.concatenate([every[r][rank * per:(rank + 1) * per] for r in range(size)]))
        counts = [per * ((7 * r + 3) % 4) for r in range(size)]      # irregular, some ranks none
        displs = [sum(counts[:r]) for r in range(size)]
        got = np.empty(sum(counts), dtype)
        comm.Allgatherv(every[rank][:counts[rank]], [got, counts, displs, MPI._typedict[np.dtype(dtype).char]])
        calls += 1
        same(f"Allgatherv {dtype} x{per}", got, np.concatenate([every[r][:counts[r]] for r in range(size)]))
        rooted(every, dtype, per, counts, displs)
        got = np.empty(per, dtype)
        comm.Reduce_scatter_block(every[rank][:per * size], got, op=MPI.SUM)
        calls += 1
        same(f"Reduce_scatter_block {dtype} x{per}", got,
             reduce_all([e[:per * size] for e in every], MPI.SUM, dtype)[rank * per:(rank + 1) * per])
        comm.Barrier()
        calls += 1


def pickle_api(seed):
    global calls
    for i in range(12):
        rng = np.random.default_rng([seed, i])
        root = i % size
        obj = {"i": i, "text": "é" * int(rng.integers(0, 50)), "array": rng.integers(0, 9, int(rng.integers(0, 3000))),
               "nested": [list(range(i)), (None, 1.5, True)]}
        got = comm.bcast(obj if rank == root else None, root=root)
        calls += 1
        if got.keys() != obj.keys() or not np.array_equal(got["array"], obj["array"]) or \
                (got["i"], got["text"], got["nested"]) != (obj["i"], obj["text"], obj["nested"]):
            fail(f"bcast {i}", got, obj)
        total = comm.allreduce(rank * 1000 + i, op=MPI.SUM)
        calls += 1
        if total != sum(r * 1000 + i for r in range(size)):
            fail(f"allreduce {i}", total, sum(r * 1000 + i for r in range(size)))
        gathered = comm.gather((rank, i), root=root)
        calls += 1
        if rank == root and gathered != [(r, i) for r in range(size)]:
            fail(f"gather {i}", gathered, [(r, i) for r in range(size)])
        part = comm.scatter([f"{r}:{i}" for r in range(size)] if rank == root else None, root=root)
        calls += 1
        if part != f"{rank}:{i}":
            fail(f"scatter {i}", part, f"{rank}:{i}")
        everyone = comm.allgather({"r": rank})
        calls += 1
        if everyone != [{"r": r} for r in range(size)]:
            fail(f"allgather {i}", everyone, [{"r": r} for r in range(size)])
        mine = comm.alltoall([(rank, r, i) for r in range(size)])
        calls += 1
        if mine != [(r, rank, i) for r in range(size)]:
            fail(f"alltoall {i}", mine, [(r, rank, i) for r in range(size)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["buffer", "pickle"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--big-bytes", type=int, default=1 << 20)
    a = p.parse_args()
    if a.mode == "buffer":
        buffer_api(a.seed, a.big_bytes)
    else:
        pickle_api(a.seed)
    if rank == 0:
        print(json.dumps({"mode": a.mode, "ranks": size, "calls": calls, "library": MPI.Get_library_version().splitlines()[0].split(",")[0].strip(), "check": "ok"}), flush=True)


main()
