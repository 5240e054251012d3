"""`wanmpi sim` with relays (python/wanmpi/sim/relayed.py, docs/scale.md "The
papers' setups"): every connection between clusters through a relay of each,
chosen by the destination (trunking scheme #1), the relays' NICs in the
bound, the errors, and a relayed simulation checked by collbench."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from wanmpi import topo
from wanmpi.bench.bounds import lower_bound
from wanmpi.cli.main import main
from wanmpi.sim import platform, sweep

from conftest import REPO
from test_sim import THREE, TWO, nothing_left_behind, spec_file, testbed_lock  # noqa: F401 (fixtures)

RELAYS = REPO / "examples" / "relays.toml"


def zone(t: topo.Topology) -> ET.Element:
    return ET.fromstring(platform.platform_xml(t).split("\n", 2)[2]).find("zone")


def routes(z: ET.Element) -> dict:
    return {(r.get("src"), r.get("dst")): [(l.get("id"), l.get("direction")) for l in r.findall("link_ctn")]
            for r in z.findall("route")}


def test_a_relayed_topology_routes_every_connection_between_clusters_through_a_relay_of_each():
    t = topo.load(RELAYS)                       # 2 x 4 nodes, 2 relays each at 100 Mbit/s, WAN 200 Mbit/s
    z = zone(t)
    assert z.get("routing") == "Full" and z.find("cluster") is None
    assert [h.get("id") for h in z.findall("host")] == [n.name for n in t.nodes]
    links = {l.get("id"): l for l in z.findall("link")}
    for c in t.clusters:
        for n in c.nodes:
            assert links[n.name].get("bandwidth") == f"{c.nic_bps}bps"
        for k in range(2):
            for side in ("in", "out"):
                link = links[f"{c.name}-relay{k}-{side}"]
                assert (link.get("bandwidth"), link.get("sharing_policy")) == ("100000000bps", "SPLITDUPLEX")
    assert links["wan-pub-priv"].get("bandwidth") == "200000000bps"
    r = routes(z)
    assert len(r) == 8 * 7                      # every ordered pair of nodes, none to itself
    assert r[("pub0", "pub3")] == [("pub0", "UP"), ("pub3", "DOWN")]        # inside a cluster: direct
    # relay k = the destination's index mod 2, and its peer k on the far side
    assert r[("pub0", "priv3")] == [("pub0", "UP"), ("pub-relay1-in", "DOWN"), ("pub-relay1-out", "UP"),
                                    ("wan-pub-priv", "UP"), ("priv-relay1-out", "DOWN"), ("priv-relay1-in", "UP"),
                                    ("priv3", "DOWN")]
    assert r[("priv1", "pub2")][1:3] == [("priv-relay0-in", "DOWN"), ("priv-relay0-out", "UP")]
    assert r[("priv1", "pub2")][3] == ("wan-pub-priv", "DOWN")
    assert platform.hostfile(t).split() == [n.name for n in t.nodes]
    # no override: the file's relays, untouched
    assert platform.simulated(t, platform.Overrides()) == t


def test_relays_overrides_add_remove_and_rate_them():
    three = platform.simulated(topo.load(THREE), platform.Overrides(nodes_per_cluster=3, relays=3,
                                                                    relay_nic_bps=10**9))
    assert [len(c.relay_nodes) for c in three.clusters] == [3, 3, 3]
    assert {r.nic_bps for r in three.relays} == {10**9}
    r = routes(zone(three))
    # across a site without a direct link: both WAN links, the relays of the two ends only
    ids = [i for i, _ in r[("a0", "c2")]]
    assert ids[:3] == ["a0", "a-relay2-in", "a-relay2-out"] and ids[-3:] == ["c-relay2-out", "c-relay2-in", "c2"]
    assert [i for i in ids if i.startswith("wan-")] == [f"wan-{l.name}" for l, _ in platform.route(three, "a", "c")]
    # the file's relays at the file's rate: --nic-rate leaves them
    faster = platform.simulated(topo.load(RELAYS), platform.Overrides(nic_bps=10**10))
    assert {r.nic_bps for r in faster.relays} == {10**8}
    # none: the clusters' own platform again
    direct = platform.simulated(topo.load(RELAYS), platform.Overrides(relays=0))
    assert not direct.has_relays and zone(direct).find("cluster") is not None
    # relays added where the file has none run at the nodes' NIC
    added = platform.simulated(topo.load(TWO), platform.Overrides(relays=1, nic_bps=10**10))
    assert {r.nic_bps for r in added.relays} == {10**10}


def test_the_bound_counts_the_relays_nics_where_they_carry_less_than_the_wan():
    t = platform.simulated(topo.load(RELAYS), platform.Overrides(relays=1, nic_bps=10**9))    # one pair: 100 Mbit/s
    size = 8 << 20
    one = lower_bound(t, "bcast", size, list(t.nodes), 10)
    assert one == pytest.approx(size * 8 / 1e8 + 0.010)
    two = platform.simulated(topo.load(RELAYS), platform.Overrides(relays=4, nic_bps=10**9))    # the WAN's 200 Mbit/s
    assert lower_bound(two, "bcast", size, list(two.nodes), 10) == pytest.approx(size * 8 / 2e8 + 0.010)


@pytest.mark.parametrize("args, message", [
    (["--relays", "17"], "--relays: 17 is outside [0, 16]"),
    (["--relays", "-1"], "--relays must be at least 0, got -1"),
    (["--relay-nic", "1Gbps"], "--relay-nic: ambiguous unit 'Gbps'"),
    (["--nodes-per-cluster", "200", "--relays", "1"],
     "400 nodes with relays: a relayed platform lists a route per pair of nodes, at most 256 nodes"),
])
def test_bad_relay_arguments_name_the_problem(tmp_path, capsys, args, message):
    assert main(["sim", "-t", str(TWO), *args, "--coll", "bcast", "--bytes", "1KiB",
                 "--json", str(tmp_path / "r.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_sweep_takes_relays_as_an_axis(tmp_path, capsys):
    path = spec_file(tmp_path, **{"delay = \"10ms\"\n[axes]": "delay = \"10ms\"\nrelays = 1\n[axes]\nrelays = [0, 2]"})
    spec = sweep.load_spec(path)
    assert [p.relays for p in spec.points] == [1, 0, 2, 1, 1]
    assert [p.sites for p in spec.points] == [2, 2, 2, 3, 2]
    assert [c.relays for c in sweep.platform_of(spec, spec.points[2]).clusters] == [2, 2]
    bad = spec_file(tmp_path, **{"delay = \"10ms\"\n[axes]": "delay = \"10ms\"\n[axes]\nrelays = [20]"})
    assert main(["sim", "--sweep", str(bad)]) == 2
    assert "axes.relays: 20: a whole number of relays per site in [0, 16]" in capsys.readouterr().err


def test_a_relayed_simulation_is_exact_and_held_to_its_relays(tmp_path):
    """2 x 3 ranks at 1 Gbit/s, one relay pair at 100 Mbit/s under a 200 Mbit/s WAN: the
    results checked by collbench, with libwanmpi and without; a 4 MiB
    broadcast cannot cross faster than the one relay pair carries it."""
    for extra in ([], ["--no-wanmpi"]):
        out = tmp_path / "r.json"
        assert main(["sim", "-t", str(TWO), "--nodes-per-cluster", "3", "--nic-rate", "1Gbit", "--relays", "1",
                     "--relay-nic", "100Mbit",
                     "--coll", "bcast", "allreduce", "--bytes", "64KiB", "4MiB", "--json", str(out),
                     "--timeout", "300", *extra]) == 0
        document = json.loads(out.read_text())
        assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
        assert document["settings"]["overrides"]["relays"] == 1
        rows = {(r["op"], r["bytes"]): r for r in document["summary"]}
        assert len(rows) == 4
        big = rows[("bcast", 4 << 20)]
        assert big["bound_s"] == pytest.approx((4 << 20) * 8 / 1e8 + 0.010 + 2 * 50e-6)   # the hosts' links
        assert big["bound_s"] <= big["median_s"], big
