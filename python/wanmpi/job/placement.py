"""Where the ranks of a job run: the node of every rank, from `wanmpi run
--map` (block, interleave or one node per rank)."""
from __future__ import annotations

from ..topo import Node, Topology
from .launch import LaunchError


def _slots(nodes) -> list[Node]:
    """Each node as many times as it has slots, in order."""
    return [n for n in nodes for _ in range(n.slots)]


def placement(topo: Topology, ranks: int, mapping: str | None = None) -> list[Node]:
    """The node of every rank. A node of k slots (real hosts: "node01:4",
    hostfile slots=4) counts as k places next to each other.

    None / "block": spread in cluster order, rank r on place floor(r*M/N) of the
      M places, so every cluster holds a contiguous block of ranks.
    "interleave": rank r in cluster r mod C (round-robin over clusters).
    "a0,b0,a1": one node name per rank, exactly `ranks` names.
    """
    nodes = list(topo.nodes)
    if ranks < 1:
        raise LaunchError(f"-n must be at least 1, got {ranks}")
    if mapping in (None, "block"):
        places = _slots(nodes)
        return [places[r * len(places) // ranks] for r in range(ranks)]
    if mapping == "interleave":
        order = []
        per_cluster = [_slots(c.nodes) for c in topo.clusters]
        longest = max(len(p) for p in per_cluster)
        for i in range(longest):
            order += [p[i] for p in per_cluster if i < len(p)]
        return [order[r % len(order)] for r in range(ranks)]
    names = [n.strip() for n in mapping.split(",")]
    if len(names) != ranks:
        raise LaunchError(f"--map lists {len(names)} node(s) but -n is {ranks}: give one node per rank, "
                          "or 'block' or 'interleave'")
    chosen = []
    for name in names:
        try:
            chosen.append(topo.node(name))
        except KeyError:
            known = ", ".join(n.name for n in nodes[:8])
            raise LaunchError(f"--map: unknown node {name!r} (nodes: {known}{', ...' if len(nodes) > 8 else ''})") from None
    return chosen
