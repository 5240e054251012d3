"""Real-cluster mode: a topology that lists hosts is launched over ssh, with the
same arguments and environment as on the testbed. To test it for real, each
testbed node runs an ssh server (dropbear) with its own hostname, and wanmpi
runs from node a0 as it would on a login node."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import MPIS, program, wan_counters
from wanmpi import paths
from wanmpi.testbed import net

HOSTS = {"a": ["a0", "a1"], "b": ["b0", "b1"]}


@pytest.fixture(scope="module")
def ssh_nodes(two_clusters, tmp_path_factory):
    d = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id")], check=True)
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(d / "hostkey")], check=True,
                   capture_output=True)
    wrapper = d / "ssh"
    wrapper.write_text(f"#!/bin/sh\nexec ssh -i {d / 'id'} -o StrictHostKeyChecking=no "
                       "-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR \"$@\"\n")
    wrapper.chmod(0o755)
    servers = []
    for name in HOSTS["a"] + HOSTS["b"]:
        node = two_clusters.node(name)
        # a private /root holding only the test key: the host's own files stay untouched
        script = ('mount -t tmpfs -o mode=700 tmpfs /root && mkdir -m 700 /root/.ssh && cp "$0" /root/.ssh/authorized_keys'
                  ' && exec dropbear -F -E -s -j -k -r "$1" -p "$2:22"')
        servers.append(subprocess.Popen(net.node_command(node, [
            "sh", "-c", script, str(d / "id.pub"), str(d / "hostkey"), node.address]),
            stderr=subprocess.DEVNULL))
    topology = d / "real.toml"
    topology.write_text("".join(
        f'[[cluster]]\nname = "{c}"\nhosts = {hosts!r}\nnetwork = "{two_clusters.cluster(c).network}"\n'
        for c, hosts in HOSTS.items()).replace("'", '"'))
    time.sleep(0.5)
    yield topology, wrapper
    for s in servers:
        s.terminate()
        s.wait(timeout=10)


@pytest.mark.parametrize("mpi", MPIS)
def test_job_on_real_hosts_launches_over_ssh(two_clusters, ssh_nodes, mpi):
    topology, wrapper = ssh_nodes
    before = wan_counters()[("a-b", "a_to_b")]["tx_bytes"]
    launch_node = two_clusters.node("a0")
    done = subprocess.run(net.node_command(launch_node, [
        "env", f"WANMPI_SSH={wrapper}", sys.executable, "-m", "wanmpi", "run", "--mpi", mpi,
        "-t", str(topology), "-n", "4", program(mpi, "where"), "--bytes", "100000"]),
        capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")]
    assert hosts == ["a0", "a1", "b0", "b1"]
    assert "allreduce ok" in done.stdout
    assert wan_counters()[("a-b", "a_to_b")]["tx_bytes"] - before >= 4 * 100_000
