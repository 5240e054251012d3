"""Real-cluster mode through the code real sites run: the testbed brought up
with an OpenSSH server in every node (`wanmpi testbed up --ssh`), written as a
topology of real hosts (`wanmpi testbed hosts -o FILE`), and a job launched
over ssh from node a0 as from a login node, with the same arguments and
environment as on the testbed and no namespace shortcut."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import EVERY_MPI, is_ssh_session, program, namespace_processes, wan_counters, wanmpi
from wanmpi import paths, topo
from wanmpi.testbed import net, ssh


@pytest.fixture(scope="module")
def real_sites(two_clusters, tmp_path_factory):
    up = wanmpi("testbed", "up", "--ssh", "-t", two_clusters.source)
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"WANMPI_SSH={ssh.WRAPPER}" in up.stdout
    path = tmp_path_factory.mktemp("sites") / "real.toml"
    done = wanmpi("testbed", "hosts", "-o", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return topo.load(path)


def session_processes() -> list[str]:
    """sshd session processes (one per open ssh connection) in the testbed."""
    return [f"{ns}: {cmd}" for ns, cmd in namespace_processes() if is_ssh_session(cmd)]


def test_the_testbed_as_real_hosts_names_every_node(two_clusters, real_sites):
    assert not real_sites.emulated
    assert [(n.name, n.address) for n in real_sites.nodes] == \
        [(n.name, n.address) for n in two_clusters.nodes]
    assert [c.network for c in real_sites.clusters] == [c.network for c in two_clusters.clusters]


def test_ssh_reaches_every_node_with_its_own_hostname(two_clusters, real_sites):
    for node in two_clusters.nodes:
        done = subprocess.run(net.node_command(two_clusters.node("a0"), [str(ssh.WRAPPER), node.name, "hostname"]),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and done.stdout.strip() == node.name, done.stderr


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_job_on_real_hosts_launches_over_ssh(two_clusters, real_sites, mpi):
    before = wan_counters()[("a-b", "a_to_b")]["tx_bytes"]
    launch_node = two_clusters.node("a0")
    done = subprocess.run(net.node_command(launch_node, [
        "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "--mpi", mpi,
        "-t", real_sites.source, "-n", "4", "--map", "a0,a1,b0,b1", program(mpi, "where"), "--bytes", "100000"]),
        capture_output=True, text=True, timeout=180, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")]
    assert hosts == ["a0", "a1", "b0", "b1"]
    assert "allreduce ok" in done.stdout
    assert wan_counters()[("a-b", "a_to_b")]["tx_bytes"] - before >= 4 * 100_000
    assert session_processes() == []


def test_hosts_that_cannot_run_the_job_are_named_before_it_starts(two_clusters, real_sites, tmp_path):
    """A hostfile naming a host that does not resolve and one where ssh is
    refused (the router: no sshd): `wanmpi run` asks every host first and
    names both, with ssh's own reason, before any rank starts; the good
    host is not blamed."""
    gateway = two_clusters.cluster("b").gateway
    (tmp_path / "b.hosts").write_text(f"b0 slots=1\nnosuchnode slots=1\n{gateway}\n")
    first, second = real_sites.text.split('name = "b"', 1)
    second = re.sub(r"hosts = \[\n(    \{.*\},\n)+\]", 'hostfile = "b.hosts"', second, count=1)
    path = tmp_path / "hostfile.toml"
    path.write_text(first + 'name = "b"' + second)
    done = subprocess.run(net.node_command(two_clusters.node("a0"), [
        "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "-t", str(path),
        "-n", "4", "--map", f"a0,b0,nosuchnode,{gateway}", program("openmpi", "where")]),
        capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert done.returncode != 0
    assert "the job cannot start" in done.stderr, done.stderr
    assert "host nosuchnode: does not answer" in done.stderr and "Could not resolve hostname" in done.stderr
    assert f"host {gateway}: does not answer" in done.stderr and "Connection refused" in done.stderr
    assert "host b0" not in done.stderr and "host a0" not in done.stderr
    assert "rank " not in done.stdout
    assert session_processes() == []


def test_a_private_cluster_is_not_written_as_real_hosts(private_cluster, tmp_path):
    done = wanmpi("testbed", "hosts", "-o", str(tmp_path / "x.toml"))
    assert done.returncode != 0
    assert "cluster 'priv' is private" in done.stderr
    assert not (tmp_path / "x.toml").exists()

