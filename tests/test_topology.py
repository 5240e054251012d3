"""The topology file: every example loads, every bad value gets its own error."""
import pytest

from wanmpi import topo
from wanmpi.topo import TopologyError

GOOD = """
[[cluster]]
name = "a"
[[cluster]]
name = "b"
"""


def error_of(text: str) -> TopologyError:
    with pytest.raises(TopologyError) as e:
        topo.loads(text, "bad.toml")
    return e.value


@pytest.mark.parametrize("name", ["two-clusters", "three-clusters", "private-cluster", "real-clusters"])
def test_every_example_loads(name):
    t = topo.load(f"examples/{name}.toml")
    assert len(t.clusters) >= 2 and t.links


def test_default_topology_matches_the_documented_testbed():
    t = topo.load(None)
    assert [c.name for c in t.clusters] == ["a", "b"]
    assert [len(c.nodes) for c in t.clusters] == [4, 4]
    (link,) = t.links
    a = t.cluster("a")
    # NICs slower than the WAN, but a cluster's NICs together faster than it.
    assert a.nic_bps < link.rate_bps < a.nic_bps * len(a.nodes)
    assert link.delay_us == 10_000


def test_defaults_fill_every_key():
    t = topo.loads(GOOD)
    c = t.cluster("a")
    assert (len(c.nodes), c.nic_bps, c.port_buffer, c.private, c.relays) == (4, 100_000_000, 64_000, False, 0)
    assert (t.links[0].rate_bps, t.links[0].delay_us, t.links[0].queue_bytes, t.links[0].loss) == \
        (200_000_000, 10_000, 100_000, 0.0)
    assert t.mtu == 1500


def test_names_and_addresses_follow_the_documented_scheme():
    t = topo.load("examples/private-cluster.toml")
    pub, priv = t.clusters
    assert [n.name for n in pub.nodes] == ["pub0", "pub1", "pub2", "pub3"]
    assert pub.nodes[2].address == "198.18.0.3" and pub.nodes[2].netns == "wm-pub2"
    assert priv.network == "10.1.0.0/24" and priv.nodes[0].address == "10.1.0.1"
    assert (pub.gateway, priv.gateway) == ("198.18.0.254", "10.1.0.254")
    assert (pub.public_address, priv.public_address) == ("198.19.0.1", "198.19.0.2")


def test_three_clusters_get_their_own_links():
    t = topo.load("examples/three-clusters.toml")
    delays = {l.name: l.delay_us for l in t.links}
    assert delays == {"a-b": 5000, "a-c": 10000, "b-c": 15000}
    assert {l.name: l.rate_bps for l in t.links}["b-c"] == 100_000_000


def test_routes_go_around_a_missing_link():
    t = topo.loads(GOOD + '[[cluster]]\nname = "c"\n[[wan.link]]\nclusters = ["a","b"]\n'
                   '[[wan.link]]\nclusters = ["b","c"]\n')
    assert t.next_hops("a")["c"].name == "a-b"


@pytest.mark.parametrize("text, key, problem", [
    (GOOD + "[wan]\nrate = \"-100Mbit\"\n", "wan.rate", "negative rate"),
    (GOOD + "[wan]\nrate = \"100Mbps\"\n", "wan.rate", "ambiguous unit 'Mbps'"),
    (GOOD + "[wan]\nrate = \"100furlongs\"\n", "wan.rate", "unknown unit 'furlongs'"),
    (GOOD + "[wan]\nrate = \"100bit\"\n", "wan.rate", "below 1 kbit/s"),
    (GOOD + "[wan]\nrate = 100\n", "wan.rate", "has no unit"),
    (GOOD + "[wan]\ndelay = \"10\"\n", "wan.delay", "has no unit"),
    (GOOD + "[wan]\ndelay = \"-1ms\"\n", "wan.delay", "negative duration"),
    (GOOD + "[wan]\nqueue = \"1KB\"\n", "wan.queue", "smaller than one packet"),
    (GOOD + "[wan]\nloss = 1.5\n", "wan.loss", "outside [0, 1]"),
    (GOOD + "[wan]\nloss = \"2x\"\n", "wan.loss", "unknown unit 'x'"),
    (GOOD + "[wan]\nbandwidth = \"1Gbit\"\n", "wan.bandwidth", "unknown key"),
    (GOOD + "[wans]\n", "wans", "unknown key"),
    ('[[cluster]]\nname = "a"\nnodes = 0\n[[cluster]]\nname = "b"\n', "cluster[0].nodes", "at least one node"),
    ('[[cluster]]\nname = "a"\nnodes = -2\n[[cluster]]\nname = "b"\n', "cluster[0].nodes", "outside"),
    ('[[cluster]]\nname = "a"\nnodes = "four"\n[[cluster]]\nname = "b"\n', "cluster[0].nodes", "expected an integer"),
    ('[[cluster]]\nname = "a"\nnic = "-1Gbit"\n[[cluster]]\nname = "b"\n', "cluster[0].nic", "negative rate"),
    ('[[cluster]]\nname = "a"\nport_buffer = "64 parsecs"\n[[cluster]]\nname = "b"\n',
     "cluster[0].port_buffer", "unknown unit 'parsecs'"),
    ('[[cluster]]\nname = "a"\nprivate = "yes"\n[[cluster]]\nname = "b"\n', "cluster[0].private", "true or false"),
    ('[[cluster]]\nname = "a"\ncolour = "red"\n[[cluster]]\nname = "b"\n', "cluster[0].colour", "unknown key"),
    ('[[cluster]]\nname = "a"\n[[cluster]]\nname = "a"\n', "cluster[1].name", "duplicate cluster name 'a'"),
    ('[[cluster]]\nname = "A-1"\n', "cluster[0].name", "not a valid cluster name"),
    ('[[cluster]]\nname = "a1"\n', "cluster[0].name", "not a valid cluster name"),
    ('[[cluster]]\nnodes = 2\n', "cluster[0].name", "missing"),
    ('[testbed]\nmtu = 100000\n' + GOOD, "testbed.mtu", "outside"),
    ('[testbed]\nmtu = 9000\n' + GOOD + '[wan]\nqueue = "8KB"\n', "wan.queue", "(testbed.mtu = 9000 B)"),
    ("", "cluster", "no clusters"),
    (GOOD + '[[wan.link]]\nclusters = ["a", "z"]\n', "wan.link[0].clusters", "unknown cluster 'z'"),
    (GOOD + '[[wan.link]]\nclusters = ["a", "a"]\n', "wan.link[0].clusters", "two different clusters"),
    (GOOD + '[[wan.link]]\nclusters = ["a","b"]\n[[wan.link]]\nclusters = ["b","a"]\n',
     "wan.link[1].clusters", "duplicate link"),
    (GOOD + '[[cluster]]\nname = "c"\n[[wan.link]]\nclusters = ["a","b"]\n', "wan.link", "cannot be reached"),
    ('[[cluster]]\nname = "a"\n[[cluster]]\nname = "b"\nhosts = ["h1"]\nnetwork = "10.0.0.0/8"\n',
     "cluster", "mixes emulated clusters"),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\n', "cluster[0].network", "missing"),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\nnetwork = "ten"\n', "cluster[0].network", "not a CIDR"),
    (GOOD + "[collectives]\nlanes = 0\n", "collectives.lanes", "outside [1, 200]"),
    (GOOD + "[collectives]\nlanes = \"many\"\n", "collectives.lanes", "expected an integer"),
    (GOOD + "[collectives]\nchunk = \"100B\"\n", "collectives.chunk", "outside [1KB, 1GB]"),
    (GOOD + "[collectives]\nsmall = \"-1KB\"\n", "collectives.small", "negative size"),
    (GOOD + "[collectives]\nbcast = \"fastest\"\n", "collectives.bcast", "not an algorithm"),
    (GOOD + "[collectives]\nalltoall = \"multilane\"\n", "collectives.alltoall", "not an algorithm"),
    (GOOD + "[collectives]\nneighbor_alltoall = \"mpi\"\n", "collectives.neighbor_alltoall", "unknown key"),
    (GOOD + "[pacing]\nalltoall = \"fast\"\n", "pacing.alltoall", "not an all-to-all rate"),
    (GOOD + "[pacing]\ndivisor = 0\n", "pacing.divisor", ""),
    ('[[cluster]]\nname = "a"\nrelays = 17\n[[cluster]]\nname = "b"\nrelays = 1\n', "cluster[0].relays", "outside [0, 16]"),
    ('[[cluster]]\nname = "a"\nrelays = 1\n[[cluster]]\nname = "b"\n', "cluster[1].relays",
     "every cluster needs at least one"),
    ('[[cluster]]\nname = "a"\nrelay_nic = "1Gbit"\n[[cluster]]\nname = "b"\n', "cluster[0].relay_nic",
     "only with relays"),
    ('[[cluster]]\nname = "a"\nrelays = 1\nrelay_nic = "fast"\n[[cluster]]\nname = "b"\nrelays = 1\n',
     "cluster[0].relay_nic", ""),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\nnetwork = "10.0.0.0/8"\nrelays = 1\n', "cluster[0].relays",
     "a real cluster names its relay hosts"),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\nnetwork = "10.0.0.0/8"\nrelays = [{ host = "g" }]\n',
     "cluster[0].relays[0]", "expected { host"),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\nnetwork = "10.0.0.0/8"\n'
     'relays = [{ host = "g", inside = "10.0.0.9", outside = "x" }]\n', "cluster[0].relays[0].outside", "not an IPv4"),
    ('[[cluster]]\nname = "a"\nhosts = ["h1"]\nnetwork = "10.0.0.0/8"\n'
     'relays = [{ host = "g", inside = "11.0.0.9", outside = "1.2.3.4" }]\n', "cluster[0].relays[0].inside",
     "not in the cluster's network"),
    ('[[cluster]]\nname = "a"\nlan_latency = "2s"\n[[cluster]]\nname = "b"\n', "cluster[0].lan_latency",
     "expected 0 to 1s"),
    ('[[cluster]]\nname = "a"\nlan_latency = "soon"\n[[cluster]]\nname = "b"\n', "cluster[0].lan_latency", ""),
    (GOOD + "[relay]\nconnections = 0\n", "relay.connections", "outside [1, 64]"),
    ('[[cluster]]\nname = "a"\nrelays = 1\n[[cluster]]\nname = "b"\nrelays = 1\n[relay]\nstanding = true\n',
     "relay.standing", "only for relay hosts of real clusters"),
    (GOOD + "[relay]\npacing = \"fast\"\n", "relay.pacing", ""),
    (GOOD + "[relay]\nbusy_poll = \"11ms\"\n", "relay.busy_poll", "0 (off) to 10ms"),
    (GOOD + "[relay]\nbusy_poll = \"soon\"\n", "relay.busy_poll", ""),
    (GOOD + "[relay]\nbusy_poll = 5\n", "relay.busy_poll", ""),
    (GOOD + "[relay]\ntransport = \"udp\"\n", "relay.transport", "not a relay transport"),
    (GOOD + "[relay]\nrbudp_rate = \"90Mbit\"\n", "relay.rbudp_rate", "only with transport = \"rbudp\""),
    (GOOD + "[relay]\ntransport = \"rbudp\"\n", "relay.rbudp_rate", "not TCP-friendly"),
    (GOOD + "[relay]\ntransport = \"rbudp\"\nrbudp_rate = \"90Mbit\"\nrbudp_payload = 1473\n",
     "relay.rbudp_payload", "outside [64, 1472]"),
    (GOOD + "[relay]\ntransport = \"rbudp\"\nrbudp_rate = \"90Mbit\"\nrbudp_streams = \"some\"\n",
     "relay.rbudp_streams", "WANMPI_UDP_PARAMS"),
    (GOOD + "[relay]\ntransport = \"rbudp\"\nrbudp_rate = \"fast\"\n", "relay.rbudp_rate", ""),
])
def test_each_bad_value_names_file_key_and_problem(text, key, problem):
    e = error_of(text)
    assert e.source == "bad.toml"
    assert e.key == key
    assert problem in e.problem
    assert str(e).startswith(f"bad.toml: {key}: ")


def test_broken_toml_names_the_file():
    e = error_of("[[cluster]\nname=")
    assert "bad.toml" in str(e) and "not valid TOML" in str(e)


def test_missing_file_names_it():
    with pytest.raises(TopologyError, match="nope.toml: cannot read file"):
        topo.load("nope.toml")


def test_collective_settings_reach_every_rank_environment():
    from wanmpi.job import libwanmpi
    t = topo.loads(GOOD + '[collectives]\nlanes = 3\nchunk = "16KiB"\nsmall = "1KiB"\n'
                   'allreduce = "singlelane"\nbarrier = "mpi"\n', "t.toml")
    env = libwanmpi.environment(t)
    assert env["WANMPI_LANES"] == "3"
    assert env["WANMPI_CHUNK"] == "16384"
    assert env["WANMPI_SMALL"] == "1024"
    assert env["WANMPI_ALLREDUCE"] == "singlelane"
    assert env["WANMPI_BARRIER"] == "mpi"
    assert "WANMPI_BCAST" not in env          # the default: left to the rules (docs/tuning.md)
    assert env["WANMPI_CLUSTER_MAP"] == "a=198.18.0.0/24;b=198.18.1.0/24"


def test_alltoall_settings_reach_every_rank_environment():
    from wanmpi.job import libwanmpi
    env = libwanmpi.environment(topo.loads(GOOD, "t.toml"))
    assert "WANMPI_ALLTOALL" not in env and "WANMPI_ALLTOALLV" not in env     # defaults: not forced
    assert (env["WANMPI_ALLTOALL_RATE"], env["WANMPI_MATB_DIVISOR"]) == ("auto", "1")
    t = topo.loads(GOOD + '[collectives]\nalltoallv = "paced"\n[pacing]\nalltoall = "matb"\ndivisor = 2\n', "t.toml")
    env = libwanmpi.environment(t)
    assert ("WANMPI_ALLTOALL" in env, env["WANMPI_ALLTOALLV"]) == (False, "paced")
    assert (env["WANMPI_ALLTOALL_RATE"], env["WANMPI_MATB_DIVISOR"]) == ("matb", "2")


def test_default_lanes_are_automatic_and_rates_are_passed():
    from wanmpi.job import libwanmpi
    env = libwanmpi.environment(topo.load())
    assert "WANMPI_LANES" not in env          # the library picks the measured best per collective
    assert (env["WANMPI_WAN_RATE"], env["WANMPI_NIC_RATE"]) == ("200000000", "100000000")


def test_lan_latency_reaches_every_rank_the_slowest_clusters():
    from wanmpi.job import libwanmpi
    assert "WANMPI_LAN_LATENCY" not in libwanmpi.environment(topo.loads(GOOD, "t.toml"))   # libwanmpi's default
    t = topo.loads('[[cluster]]\nname = "a"\nlan_latency = "3us"\n[[cluster]]\nname = "b"\n'
                   'lan_latency = "0.02ms"\n[[cluster]]\nname = "c"\n', "t.toml")
    assert [c.lan_latency_us for c in t.clusters] == [3, 20, None]
    assert libwanmpi.environment(t)["WANMPI_LAN_LATENCY"] == "20"


def test_rules_file_of_the_topology_is_relative_to_it_and_reaches_every_rank(tmp_path):
    from wanmpi.job import libwanmpi
    (tmp_path / "t.toml").write_text(GOOD + '[collectives]\nrules = "tuned/t.rules"\n[wan]\ndelay = "7ms"\n')
    env = libwanmpi.environment(topo.load(tmp_path / "t.toml"))
    assert env["WANMPI_RULES"] == str(tmp_path / "tuned" / "t.rules")
    assert env["WANMPI_WAN_DELAY"] == "7000"
    assert libwanmpi.environment(topo.loads(GOOD, "t.toml"), "/x/y.rules", 2500)["WANMPI_RULES"] == "/x/y.rules"
    assert libwanmpi.environment(topo.loads(GOOD, "t.toml"), None, 2500)["WANMPI_WAN_DELAY"] == "2500"
    assert "WANMPI_RULES" not in libwanmpi.environment(topo.loads(GOOD, "t.toml"))


def test_a_job_on_the_testbed_gets_the_emulators_live_delay(monkeypatch):
    from wanmpi.job import launch, libwanmpi
    t = topo.loads(GOOD, "t.toml")
    live = {("a-b", "a_to_b"): {"delay_us": 2000}, ("a-b", "b_to_a"): {"delay_us": 3500}}
    monkeypatch.setattr(libwanmpi.emulator, "settings", lambda: live)
    job = launch.Job(t, ["prog"], list(t.nodes), rules="/r/t.rules")
    env = job.rank_environment("openmpi")
    assert (env["WANMPI_WAN_DELAY"], env["WANMPI_RULES"]) == ("3500", "/r/t.rules")

    def no_emulator():
        raise OSError("no control socket")
    monkeypatch.setattr(libwanmpi.emulator, "settings", no_emulator)
    assert job.rank_environment("openmpi")["WANMPI_WAN_DELAY"] == "10000"      # the topology's


def test_rules_key_must_be_a_path():
    e = error_of(GOOD + "[collectives]\nrules = 3\n")
    assert str(e).startswith("bad.toml: collectives.rules: expected the path of a rules file")


def test_relay_nodes_are_named_and_addressed_from_indices():
    t = topo.load("examples/relays.toml")
    pub, priv = t.clusters
    assert [(r.name, r.inside, r.outside, r.nic_bps) for r in priv.relay_nodes] == [
        ("priv-relay0", "10.1.0.220", "198.19.2.1", 100_000_000),
        ("priv-relay1", "10.1.0.221", "198.19.2.2", 100_000_000)]
    assert pub.relay_network == "198.19.1.0/24" and pub.relay_gateway == "198.19.1.254"
    assert t.relay == topo.RelaySettings(1, "auto") and t.has_relays
    assert not topo.load("examples/two-clusters.toml").has_relays
    rbudp = topo.load("tests/topologies/rbudp-requested.toml").relay
    assert (rbudp.transport, rbudp.rbudp_rate_bps, rbudp.rbudp_payload, rbudp.rbudp_streams) == \
        ("rbudp", 80_000_000, 1472, "requested")
    # relay addresses never collide with node addresses or the router's
    big = topo.loads('[[cluster]]\nname = "a"\nnodes = 200\nrelays = 16\n[[cluster]]\nname = "b"\nrelays = 1\n')
    a = big.clusters[0]
    addresses = [n.address for n in a.nodes] + [r.inside for r in a.relay_nodes] + [a.gateway]
    assert len(set(addresses)) == len(addresses) == 217
