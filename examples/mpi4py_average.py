"""An mpi4py program under wanmpi: average a model's parameters over every
rank, the step data-parallel training takes after each batch.

    wanmpi run -n 8 .venv/bin/python examples/mpi4py_average.py [--mib 4] [--steps 5]
    wanmpi run -n 8 -x WANMPI_STATS=/tmp/stats-%r.json .venv/bin/python examples/mpi4py_average.py

Rank 0 broadcasts the settings (a Python dict: the pickle API, comm.bcast);
every step each rank makes its own float32 "gradient" and all ranks average
them with comm.Allreduce on the NumPy array (the buffer API). Both reach
libwanmpi's WAN-aware collectives unchanged (docs/mpi4py.md). The average is
checked exactly: every rank knows what every other rank contributed.
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

settings = None
if rank == 0:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=float, default=4.0, help="parameters per rank, MiB of float32")
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args()
    settings = {"n": int(a.mib * (1 << 20)) // 4, "steps": a.steps}
settings = comm.bcast(settings, root=0)

n, steps = settings["n"], settings["steps"]
average = np.empty(n, dtype=np.float32)
times = []
for step in range(steps):
    gradient = np.full(n, rank + step, dtype=np.float32)       # integers: the sum is exact
    comm.Barrier()
    t0 = MPI.Wtime()
    comm.Allreduce(gradient, average, op=MPI.SUM)
    times.append(MPI.Wtime() - t0)
    average /= size
    want = np.float32(sum(r + step for r in range(size)) / size)
    if not np.all(average == want):
        raise SystemExit(f"rank {rank}: step {step}: average {average[:3]} != {want}")

if rank == 0:
    print(f"{size} ranks averaged {n * 4 / 2**20:.1f} MiB {steps} times: "
          f"best {min(times) * 1e3:.0f} ms, median {sorted(times)[len(times) // 2] * 1e3:.0f} ms per step; "
          f"{MPI.Get_library_version().splitlines()[0].split(',')[0]}")
