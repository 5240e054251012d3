"""The physical lower bound of a collective on a topology (../shared/design/collectives.md).

Every bound is the larger of what the slowest NIC and what the WAN must carry,
plus the one-way delay once when more than one cluster holds ranks; raw rates,
no header overhead deducted (M: the size collbench reports, b: the slowest NIC
among the ranks' nodes, P: ranks; d: the WAN's one-way delay plus
`path_latency_s`, what every byte between clusters also crosses: on the
simulated platform, whose routes are host link, WAN, host link, the two
hosts' links, 2 x 50 us by default, a tenth of a 1 ms delay; on the testbed
0, its veth pairs' microseconds beside wanem's delay):

  bcast                max(M/b, WAN) + d       every cluster other than the
                       root's receives M over its links, the root's cluster
                       sends M over its links
  allreduce            max(2M(P-1)/(Pb), M/b + d, WAN + d)   every cluster
                       receives and sends M (the others' contributions) over
                       its links; every rank's result depends on M bytes it
                       can only receive after the delay, while the rest of
                       its NIC's work can overlap that delay (the design
                       note's 2M(P-1)/(Pb) + d is not a lower bound: ours
                       took 0.92 of it in SMPI, 2 x 8 ranks at 10 Gbit/s,
                       16 MiB, 10 ms; docs/scale.md)
  allgather(v)         max(M(P-1)/(Pb), (P-n)M/(Pb) + d, WAN + d)   a rank
                       of the smallest cluster (n ranks) receives the other
                       clusters' (P-n)M/P after the delay; cluster c with n_c
                       ranks takes in (P-n_c)M/P and sends out at least its
                       own n_c M/P over its links
  alltoall(v)          max((P-1)m/b, (P-n)m/b + d, WAN + d)  m = M/P per pair:
                       cluster c with n_c ranks sends and receives n_c (P-n_c) m
                       over its links; a rank of the smallest cluster (n ranks)
                       sends (P-n) m across, which must leave its NIC a delay
                       before the end, while its local blocks need not (they
                       can go while the remote ones are on the WAN: ours does)
  gather(v), scatter(v)  max(M(P-1)/(Pb), M(P-n_r)/(Pb) + d, WAN + d)  the root
                       (rank 0, n_r ranks in its cluster) receives or sends
                       every other block, those of other clusters across the
                       WAN; the root's cluster carries (P-n_c) M/P over its
                       links, any other n_c M/P (equal blocks; the v-variants'
                       irregular blocks taken as equal)
  other operations     max(M/b, WAN for M into every cluster) + d

"Its links" is the sum of the rates of the cluster's WAN links, or of its
relays' NICs where that is less (with relays every connection between
clusters goes through one of them): a cut, so the bound holds however the
traffic is routed. For two clusters with one link of
rate B these are the design note's formulas (bcast max(M/b, M/B) + d).
"""
from __future__ import annotations

from collections import Counter

from ..topo import Node, Topology


def lower_bound(topo: Topology, op: str, size: int, nodes: list[Node], delay_ms: float,
                path_latency_s: float = 0.0) -> float:
    """Seconds: the least time `op` of `size` bytes can take over the ranks on
    `nodes` (one entry per rank), the WAN delayed by `delay_ms` one way and
    every path between clusters by `path_latency_s` more."""
    ranks = len(nodes)
    if op in ("ibcast", "iallreduce", "iallgather", "ialltoall"):
        op = op[1:]                 # a nonblocking call waited for at once: the blocking call's bound
    per_cluster = Counter(n.cluster for n in nodes)
    b = min(topo.cluster(c).nic_bps for c in per_cluster) / 8
    wan = {c: _cut_bps(topo, c) / 8 for c in per_cluster}
    d = delay_ms / 1000 + path_latency_s if len(per_cluster) > 1 else 0.0
    if op == "allreduce":
        cut = {c: size for c in per_cluster}
        return _bound(2 * size * (ranks - 1) / (ranks * b), size / b, cut, wan, d)
    elif op in ("allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"):
        # a rank takes in P-1 blocks of M/P, the smallest cluster's ranks P-n of them across
        pair = size / ranks
        remote = (ranks - min(per_cluster.values())) * pair / b      # NIC time of the blocks that cross
        if op.startswith("alltoall"):
            cut = {c: n * (ranks - n) * pair for c, n in per_cluster.items()}
        else:
            cut = {c: max(ranks - n, n) * pair for c, n in per_cluster.items()}
        return _bound((ranks - 1) * pair / b, remote, cut, wan, d)
    elif op in ("gather", "gatherv", "scatter", "scatterv"):
        root_cluster = nodes[0].cluster
        remote = (ranks - per_cluster[root_cluster]) * size / (ranks * b)
        cut = {c: (ranks - n if c == root_cluster else n) * size / ranks for c, n in per_cluster.items()}
        return _bound(size * (ranks - 1) / (ranks * b), remote, cut, wan, d)
    else:
        local = size / b
        cut = {c: size for c in per_cluster}
    return _bound(local, local, cut, wan, d)


def _cut_bps(topo: Topology, cluster: str) -> int:
    """What a cluster can send to (or receive from) the others at once: its WAN
    links, or its relays' NICs (each way) where they carry less."""
    links = sum(l.rate_bps for l in topo.links_of(cluster))
    relays = topo.cluster(cluster).relay_nodes
    return min(links, sum(r.nic_bps for r in relays)) if relays else links


def _bound(local: float, remote: float, cut: dict, wan: dict, d: float) -> float:
    """max(all of a NIC's time, its time for what crosses + d, the WAN cut + d)."""
    if len(cut) < 2:
        return local
    across = max((cut[c] / wan[c] if wan[c] else float("inf")) for c in cut)
    return max(local, remote + d, across + d)
