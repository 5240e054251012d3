"""The physical lower bounds `wanmpi bench coll` reports (bench/bounds.py),
checked by hand against the example topologies: no testbed needed."""
from __future__ import annotations

import pytest

from wanmpi import topo
from wanmpi.bench.bounds import lower_bound

MIB = 1 << 20
NIC = 100e6 / 8         # both examples: 100 Mbit/s NICs (three-clusters' c: 200)
WAN = 200e6 / 8


def nodes(path):
    return list(topo.load(path).nodes)


@pytest.mark.parametrize("op, expected", [
    ("bcast", 4 * MIB / NIC + 0.010),                           # the NIC (100) is narrower than the WAN (200)
    # the NICs' 2M(P-1)/P; the M that depends on the other cluster arrives after the delay, which the rest overlaps
    ("allreduce", max(2 * 4 * MIB * 7 / 8 / NIC, 4 * MIB / NIC + 0.010)),
    ("alltoall", 4 * 4 * (4 * MIB / 8) / WAN + 0.010),          # 16 blocks of M/8 cross per direction
    ("alltoallv", 4 * 4 * (4 * MIB / 8) / WAN + 0.010),
    # every rank takes in 7 blocks of M/8, the other cluster's 4 after the delay
    ("allgather", max(4 * MIB * 7 / 8 / NIC, 4 * MIB * 4 / 8 / NIC + 0.010)),
    # the root's NIC takes every other block; the 3 of its cluster while the 4 across are on the WAN
    ("gather", max(4 * MIB * 7 / 8 / NIC, 4 * MIB * 4 / 8 / NIC + 0.010)),
    ("scatterv", 4 * MIB * 7 / 8 / NIC),
])
def test_two_clusters(op, expected):
    t = topo.load("examples/two-clusters.toml")
    assert lower_bound(t, op, 4 * MIB, nodes("examples/two-clusters.toml"), 10) == pytest.approx(expected)


def test_a_gather_with_a_narrow_wan_is_bound_by_what_the_root_s_cluster_takes_in():
    t = topo.loads(open("examples/two-clusters.toml").read().replace('rate = "200Mbit"', 'rate = "10Mbit"'))
    n = nodes("examples/two-clusters.toml")                 # root (rank 0) in a, 4 ranks each
    assert lower_bound(t, "gather", 4 * MIB, n, 10) == pytest.approx(4 * (4 * MIB / 8) / (10e6 / 8) + 0.010)


def test_three_clusters_cut_by_the_sum_of_a_cluster_s_links():
    t = topo.load("examples/three-clusters.toml")
    n = nodes("examples/three-clusters.toml")               # a: 3 ranks, b: 2, c: 3
    m = 64 * MIB
    # every NIC moves 7 blocks of m/8: more than any cluster's links; the 6
    # that leave b cross the WAN and need the delay after them, the others not
    assert lower_bound(t, "alltoall", m, n, 10) == pytest.approx(max(7 * m / 8 / NIC, 6 * m / 8 / NIC + 0.010))
    # with the WAN narrower than the NICs, the cut decides: c sends 3 x 5 blocks over 200 + 100 Mbit/s
    slow = topo.loads(open("examples/three-clusters.toml").read().replace('nic = "200Mbit"', 'nic = "10Gbit"')
                      .replace('[[cluster]]\nname = "a"\nnodes = 3',
                               '[[cluster]]\nname = "a"\nnodes = 3\nnic = "10Gbit"')
                      .replace('[[cluster]]\nname = "b"\nnodes = 2',
                               '[[cluster]]\nname = "b"\nnodes = 2\nnic = "10Gbit"'), "three")
    assert lower_bound(slow, "alltoall", m, list(slow.nodes), 0) == pytest.approx(3 * 5 * (m / 8) / (300e6 / 8))
    assert lower_bound(slow, "bcast", m, list(slow.nodes), 0) == pytest.approx(m / (300e6 / 8))


def test_one_cluster_has_no_wan_term():
    t = topo.load("examples/two-clusters.toml")
    a = [n for n in t.nodes if n.cluster == "a"]
    assert lower_bound(t, "bcast", MIB, a, 10) == pytest.approx(MIB / NIC)


def test_an_alltoall_whose_delay_outlasts_its_nic_time_sends_the_remote_blocks_first():
    """2 x 8 ranks, 10 Gbit/s NICs, 100 Gbit/s WAN, 1 ms, 1 MiB per rank: the
    8 blocks that cross leave the NIC in 0.42 ms, then 1 ms of WAN; the 7 local
    ones go meanwhile. The bound is 1.42 ms, not the NIC's 0.79 ms + 1 ms
    (ours took 1.6 ms in SMPI, under that older figure)."""
    t = topo.loads('[[cluster]]\nname = "a"\nnodes = 8\nnic = "10Gbit"\n'
                   '[[cluster]]\nname = "b"\nnodes = 8\nnic = "10Gbit"\n'
                   '[wan]\nrate = "100Gbit"\ndelay = "1ms"\n', "sweep")
    block = MIB / 16
    assert lower_bound(t, "alltoall", MIB, list(t.nodes), 1) == pytest.approx(8 * block / (10e9 / 8) + 0.001)


def test_a_path_latency_adds_to_the_delay_and_nothing_else():
    """The simulated platform's hosts' links (2 x 50 us) lie on every route
    between clusters: they add to the terms after the delay, not to a NIC's
    own time, and a single cluster has neither."""
    t = topo.load("examples/two-clusters.toml")
    n = nodes("examples/two-clusters.toml")
    assert lower_bound(t, "bcast", 4 * MIB, n, 10, 100e-6) == pytest.approx(4 * MIB / NIC + 0.010 + 100e-6)
    # with no delay the allreduce's NICs (2M(P-1)/P) outlast M/b + 100 us: the path changes nothing
    assert lower_bound(t, "allreduce", 4 * MIB, n, 0, 100e-6) == pytest.approx(2 * 4 * MIB * 7 / 8 / NIC)
    a = [x for x in t.nodes if x.cluster == "a"]
    assert lower_bound(t, "bcast", MIB, a, 10, 100e-6) == pytest.approx(MIB / NIC)
