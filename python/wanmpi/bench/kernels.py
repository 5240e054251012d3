"""The NAS-like kernels the benchmarks run across the clusters (bench/kernels/,
bench/patterns.c; docs/kernels.md): each one's program and its arguments per
problem class. `bench suite` runs them plain and with each technique, `bench
relay` direct and through relays.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import paths

CLASSES = ("S", "A", "B")


@dataclass(frozen=True)
class Kernel:
    """A kernel of the suite: its program and its arguments per class. The
    suite sets the iterations so a job takes seconds, not minutes; the message
    sizes are the class's (docs/kernels.md)."""
    name: str
    program: str                          # paths.program(mpi, program)
    args: dict = field(default_factory=dict)   # class -> argument list
    pattern: str = ""                     # what crosses the WAN (for the tables)

    def argv(self, mpi: str, klass: str) -> list[str]:
        return [str(paths.program(mpi, self.program)), *self.args[klass]]


def _nas(name: str, iters: tuple[int, int, int], pattern: str, program: str | None = None) -> Kernel:
    return Kernel(name, program or name, {c: ["--class", c, "--iters", str(i)] for c, i in zip(CLASSES, iters)},
                  pattern)


def _patterns(name: str, nbytes: tuple[int, int, int], iters: tuple[int, int, int], pattern: str) -> Kernel:
    return Kernel(name, "patterns", {c: [name, "--bytes", str(b), "--iters", str(i)]
                                     for c, b, i in zip(CLASSES, nbytes, iters)}, pattern)


KERNELS = {k.name: k for k in (
    _nas("bt", (10, 5, 3), "multipartition sweeps, two rows across"),
    _nas("cg", (25, 20, 10), "transpose exchange, half the nodes across"),
    _nas("ep", (4, 2, 1), "one small allreduce"),
    _patterns("ft", (256 << 10, 1 << 20, 4 << 20), (3, 2, 1), "alltoall, large"),
    _patterns("is", (32 << 10, 128 << 10, 512 << 10), (5, 5, 3), "alltoallv of ~128 KiB (class A)"),
    _patterns("lu", (1024, 1024, 1024), (10, 5, 10), "wavefront of 1 KiB messages"),
    _nas("mg", (8, 8, 4), "3D halo exchange, all nodes, small at coarse levels"),
    _nas("sp", (10, 10, 5), "multipartition sweeps, more and smaller messages"),
    # Fortran twins of CG and EP (docs/kernels.md): not in the default eight
    _nas("cg_f90", (25, 20, 10), "CG in Fortran 90"),
    _nas("ep_f90", (4, 2, 1), "EP in Fortran 90"),
)}
DEFAULT_KERNELS = ("bt", "cg", "ep", "ft", "is", "lu", "mg", "sp")
