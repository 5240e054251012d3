"""What libwanmpi and libwanshim need from a topology: the libraries to preload
for an MPI and the environment of every rank.

The variable names are defined in lib/src/common/settings.h (their one home
on the C side, with defaults and meanings); this module only fills them in
from the topology, so that a job's collectives follow the topology file.
"""
from __future__ import annotations

from pathlib import Path

from .. import paths
from ..topo import Topology


def library(mpi: str) -> Path:
    return paths.LIBWANMPI_DIR / f"libwanmpi-{mpi}.so"


def shim_library() -> Path:
    """libwanshim: the socket shim, one build for every MPI (docs/libwanshim.md)."""
    return paths.LIBWANMPI_DIR / "libwanshim.so"


def cluster_map(topo: Topology) -> str:
    """WANMPI_CLUSTER_MAP: every cluster's network, as libwanmpi and libwanshim read it."""
    return ";".join(f"{cl.name}={cl.network}" for cl in topo.clusters)


def nat_map(topo: Topology) -> str:
    """WANMPI_NAT_MAP: the private and public address of every node behind 1:1
    NAT ("10.1.0.1=198.19.129.1,..."); libwanshim connects to the public one
    from other clusters and reports the private one on accept. Empty: none."""
    return ",".join(f"{n.address}={n.public}" for n in topo.nodes if n.public)


def rank_addresses(addresses: list[str]) -> str:
    """WANMPI_RANK_ADDRESSES: the node address of every MPI_COMM_WORLD rank,
    run-length coded ("10.1.0.1*2,10.2.0.1*2"), for WANMPI_UDP_PARAMS."""
    runs: list[list] = []
    for a in addresses:
        if runs and runs[-1][0] == a:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    return ",".join(a if n == 1 else f"{a}*{n}" for a, n in runs)


def environment(topo: Topology) -> dict[str, str]:
    """WANMPI_* settings for every rank of a job on `topo`."""
    c = topo.collectives
    env = {
        # every rank finds its cluster by matching its addresses against these
        "WANMPI_CLUSTER_MAP": cluster_map(topo),
        # the rates the statistics report (and pacing will use)
        "WANMPI_WAN_RATE": str(min((l.rate_bps for l in topo.links), default=0) or 1),
        "WANMPI_NIC_RATE": str(min(cl.nic_bps for cl in topo.clusters)),
        "WANMPI_CHUNK": str(c.chunk_bytes),
        "WANMPI_SMALL": str(c.small_bytes),
        # libwanshim: the rate of every socket to another cluster, bytes/s ([pacing])
        "WANMPI_PACING_RATE": str(topo.pacing_rate),
        # libwanmpi: how an MPI_Alltoall(v) is paced while it runs
        "WANMPI_ALLTOALL_RATE": topo.pacing.alltoall,
        "WANMPI_MATB_DIVISOR": str(topo.pacing.divisor),
    }
    if nat_map(topo):
        env["WANMPI_NAT_MAP"] = nat_map(topo)
    if c.lanes is not None:
        env["WANMPI_LANES"] = str(c.lanes)
    for coll, algorithm in c.algorithms:
        env[f"WANMPI_{coll.upper()}"] = algorithm
    return env
