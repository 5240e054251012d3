"""Relays on the testbed: relay nodes, `wanmpi run` through wanrelay with both
MPIs, private clusters, security checks and a relay killed under a job.

Topologies: examples/relays.toml (a public and a private cluster, two relay
pairs), tests/topologies/two-private.toml (two private clusters, one relay
pair with two TCP trunks), tests/topologies/public-relays.toml (public
clusters with one relay each: direct and relayed jobs on one testbed)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import EVERY_MPI, MPIS, REPO, WANMPI, bring_up, exact_reductions, installed, program, wanmpi
from wanmpi import paths, topo
from wanmpi.job import libwanmpi, relays
from wanmpi.testbed import net

STREAMS = REPO / "tests" / "programs" / "streams.py"
HUNDRED_MB = str(100 * 1000 * 1000)


def run(mpi: str, t: topo.Topology, prog: str, *args: str, ranks: int = 8, map: str | None = None,
        extra: tuple = (), timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = ["run", "--mpi", mpi, "-t", t.source, "-n", str(ranks), "--timeout", str(timeout - 30), *extra]
    if map:
        cmd += ["--map", map]
    cmd += exact_reductions(mpi)
    return wanmpi(*cmd, program(mpi, prog), *args, timeout=timeout)


def relay_processes(t: topo.Topology) -> list[int]:
    return [p for r in t.relays for p in net.namespace_pids(r.netns)]


def relays_used(stderr: str) -> set[str]:
    """The relays the shim's debug log says connects went through ('relay 0 (IP:PORT)')."""
    return set(re.findall(r"relayed through relay \d+ \(([\d.]+:\d+)\)", stderr))


def shimmed(node: topo.Node, t: topo.Topology, argv: list[str], **kwargs) -> subprocess.Popen:
    """argv on a node under libwanshim, with a job's relay settings (relays started by the caller)."""
    env = {**os.environ, "LD_PRELOAD": str(libwanmpi.shim_library()),
           "WANMPI_CLUSTER_MAP": libwanmpi.cluster_map(t), **relays.environment(t)}
    return subprocess.Popen(net.node_command(node, argv), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


# ---- a public and a private cluster, two relay pairs -----------------------------------
@pytest.fixture(scope="module")
def pub_priv():
    t = bring_up("examples/relays.toml")
    yield t
    net.teardown(net.State.load())


def test_relay_nodes_are_built_and_only_relays_reach_the_private_cluster(pub_priv):
    pub, priv = pub_priv.clusters
    assert [r.name for r in pub_priv.relays] == ["pub-relay0", "pub-relay1", "priv-relay0", "priv-relay1"]
    for r in pub_priv.relays:
        assert r.netns in net.existing_namespaces()
        # its own cluster's nodes on the inside
        node = pub_priv.cluster(r.cluster).nodes[0]
        ping = subprocess.run(net.in_netns(r.netns, ["ping", "-c1", "-W2", node.address]), capture_output=True)
        assert ping.returncode == 0, ping.stdout
    # relay to relay across the WAN, also into the private cluster's relay network
    ping = subprocess.run(net.in_netns("wm-pub-relay0", ["ping", "-c1", "-W2", "198.19.2.1"]), capture_output=True)
    assert ping.returncode == 0
    # but a private node stays unreachable from the public cluster's relays and nodes
    for ns in ("wm-pub-relay0", "wm-pub0"):
        ping = subprocess.run(net.in_netns(ns, ["ping", "-c1", "-W1", priv.nodes[0].address]), capture_output=True)
        assert ping.returncode != 0


# Open MPI 5's PRRTE cannot join private and public addresses (launchers.OpenMPI5.cannot_start)
MIXED_ADDRESSES = [p for p in EVERY_MPI if p.values[0] != "openmpi5"]


@pytest.mark.parametrize("mpi", MIXED_ADDRESSES)
def test_job_across_a_private_cluster_is_exact_through_two_relay_pairs(pub_priv, mpi):
    done = run(mpi, pub_priv, "collcheck", "--seed", "7", "--cases", "60", "--max-bytes", "2000000",
               extra=("-x", "WANMPI_SHIM_DEBUG=1"))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "collcheck: 60 cases ok" in done.stdout
    # both pairs carried connections: the shim picks the relay by destination host
    assert relays_used(done.stderr) == {r.inside_endpoint for r in pub_priv.relays}
    assert relay_processes(pub_priv) == []


@pytest.mark.parametrize("mpi", [installed("openmpi5")])
def test_open_mpi_5_across_private_and_public_addresses_is_refused_before_it_starts(pub_priv, mpi):
    """PRRTE's daemons would wait for a connection they never try: the job
    is refused at once with the reason and what to use instead."""
    done = run(mpi, pub_priv, "where", ranks=2, map="pub0,priv0")
    assert done.returncode == 2
    assert ("openmpi5: Open MPI 5's launcher (PRRTE) does not connect its daemons across private and public "
            "addresses (here priv0 private, the other nodes public)") in done.stderr, done.stderr
    assert relay_processes(pub_priv) == []


@pytest.mark.parametrize("mpi", MPIS)
def test_100_mb_messages_cross_intact(pub_priv, mpi):
    direct = run(mpi, pub_priv, "ring", "--bytes", HUNDRED_MB, ranks=2, map="pub1,priv2")
    assert direct.returncode == 0, direct.stdout + direct.stderr[-3000:]
    assert "token 1 (expected 1)" in direct.stdout
    # the checksums of the pattern each rank received (ring exits 3 on a wrong byte)
    assert re.search(r"rank 0 of 2: from 1 checksum [0-9a-f]{16}", direct.stdout)


def test_many_concurrent_connections_through_the_relays(pub_priv):
    count, size = 200, 100_000
    pub0, priv0 = pub_priv.cluster("pub").nodes[0], pub_priv.cluster("priv").nodes[0]
    with relays.RelaySet(pub_priv, "test-streams") as relay_set:
        relay_set.start()
        server = shimmed(priv0, pub_priv, [sys.executable, str(STREAMS), "serve", priv0.address, "0", str(count)])
        try:
            port = server.stdout.readline().split()[1]
            client = shimmed(pub0, pub_priv, [sys.executable, str(STREAMS), "connect", pub0.address,
                                              priv0.address, port, str(count), str(size)])
            out, err = client.communicate(timeout=240)
            assert client.returncode == 0 and f"ok {count}" in out, out + err
            served, err = server.communicate(timeout=60)
        finally:
            server.kill()
    assert f"served {count}" in served, served + err
    # accept() and getpeername() report the client node, not a relay
    peers = [line.split()[1] for line in served.splitlines() if line.startswith("peer ")]
    assert len(peers) == count and {p.split(":")[0] for p in peers} == {pub0.address}


def test_connect_to_a_non_member_is_refused(pub_priv):
    """A relay connects only to nodes of its own cluster: a stream to another address of
    that cluster's network (a relay, the router) is refused, and the application sees
    ECONNREFUSED."""
    pub0 = pub_priv.cluster("pub").nodes[0]
    priv = pub_priv.cluster("priv")
    probe = ("import socket,sys\n"
             "for ip in sys.argv[1:]:\n"
             "    s = socket.socket()\n"
             "    try:\n"
             "        s.connect((ip, 7400)); print(ip, 'connected')\n"
             "    except OSError as e:\n"
             "        print(ip, e.__class__.__name__)\n")
    with relays.RelaySet(pub_priv, "test-nonmember") as relay_set:
        relay_set.start()
        proc = shimmed(pub0, pub_priv, [sys.executable, "-c", probe, priv.relay_nodes[0].inside, priv.gateway])
        out, err = proc.communicate(timeout=60)
        refused = relays.metrics(priv.relay_nodes[0]) + relays.metrics(priv.relay_nodes[1])
    assert out.splitlines() == [f"{priv.relay_nodes[0].inside} ConnectionRefusedError",
                                f"{priv.gateway} ConnectionRefusedError"], out + err
    assert re.search(r'wanrelay_streams_refused_total\{[^}]*reason="not_member"[^}]*\} [1-9]', refused), refused


# ---- two private clusters, one relay pair with two TCP trunks ----------------------------
@pytest.fixture(scope="module")
def two_private():
    t = bring_up("tests/topologies/two-private.toml")
    yield t
    net.teardown(net.State.load())


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_job_across_two_private_clusters_over_two_trunks(two_private, mpi):
    done = run(mpi, two_private, "collcheck", "--seed", "8", "--cases", "40", "--max-bytes", "2000000")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "collcheck: 40 cases ok" in done.stdout
    big = run(mpi, two_private, "ring", "--bytes", HUNDRED_MB, ranks=2, map="x0,y3")
    assert big.returncode == 0 and "token 1 (expected 1)" in big.stdout, big.stdout + big.stderr[-3000:]
    logs = "".join(p.read_text() for p in relays.LAST_LOGS.glob("*.log"))
    # both TCP trunks of the pair came up, on each side
    assert logs.count("trunk up: peer relay authenticated") >= 4, logs[-2000:]


# ---- public clusters with relays: direct vs relayed, hostile peers, a relay killed --------
@pytest.fixture(scope="module")
def public():
    t = bring_up("tests/topologies/public-relays.toml")
    yield t
    net.teardown(net.State.load())


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_relayed_and_direct_jobs_give_the_same_output(public, mpi):
    direct = run(mpi, public, "ring", "--bytes", "3000000", extra=("--no-relays",))
    relayed = run(mpi, public, "ring", "--bytes", "3000000")
    assert direct.returncode == 0 and relayed.returncode == 0, direct.stderr[-2000:] + relayed.stderr[-2000:]
    assert direct.stdout == relayed.stdout


def test_relay_with_the_wrong_key_is_refused_and_logged(public, tmp_path):
    a, b = public.clusters
    with relays.RelaySet(public, "test-auth") as relay_set:
        relay_set.start()
        # an impostor on a node of cluster a claims to be a's relay, with another key
        rogue = relays.config(public, a.relay_nodes[0], tmp_path / "psk")
        rogue["outside"] = {"listen": [f"{a.nodes[1].address}:7401"], "bind": a.nodes[1].address}
        rogue["inside"] = {"listen": [f"{a.nodes[1].address}:7400"], "members": [f"{a.nodes[2].address}/32"]}
        rogue.pop("metrics")
        (tmp_path / "psk").write_text("not the job's key, 32 bytes long")
        os.chmod(tmp_path / "psk", 0o600)
        (tmp_path / "rogue.json").write_text(json.dumps(rogue))
        proc = subprocess.Popen(net.in_netns(a.nodes[1].netns, [str(paths.WANRELAY), "--config",
                                                                str(tmp_path / "rogue.json")]),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 20
            text = ""
            while time.monotonic() < deadline:
                text = relays.metrics(b.relay_nodes[0])
                if re.search(r'wanrelay_trunk_refused_total\{reason="auth"\} [1-9]', text):
                    break
                time.sleep(0.3)
        finally:
            proc.kill()
            rogue_log = proc.communicate()[0]
        # the real trunk is still up
        assert (a.relay_nodes[0].name, 0) in relays.trunks_up(b.relay_nodes[0])
        log = next(r for r in relay_set.running if r.relay == b.relay_nodes[0]).log.read_text()
    assert re.search(r'wanrelay_trunk_refused_total\{reason="auth"\} [1-9]', text), text + rogue_log
    assert "WARN" in log and a.nodes[1].address in log, log[-2000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_killing_a_relay_ends_the_job_with_an_error(public, mpi):
    """A job whose relay dies ends within 30 s with a non-zero status that names the relay."""
    cmd = [*WANMPI, "run", "--mpi", mpi, "-t", public.source, "-n", "4", "--map", "a0,a1,b0,b1",
           program(mpi, "patterns"), "lu", "--iters", "100000"]
    job = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not net.namespace_pids(public.nodes[5].netns):
            time.sleep(0.2)
        time.sleep(3)                                           # the ranks talk through the relays
        assert job.poll() is None, job.communicate()[1][-2000:]
        victims = net.namespace_pids(public.cluster("b").relay_nodes[0].netns)
        assert victims
        killed = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out, err = job.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        job.kill()
    assert job.returncode not in (0, None) and took < 30, (job.returncode, took, err[-2000:])
    assert "relay b-relay0 exited" in err, err[-2000:]
    assert relay_processes(public) == []
    for node in public.nodes:
        assert net.namespace_pids(node.netns) == []



# ---- wanmpi bench relay ----------------------------------------------------------------------
def test_bench_relay_measures_relayed_beside_direct(tmp_path):
    out = tmp_path / "relay.json"
    done = wanmpi("bench", "relay", "--parts", "latency,path", "--mpis", "openmpi", "--delays", "0",
                  "--json", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["format"] == "wanmpi-bench/1" and doc["bench"] == "relay"
    assert doc["counts"] == {"cases": 6, "ok": 6, "failed": 0}
    [row] = doc["summary"][0]["latency"]
    assert row["relayed_us"] > row["direct_us"] > 0 and 0 < row["bandwidth_ratio"] < 2
    assert "added per relay" in done.stdout
    # the path part: a relayed round trip crosses two relay processes each way
    [path] = doc["summary"][0]["path"]
    assert path["relayed_rtt_us"] > path["direct_rtt_us"] > 0 and path["loopback_rtt_us"] > 0
    assert path["per_relay_us"] == round((path["relayed_rtt_us"] - path["direct_rtt_us"]) / 4, 1)
    assert "where a relay's latency goes" in done.stdout
    assert net.State.load() is None or net.State.load().topology_text != ""   # the runner put the machine back


@pytest.mark.parametrize("args, message", [
    (["--parts", "latency,speed"], "--parts: unknown part 'speed'"),
    (["--mpis", "lam"], "--mpis: unknown MPI 'lam'"),
    (["--relay-nic", "fast"], "--relay-nic: cannot read 'fast' as a rate"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--flow-bytes", "lots"], "--flow-bytes: "),
    (["--flow-bytes", "0B"], "--flow-bytes must be between 1 byte and 1 TiB"),
])
def test_bench_relay_bad_arguments_are_named(args, message):
    done = wanmpi("bench", "relay", *args, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
