"""`wanmpi sim` (python/wanmpi/sim, docs/scale.md): the SimGrid platform
generated from the topology file, its errors, and one small calibration case
that runs SMPI (2 x 4 ranks, a 64 KiB allreduce, checked by collbench) with
libwanmpi and without, and the IS kernel (bench/patterns.c, class S) likewise. `make test` builds libwanmpi for SMPI first (`make
smpi`); without it, the first SMPI test builds it (about a minute)."""
from __future__ import annotations

import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from dataclasses import replace

import pytest

from wanmpi import topo
from wanmpi.cli.main import main
from wanmpi.rules import format_bytes
from wanmpi.sim import platform, run, sweep
from wanmpi.topo import TopologyError

from conftest import REPO, WANMPI

TWO = REPO / "examples" / "two-clusters.toml"
THREE = REPO / "examples" / "three-clusters.toml"
CHAIN = """
[[cluster]]
name = "a"
nodes = 2
[[cluster]]
name = "b"
nodes = 2
[[cluster]]
name = "c"
nodes = 2
[[cluster]]
name = "d"
nodes = 1
[[wan.link]]
clusters = ["a", "b"]
delay = "1ms"
[[wan.link]]
clusters = ["b", "c"]
delay = "2ms"
rate = "1Gbit"
[[wan.link]]
clusters = ["c", "d"]
delay = "3ms"
"""


# The simulator touches no testbed: these tests neither take the testbed lock
# nor check for leftovers (conftest's session fixtures, overridden here).
@pytest.fixture(scope="session", autouse=True)
def testbed_lock():
    yield


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    yield


def parsed(t: topo.Topology) -> ET.Element:
    return ET.fromstring(platform.platform_xml(t).split("\n", 2)[2])    # after <?xml?> and <!DOCTYPE>


def bandwidth(text: str) -> int:
    assert text.endswith("bps")
    return int(text[:-3])


def latency_us(text: str) -> int:
    assert text.endswith("us")
    return int(text[:-2])


def check_platform(t: topo.Topology) -> None:
    """Every cluster, WAN link and route of `t`, as the XML has them."""
    zone = parsed(t).find("zone")
    clusters = {c.get("id"): c for c in zone.findall("cluster")}
    assert list(clusters) == [c.name for c in t.clusters]
    for c in t.clusters:
        x = clusters[c.name]
        assert x.get("radical") == f"0-{len(c.nodes) - 1}"
        assert [f"{x.get('prefix')}{i}" for i in range(len(c.nodes))] == [n.name for n in c.nodes]
        assert bandwidth(x.get("bw")) == c.nic_bps
        assert x.get("sharing_policy") == "SPLITDUPLEX" and x.get("router_id") == c.router
        assert x.get("bb_bw") is None          # no backbone: a non-blocking switch
    links = {l.get("id"): l for l in zone.findall("link")}
    assert set(links) == {f"wan-{l.name}" for l in t.links}
    for l in t.links:
        assert bandwidth(links[f"wan-{l.name}"].get("bandwidth")) == l.rate_bps
        assert latency_us(links[f"wan-{l.name}"].get("latency")) == l.delay_us
    routes = {(r.get("src"), r.get("dst")): r for r in zone.findall("zoneRoute")}
    names = [c.name for c in t.clusters]
    assert set(routes) == {(a, b) for a in names for b in names if a != b}
    for (a, b), r in routes.items():
        assert (r.get("gw_src"), r.get("gw_dst")) == (f"{a}-r", f"{b}-r")
        assert r.get("symmetrical") == "NO"
        # the hops chain from a to b over the topology's links, each in its direction
        here = a
        for hop in r.findall("link_ctn"):
            link = next(l for l in t.links if f"wan-{l.name}" == hop.get("id"))
            assert here in (link.a, link.b)
            assert hop.get("direction") == ("UP" if here == link.a else "DOWN")
            here = link.b if here == link.a else link.a
        assert here == b
    assert platform.hostfile(t).split() == [n.name for n in t.nodes]


def test_two_clusters_platform_follows_the_topology_file():
    t = topo.load(TWO)
    check_platform(t)
    zone = parsed(t).find("zone")
    assert [c.get("radical") for c in zone.findall("cluster")] == ["0-3", "0-3"]
    assert [bandwidth(c.get("bw")) for c in zone.findall("cluster")] == [100_000_000] * 2
    (wan,) = zone.findall("link")
    assert (bandwidth(wan.get("bandwidth")), latency_us(wan.get("latency"))) == (200_000_000, 10_000)
    assert platform.rank_clusters(t) == "a:0-3;b:4-7"


def test_three_clusters_platform_has_each_links_own_rate_and_delay():
    t = topo.load(THREE)
    check_platform(t)
    zone = parsed(t).find("zone")
    assert [c.get("radical") for c in zone.findall("cluster")] == ["0-2", "0-1", "0-2"]
    assert bandwidth(zone.findall("cluster")[2].get("bw")) == 200_000_000
    links = {l.get("id"): (bandwidth(l.get("bandwidth")), latency_us(l.get("latency"))) for l in zone.findall("link")}
    assert links == {"wan-a-b": (200_000_000, 5000), "wan-a-c": (200_000_000, 10_000),
                     "wan-b-c": (100_000_000, 15_000)}
    assert platform.rank_clusters(t) == "a:0-2;b:3-4;c:5-7"


def test_routes_between_sites_without_a_direct_link_cross_every_link_between():
    t = topo.loads(CHAIN, "chain.toml")
    check_platform(t)
    routes = {(r.get("src"), r.get("dst")): [(h.get("id"), h.get("direction")) for h in r]
              for r in parsed(t).find("zone").findall("zoneRoute")}
    assert routes[("a", "d")] == [("wan-a-b", "UP"), ("wan-b-c", "UP"), ("wan-c-d", "UP")]
    assert routes[("d", "b")] == [("wan-c-d", "DOWN"), ("wan-b-c", "DOWN")]


def test_overrides_apply_to_every_cluster_and_link():
    o = platform.Overrides(nodes_per_cluster=256, nic_bps=10**10, wan_bps=10**11, delay_us=30_000)
    t = platform.simulated(topo.load(THREE), o)
    check_platform(t)
    assert [len(c.nodes) for c in t.clusters] == [256] * 3 and len(platform.hostfile(t).split()) == 768
    assert {c.nic_bps for c in t.clusters} == {10**10}
    assert {(l.rate_bps, l.delay_us) for l in t.links} == {(10**11, 30_000)}
    assert platform.rank_clusters(t) == "a:0-255;b:256-511;c:512-767"
    # no override: the file's values
    assert platform.simulated(topo.load(THREE), platform.Overrides()) == topo.load(THREE)


def test_an_unreachable_cluster_is_named():
    t = topo.loads(CHAIN, "chain.toml")
    cut = replace(t, links=t.links[:2])
    with pytest.raises(platform.PlatformError, match="chain.toml: wan: no WAN route from cluster 'a' to 'd'"):
        platform.platform_xml(cut)


@pytest.mark.parametrize("cluster_b, key", [
    ('nodes = 4\nnic = "100Mbps"', "cluster[1].nic"),
    ("nodes = 0", "cluster[1].nodes"),
    ('nodes = 4\nnic = "fast"', "cluster[1].nic"),
])
def test_bad_topology_values_give_the_loaders_error(tmp_path, capsys, cluster_b, key):
    bad = tmp_path / "bad.toml"
    bad.write_text(TWO.read_text().replace('name = "b"\nnodes = 4', f'name = "b"\n{cluster_b}'))
    with pytest.raises(TopologyError) as loader:
        topo.load(bad)
    assert loader.value.key == key
    assert main(["sim", "-t", str(bad), "--platform-only", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err.strip() == f"wanmpi: error: {loader.value}"
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("args, message", [
    (["--wan-rate", "10Mbps"], "--wan-rate: ambiguous unit 'Mbps'"),
    (["--nic-rate", "fast"], "--nic-rate: cannot read 'fast' as a rate"),
    (["--delay", "10"], "--delay: '10' has no unit"),
    (["--nodes-per-cluster", "0"], "--nodes-per-cluster must be at least 1, got 0"),
    (["--nodes-per-cluster", "2000"], "--nodes-per-cluster: 2000 is outside [1, 1024]"),
    (["--coll", "gather"], "--coll: unknown 'gather' (choose from bcast, allreduce, alltoall)"),
    (["--bytes", "64Kbit"], "--bytes: unknown unit 'Kbit'"),
])
def test_bad_arguments_name_the_problem(tmp_path, capsys, args, message):
    assert main(["sim", "-t", str(TWO), *args, "--platform-only", str(tmp_path / "p")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("args, message", [
    (["--kernel", "lu"], "argument --kernel: invalid choice: 'lu' (choose from 'ft', 'is')"),
    (["--kernel", "ft", "--class", "C"], "argument --class: invalid choice: 'C' (choose from 'S', 'A', 'B')"),
])
def test_a_kernel_or_class_it_cannot_run_is_refused(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit:
        main(["sim", "-t", str(TWO), *args, "--json", str(tmp_path / "k.json")])
    assert exit.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "k.json").exists()


def test_platform_only_writes_what_the_overrides_say(tmp_path):
    assert main(["sim", "-t", str(TWO), "--nodes-per-cluster", "16", "--wan-rate", "10Gbit", "--delay", "30ms",
                 "--platform-only", str(tmp_path)]) == 0
    zone = ET.fromstring((tmp_path / "platform.xml").read_text().split("\n", 2)[2]).find("zone")
    assert [c.get("radical") for c in zone.findall("cluster")] == ["0-15", "0-15"]
    assert [(l.get("bandwidth"), l.get("latency")) for l in zone.findall("link")] == [("10000000000bps", "30000us")]
    assert len((tmp_path / "hostfile").read_text().split()) == 32


# ---- SMPI itself: the calibration case ------------------------------------------------------
def simulated_allreduce(tmp_path, *extra: str) -> dict:
    out = tmp_path / "sim.json"
    assert main(["sim", "-t", str(TWO), "--coll", "allreduce", "--bytes", "64KiB", "--json", str(out),
                 "--timeout", "120", *extra]) == 0
    document = json.loads(out.read_text())
    assert document["format"] == "wanmpi-bench/1" and document["bench"] == "sim"
    assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    (row,) = document["summary"]
    assert (row["op"], row["bytes"], row["ranks"]) == ("allreduce", 65536, 8)
    # collbench checked the result (it exits 3 when it is wrong); simulated
    # time: above the physical bound, and not absurdly so
    assert row["bound_s"] < row["median_s"] < 20 * row["bound_s"]
    return document


def test_smpi_allreduce_with_libwanmpi_runs_its_wrappers_exactly(tmp_path):
    document = simulated_allreduce(tmp_path)
    assert document["summary"][0]["variant"] == "wanmpi"
    stats = document["cases"][0]["metrics"]["wanmpi_stats"]        # WANMPI_STATS of rank 0
    assert (stats["rank"], stats["size"]) == (0, 8)
    # one untimed call, one timed, both ours (not the MPI's)
    assert stats["collectives"]["allreduce"]["calls"] == 2
    assert stats["collectives"]["allreduce"]["multilane"] == 2 and stats["collectives"]["allreduce"]["mpi"] == 0
    assert set(stats["bytes_to_cluster"]) == {"a", "b"}             # the ranks' clusters (WANMPI_RANK_CLUSTERS)


def test_smpi_allreduce_without_libwanmpi_is_smpis_own(tmp_path):
    document = simulated_allreduce(tmp_path, "--no-wanmpi", "--mpi-coll", "ompi")
    assert document["summary"][0]["variant"] == "ompi"
    assert "wanmpi_stats" not in document["cases"][0]["metrics"]
    assert "--cfg=smpi/coll-selector:ompi" in document["settings"]["smpi_options"]


def simulated_is(tmp_path, *extra: str) -> dict:
    out = tmp_path / "is.json"
    assert main(["sim", "-t", str(TWO), "--kernel", "is", "--class", "S", "--json", str(out), "--timeout", "120",
                 *extra]) == 0
    document = json.loads(out.read_text())
    assert document["bench"] == "sim" and document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    # the suite's class S arguments (bench/kernels.py), and patterns' own check passed
    assert document["settings"]["args"] == ["is", "--bytes", "32768", "--iters", "5"]
    assert document["settings"]["class"] == "S"
    (row,) = document["summary"]
    assert (row["kernel"], row["class"], row["ranks"], row["bytes"], row["iters"], row["check"]) == \
        ("is", "S", 8, 32768, 5, "ok")
    assert row["delay_ms"] == 10.0
    assert row["per_iter_s"] == pytest.approx(row["seconds"] / 5, abs=1e-6)
    # every iteration crosses the 10 ms WAN at least twice (the counts, then the buckets)
    assert 0.02 < row["per_iter_s"] < 1.0
    return document


def test_smpi_is_kernel_with_libwanmpi_runs_its_scheduled_alltoalls(tmp_path):
    document = simulated_is(tmp_path)
    assert document["summary"][0]["variant"] == "wanmpi"
    collectives = document["cases"][0]["metrics"]["wanmpi_stats"]["collectives"]
    # one untimed iteration and five timed: an alltoall of the counts and an alltoallv each, all ours
    for op in ("alltoall", "alltoallv"):
        assert (collectives[op]["calls"], collectives[op]["scheduled"], collectives[op]["mpi"]) == (6, 6, 0)


def test_smpi_is_kernel_without_libwanmpi_is_smpis_own(tmp_path):
    document = simulated_is(tmp_path, "--no-wanmpi")
    assert document["summary"][0]["variant"] == "mpich"
    assert "wanmpi_stats" not in document["cases"][0]["metrics"]


# ---- the sweep (wanmpi sim --sweep) ---------------------------------------------------------
SPEC = """
ops = ["bcast", "allreduce"]
bytes = ["64KiB", "1MiB"]
timeout = "300s"
[topologies]
2 = "{two}"
3 = "{three}"
[base]
sites = 2
nodes_per_cluster = 2
nic_rate = "10Gbit"
wan_rate = "100Gbit"
delay = "10ms"
[axes]
sites = [3]
delay = ["10ms", "30ms"]
[settings.singlelane]
WANMPI_BCAST = "singlelane"
WANMPI_ALLREDUCE = "singlelane"
"""


def spec_file(tmp_path, text: str = SPEC, **replace_: str):
    text = text.format(two=TWO, three=THREE)
    for old, new in replace_.items():
        text = text.replace(old, new)
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_sweep_points_vary_one_factor_at_a_time(tmp_path):
    spec = sweep.load_spec(spec_file(tmp_path))
    base = sweep.Point(2, 2, 10_000_000_000, 100_000_000_000, 10_000)
    # the base, then each axis value with the rest at the base; 10 ms is the base again, once
    assert spec.points == (base, replace(base, sites=3), replace(base, delay_us=30_000))
    assert (spec.ops, spec.sizes, spec.selectors, spec.timeout_s) == (("bcast", "allreduce"), (65536, 1 << 20),
                                                                      ("mpich", "ompi"), 300.0)
    assert [len(spec.topologies[s].clusters) for s in (2, 3)] == [2, 3]
    assert spec.settings == {"wanmpi-singlelane": {"WANMPI_BCAST": "singlelane", "WANMPI_ALLREDUCE": "singlelane"}}


@pytest.mark.parametrize("change, message", [
    ({'timeout = "300s"': 'timeout = "5min"'}, "timeout: '5min': unknown unit 'min'"),
    ({'nic_rate = "10Gbit"': 'nic_rate = "fast"'}, "base.nic_rate: 'fast': cannot read 'fast' as a rate"),
    ({"sites = [3]": "sites = [5]"}, "[topologies] has no file for 5 sites"),
    ({"sites = [3]": "sites = [1]"}, "axes.sites: 1: a number of sites, 2 or more"),
    ({"sites = [3]": "nodes = [3]"}, "[axes]: unknown axis in delay, nodes"),
    ({'ops = ["bcast", "allreduce"]': 'ops = ["gather"]'}, "ops: 'gather' is not one of bcast, allreduce, alltoall"),
    ({"delay = \"10ms\"\n[axes]": "[axes]"}, "[base] must set exactly"),
    ({"3 = \"": "3 = \"/nonexistent/x.toml\" #"}, "topologies.3:"),
    ({"[axes]": "frequency = 3\n[axes]"}, None),
    ({"WANMPI_BCAST": "BCAST"}, "settings.singlelane.BCAST: expected WANMPI_<NAME>"),
    ({"[settings.singlelane]": "[settings.Single]"}, "settings.Single: expected a table of WANMPI_* variables"),
    ({'timeout = "300s"': 'timeout = "300s"\nsharing = "fair"'}, "sharing: 'fair' is not one of tcp, equal"),
    ({'timeout = "300s"': 'timeout = "300s"\nsharing = ["equal"]'}, "sharing: ['equal'] is not one of tcp, equal"),
])
def test_a_bad_sweep_spec_is_refused_naming_the_key(tmp_path, capsys, change, message):
    path = spec_file(tmp_path, **change)
    if message is None:         # a key outside [base]/[axes] that TOML puts into [base]
        message = "[base] must set exactly"
    assert main(["sim", "--sweep", str(path), "--json", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err, err
    assert not (tmp_path / "s.json").exists()


def test_a_spec_whose_topology_has_other_sites_is_refused(tmp_path, capsys):
    path = spec_file(tmp_path, **{'3 = "': '3 = "' + str(TWO) + '" #'})
    assert main(["sim", "--sweep", str(path)]) == 2
    assert "topologies.3: " in capsys.readouterr().err


def test_a_sweep_runs_every_point_and_variant_exactly(tmp_path, capsys):
    """Three points x (ours, ours single-lane, MPICH's and Open MPI's
    algorithms alone), each result checked by collbench; the summary has
    every point, op and size, above the bound; three sites at 10 ms with
    64 KiB: ours one WAN delay (the star of clusters, the exchange), where a
    chain through the clusters takes two."""
    out = tmp_path / "s.json"
    assert main(["sim", "--sweep", str(spec_file(tmp_path)), "--jobs", "2", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["bench"] == "sim-sweep" and document["counts"] == {"cases": 12, "ok": 12, "failed": 0}
    single = [c for c in document["cases"] if c["variant"] == "wanmpi-singlelane"]
    assert len(single) == 3
    for c in single:          # the settings reached libwanmpi: every call of both ops single-lane
        ops = c["metrics"]["wanmpi_stats"]["collectives"]
        assert ops["bcast"]["singlelane"] == ops["bcast"]["calls"] == 4, ops
        assert ops["allreduce"]["singlelane"] == ops["allreduce"]["calls"] == 4, ops
    log = capsys.readouterr().out          # each simulation's times as it ends, as in the document
    for c in document["cases"]:
        times = "; ".join(f"{r['op']} {format_bytes(r['bytes'])} {r['median_s']:.6f} s" for r in c["metrics"]["rows"])
        assert f", {c['variant']}: " in log and f" s of wall time, ok: {times}\n" in log, (times, log)
    rows = document["summary"]
    assert len(rows) == 3 * 2 * 2
    for row in rows:
        for v in ("wanmpi", "wanmpi-singlelane", "mpich", "ompi"):
            assert row["bound_s"] <= row[f"{v}_s"] < 100 * row["bound_s"], (row, v)
        assert row["best_mpi_over_wanmpi"] == round(min(row["mpich_s"], row["ompi_s"]) / row["wanmpi_s"], 3)
    three = [r for r in rows if r["sites"] == 3 and r["bytes"] == 65536]
    assert len(three) == 2 and all(r["wanmpi_s"] < 1.5 * r["bound_s"] for r in three), three


def test_plot_sweep_draws_each_varied_axis_and_refuses_other_documents(tmp_path, capsys):
    base = {"sites": 2, "nodes_per_cluster": 2, "nic_bps": 10**10, "wan_bps": 10**11, "delay_ms": 10.0}
    rows = [{**base, **change, "ranks": 4, "op": "bcast", "bytes": 1 << 20, "bound_s": 0.011,
             "wanmpi_s": 0.012, "mpich_s": 0.016, "ompi_s": 0.3}
            for change in ({}, {"delay_ms": 30.0}, {"sites": 3})]
    result = tmp_path / "sweep.json"
    result.write_text(json.dumps({"format": "wanmpi-bench/1", "bench": "sim-sweep", "summary": rows}))
    assert main(["plot", "sweep", str(result), "-o", str(tmp_path / "figures")]) == 0
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["sweep-delay_ms.png", "sweep-sites.png"]
    other = tmp_path / "coll.json"
    other.write_text(json.dumps({"format": "wanmpi-bench/1", "bench": "coll", "summary": []}))
    assert main(["plot", "sweep", str(other)]) == 2
    assert "not a `wanmpi sim --sweep` result (bench 'coll')" in capsys.readouterr().err


def test_calls_start_at_one_simulated_instant_not_as_the_barrier_lets_them_out(tmp_path):
    """MPICH's barrier (SMPI's copy) lets the ranks of 2x4 out up to a WAN
    delay per round apart, and a rank out early waits for the root: with the
    default start (one instant of the simulated clock) the broadcast takes
    less, none starts late, and the skew it removed is recorded."""
    rows = {}
    for start in ("barrier", "clock"):
        out = tmp_path / f"{start}.json"
        assert main(["sim", "-t", str(TWO), "--coll", "bcast", "--bytes", "64KiB", "--start", start,
                     "--json", str(out), "--timeout", "120"]) == 0
        document = json.loads(out.read_text())
        assert document["settings"]["start"] == start
        (rows[start],) = document["cases"][0]["metrics"]["rows"]
    assert rows["clock"]["start"] == "clock" and rows["clock"]["late_starts"] == 0
    assert rows["barrier"]["start_skew_s"] >= 0.010            # at least one 10 ms delay apart
    assert rows["clock"]["median_s"] < rows["barrier"]["median_s"] - 0.005, rows


def test_one_large_message_across_the_wan_is_not_held_to_a_tcp_window(tmp_path):
    """SimGrid caps every message at TCP-gamma / RTT (4 MiB by default: 1.66
    Gbit/s at 10 ms, 5.2x the bound for 64 MiB), and per message, so one MPI
    message was held to it where our pipeline of chunks was not. The platform
    models hosts tuned for the WAN: one 16 MiB message from one site to the
    other at 10 Gbit/s takes the bound, whose delay counts the two hosts'
    links of 50 us beside the WAN's (and stays below the simulated time)."""
    out = tmp_path / "one.json"
    assert main(["sim", "-t", str(TWO), "--nodes-per-cluster", "1", "--nic-rate", "10Gbit", "--wan-rate", "100Gbit",
                 "--coll", "bcast", "--bytes", "16MiB", "--no-wanmpi", "--iters", "1", "--json", str(out),
                 "--timeout", "120"]) == 0
    (row,) = json.loads(out.read_text())["summary"]
    assert row["bound_s"] == pytest.approx((16 << 20) * 8 / 10e9 + 0.010 + 2 * 50e-6)
    assert row["bound_s"] <= row["median_s"] < 1.02 * row["bound_s"], row


def test_nic_latency_is_every_hosts_link_latency(tmp_path, capsys):
    assert main(["sim", "-t", str(TWO), "--nic-latency", "5us", "--platform-only", str(tmp_path)]) == 0
    zone = ET.fromstring((tmp_path / "platform.xml").read_text().split("\n", 2)[2]).find("zone")
    assert [latency_us(c.get("lat")) for c in zone.findall("cluster")] == [5, 5]
    assert main(["sim", "-t", str(TWO), "--nic-latency", "5", "--platform-only", str(tmp_path / "x")]) == 2
    assert "--nic-latency: '5' has no unit" in capsys.readouterr().err
    spec = sweep.load_spec(spec_file(tmp_path, **{'timeout = "300s"': 'timeout = "300s"\nnic_latency = "5us"'}))
    assert spec.nic_latency_us == 5


def test_equal_sharing_replaces_simgrids_latency_weighted_shares(tmp_path):
    """SimGrid shares a link among flows by their routes' latency (TCP's RTT
    unfairness, network/weight-S 8775 by default); a spec's `sharing =
    "equal"` gives near-equal shares, as paced senders would get."""
    assert not any("weight-S" in o for o in run.smpi_options("mpich", 0.0))
    assert "--cfg=network/weight-S:1e7" in run.smpi_options("mpich", 0.0, "equal")
    spec = sweep.load_spec(spec_file(tmp_path, **{'timeout = "300s"': 'timeout = "300s"\nsharing = "equal"'}))
    assert spec.sharing == "equal"


def test_a_simulation_past_its_timeout_is_a_failed_case_and_leaves_no_process(tmp_path, capsys):
    """smpirun runs smpimain in the background: a timeout kills both."""
    out = tmp_path / "t.json"
    assert main(["sim", "-t", str(TWO), "--nodes-per-cluster", "16", "--coll", "allreduce", "--bytes", "16MiB",
                 "--timeout", "2", "--json", str(out)]) == 1
    document = json.loads(out.read_text())
    assert document["counts"] == {"cases": 1, "ok": 0, "failed": 1}
    assert "smpirun did not end within 2 s" in document["cases"][0]["error"]
    time.sleep(0.5)
    # an orphan would still run in its deleted work directory (simulations of others run in live ones)
    orphans = []
    for pid in subprocess.run(["pgrep", "-x", "smpimain"], capture_output=True, text=True).stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/cwd").endswith(" (deleted)"):
                orphans.append(pid)
        except OSError:
            pass
    assert not orphans, orphans


def test_wanmpi_sim_told_to_stop_ends_its_simulations(tmp_path):
    """SIGTERM to `wanmpi sim` (a batch system ending a job) while a sweep's
    threads wait on their smpiruns: every simulation's process group is
    killed, none starts after, and the command exits 143 at once."""
    spec = spec_file(tmp_path, **{'ops = ["bcast", "allreduce"]': 'ops = ["allreduce"]',
                                  'bytes = ["64KiB", "1MiB"]': 'bytes = ["16MiB"]',
                                  "nodes_per_cluster = 2": "nodes_per_cluster = 16"})
    proc = subprocess.Popen([*WANMPI, "sim", "--sweep", str(spec), "--jobs", "2"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def smpiruns() -> set[str]:
        return set(subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,    # smpirun (a shell script)
                                  text=True).stdout.split())
    try:
        groups, deadline = set(), time.monotonic() + 120
        while not groups and time.monotonic() < deadline:
            time.sleep(0.2)
            groups = smpiruns()
        assert groups, "the sweep started no simulation"
        time.sleep(1)
        groups |= smpiruns()
        proc.terminate()
        assert proc.wait(timeout=60) == 143, proc.stderr.read()[-2000:]
        time.sleep(0.5)
        for group in groups:            # smpirun leads its group: smpimain and the ranks' helpers
            ps = subprocess.run(["ps", "-o", "pid=,stat=", "-g", group], capture_output=True, text=True).stdout
            left = [line for line in ps.splitlines() if not line.split()[1].startswith("Z")]   # not dead yet reaped
            assert not left, f"process group {group} still runs {left}"
    finally:
        proc.kill()
        proc.communicate()


def test_clean_removes_a_simulation_whose_smpirun_was_killed(tmp_path, capsys):
    """smpirun killed alone (as a plain kill of a job's process did) leaves
    smpimain running without it; `wanmpi clean` ends it and its work directory
    (its simulator part: the whole command would also tear down a testbed)."""
    from wanmpi.sim import run
    run.build()
    sim = platform.simulated(topo.load(TWO), platform.Overrides(16, None, None, None))
    work = run.smpi_dir() / "runs" / f"orphan-{os.getpid()}"
    xml, hosts = platform.write(sim, work)
    command = ["smpirun", "-np", "32", "-platform", str(xml), "-hostfile", str(hosts),
               *run.smpi_options("mpich", run.default_send_overhead(sim)), str(run.program("collbench", True)),
               "--ops", "allreduce", "--sizes", "64M", "--iters", "50"]
    env = {**os.environ, **run.rank_environment(sim, None)}
    smpirun = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    def children():
        out = subprocess.run(["pgrep", "-P", str(smpirun.pid), "-x", "smpimain"], capture_output=True, text=True)
        return out.stdout.split()
    while not children() and time.monotonic() < deadline:
        time.sleep(0.2)
    (child,) = children()
    smpirun.kill()
    smpirun.wait()
    os.utime(work, (time.time() - 120, time.time() - 120))
    try:
        removed = run.clean_leftovers()
        assert f"simulation process {child} (smpimain) whose smpirun is gone" in removed, removed
        assert f"simulation work directory {work}" in removed, removed
        time.sleep(0.5)
        assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    finally:
        subprocess.run(["kill", "-9", child], capture_output=True)
    assert not work.exists()
