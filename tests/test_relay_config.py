"""What `wanmpi run` hands the relays and the ranks (relays.py), as pure data:
pairing, the relay configurations, pacing, the shim's settings."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from wanmpi import paths, topo
from wanmpi.job import relays

THREE = """
[[cluster]]
name = "a"
relays = 2
relay_nic = "50Mbit"
[[cluster]]
name = "b"
relays = 1
private = true
[[cluster]]
name = "c"
relays = 3
[relay]
connections = 2
[wan]
rate = "300Mbit"
[[wan.link]]
clusters = ["a", "b"]
[[wan.link]]
clusters = ["b", "c"]
rate = "90Mbit"
"""


def names(pairs):
    return [(x.name, y.name) for x, y in pairs]


def test_relay_k_pairs_with_relay_k_modulo_the_far_clusters_relays():
    t = topo.loads(THREE)
    assert names(relays.pairs(t)) == [
        ("a-relay0", "b-relay0"), ("a-relay1", "b-relay0"),
        ("a-relay0", "c-relay0"), ("a-relay1", "c-relay1"), ("a-relay0", "c-relay2"),
        ("b-relay0", "c-relay0"), ("b-relay0", "c-relay1"), ("b-relay0", "c-relay2")]


def test_config_lists_members_peers_and_reachable_networks(tmp_path):
    t = topo.loads(THREE)
    conf = relays.config(t, t.relay_node("b-relay0"), tmp_path / "psk")
    assert conf["name"] == "b-relay0" and conf["cluster"] == "b" and conf["key_file"] == str(tmp_path / "psk")
    assert conf["inside"] == {"listen": ["10.1.0.220:7400"], "bind": "10.1.0.220",
                              "members": ["10.1.0.1/32", "10.1.0.2/32", "10.1.0.3/32", "10.1.0.4/32"]}
    assert conf["outside"] == {"listen": ["198.19.2.1:7401"], "bind": "198.19.2.1"}
    assert conf["metrics"] == {"listen": "127.0.0.1:9464"}
    peers = {p["name"]: p for p in conf["peer"]}
    assert sorted(peers) == ["a-relay0", "a-relay1", "c-relay0", "c-relay1", "c-relay2"]
    assert peers["c-relay1"]["reachable"] == ["198.18.2.0/24"] and peers["a-relay0"]["reachable"] == ["198.18.0.0/24"]
    assert peers["c-relay1"]["addresses"] == ["198.19.3.2:7401"] and all(p["trunks"] == 2 for p in peers.values())


def test_auto_pacing_is_95_percent_of_the_bottleneck_per_pair():
    t = topo.loads(THREE)
    # a-b: 2 pairs on a 300 Mbit/s link, a's relays at 50 Mbit/s: their NIC bounds
    assert relays.pacing_bps(t, t.relay_node("a-relay1"), t.relay_node("b-relay0")) == 47_500_000
    # b-c: 3 pairs share the 90 Mbit/s link
    assert relays.pacing_bps(t, t.relay_node("b-relay0"), t.relay_node("c-relay2")) == 28_500_000
    # a-c goes a-b-c: the 90 Mbit/s link bounds the path, 3 pairs share it
    assert relays.path_rate(t, "a", "c") == 90_000_000
    fixed = topo.loads(THREE.replace("connections = 2", "connections = 2\npacing = \"20Mbit\""))
    assert relays.pacing_bps(fixed, fixed.relay_node("a-relay0"), fixed.relay_node("b-relay0")) == 20_000_000
    unpaced = topo.loads(THREE.replace("connections = 2", "connections = 2\npacing = \"off\""))
    assert relays.pacing_bps(unpaced, unpaced.relay_node("a-relay0"), unpaced.relay_node("b-relay0")) is None
    assert "pacing_rate" not in relays.config(unpaced, unpaced.relay_node("a-relay0"), Path("k"))["peer"][0]


def test_ranks_get_every_clusters_relays_in_index_order():
    t = topo.loads(THREE)
    assert relays.environment(t) == {"WANMPI_RELAYS": "a=198.18.0.220:7400,198.18.0.221:7400;"
                                                      "b=10.1.0.220:7400;"
                                                      "c=198.18.2.220:7400,198.18.2.221:7400,198.18.2.222:7400"}


def test_wanrelay_accepts_every_generated_config(tmp_path):
    """The generated files pass wanrelay's own checks (--check), for every relay."""
    assert paths.WANRELAY.is_file(), "wanrelay is not built: run `make build`"
    t = topo.loads(THREE)
    key = tmp_path / "psk"
    key.write_text("k" * 32)
    key.chmod(0o600)
    for relay in t.relays:
        f = tmp_path / f"{relay.name}.json"
        f.write_text(json.dumps(relays.config(t, relay, key)))
        done = subprocess.run([str(paths.WANRELAY), "--config", str(f), "--check"], capture_output=True, text=True)
        assert done.returncode == 0, (relay.name, done.stdout + done.stderr)


def test_busy_poll_reaches_every_relay_and_passes_wanrelays_check(tmp_path):
    """[relay] busy_poll becomes each relay's busy_poll (absent: none, the
    relay sleeps between events); the configs pass wanrelay --check."""
    key = tmp_path / "psk"
    key.write_text("k" * 32)
    key.chmod(0o600)
    t = topo.loads(THREE.replace("[relay]\nconnections = 2\n", "[relay]\nconnections = 2\nbusy_poll = \"50us\"\n"))
    assert t.relay.busy_poll_us == 50
    for relay in t.relays:
        c = relays.config(t, relay, key)
        assert c["busy_poll"] == "50us"
        f = tmp_path / f"{relay.name}.json"
        f.write_text(json.dumps(c))
        done = subprocess.run([str(paths.WANRELAY), "--config", str(f), "--check"], capture_output=True, text=True)
        assert done.returncode == 0, (relay.name, done.stdout + done.stderr)
    plain = topo.loads(THREE)
    assert "busy_poll" not in relays.config(plain, plain.relays[0], key)


def test_rbudp_relays_get_udp_and_the_blast_settings(tmp_path):
    """`transport = "rbudp"`: every peer blasts at the topology's rate per pair,
    with its payload and stream choice; the configs pass wanrelay --check."""
    t = topo.load("tests/topologies/rbudp-requested.toml")
    key = tmp_path / "psk"
    key.write_text("k" * 32)
    key.chmod(0o600)
    for relay in t.relays:
        c = relays.config(t, relay, key)
        assert c["outside"]["udp_listen"] == relay.outside_endpoint
        (peer,) = c["peer"]
        assert (peer["transport"], peer["rate"], peer["payload"], peer["rbudp_streams"]) == \
            ("rbudp", "80000000bit", 1472, "requested")
        f = tmp_path / f"{relay.name}.json"
        f.write_text(json.dumps(c))
        done = subprocess.run([str(paths.WANRELAY), "--config", str(f), "--check"], capture_output=True, text=True)
        assert done.returncode == 0, (relay.name, done.stdout + done.stderr)
    # a TCP topology gets none of it
    plain = relays.config(topo.loads(THREE), topo.loads(THREE).relays[0], key)
    assert "udp_listen" not in plain["outside"] and all("transport" not in p for p in plain["peer"])


def test_rbudp_rate_beyond_the_wan_path_is_refused(tmp_path):
    # two relay pairs at 60 Mbit/s each cannot fit a 100 Mbit/s WAN: blasts never back off
    t = topo.loads('[[cluster]]\nname = "a"\nrelays = 2\n[[cluster]]\nname = "b"\nrelays = 2\n'
                   '[wan]\nrate = "100Mbit"\n[relay]\ntransport = "rbudp"\nrbudp_rate = "60Mbit"\n')
    try:
        relays.config(t, t.relays[0], tmp_path / "psk")
    except relays.RelayError as e:
        assert "rbudp_rate 60 Mbit/s per relay pair x 2 pair(s)" in str(e) and "lower rbudp_rate" in str(e)
    else:
        raise AssertionError("a 120 Mbit/s blast total on a 100 Mbit/s WAN was accepted")
