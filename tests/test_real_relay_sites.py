"""Relays started over ssh on other topologies than test_real_relays.py's
(which keeps one testbed for its module): two public clusters, two private
ones launched from inside one, three sites of which two are private; both
MPIs, nothing left on any host."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import MPIS, bring_up, left_behind, program, wanmpi
from wanmpi import paths
from wanmpi.testbed import net, ssh


@pytest.mark.parametrize("mpi", MPIS)
def test_public_clusters_with_relays_launch_over_ssh(tmp_path, mpi):
    """The launcher's ssh to a public node goes direct, not through the relays
    (a relay's delivery preamble means nothing to sshd); the job's own
    connections go through them."""
    t = bring_up("tests/topologies/public-relays.toml")
    assert wanmpi("testbed", "up", "--ssh", "-t", t.source).returncode == 0
    path = tmp_path / "public.toml"
    assert wanmpi("testbed", "hosts", "-o", str(path)).returncode == 0
    done = subprocess.run(net.node_command(t.node("a0"), [
        "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "--mpi", mpi, "-t", str(path),
        "-n", "2", "--map", "a0,b0", "--timeout", "120", program(mpi, "where")]),
        capture_output=True, text=True, timeout=200, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")] == ["a0", "b0"]
    assert "trunk up" in (paths.STATE_DIR / "relay-logs" / "a-relay0.log").read_text()
    assert left_behind(t) == []


@pytest.mark.parametrize("topology, launch_node, ranks", [
    ("tests/topologies/two-private.toml", "x0", ["x0", "x1", "y0", "y1"]),
    ("tests/topologies/three-relayed.toml", "a0", ["a0", "b0", "b1", "c0", "c1"]),
])
@pytest.mark.parametrize("mpi", MPIS)
def test_private_and_three_sites_through_relays_over_ssh(tmp_path, topology, launch_node, ranks, mpi):
    """Two private clusters (launched from inside one: the other is reached by
    ProxyJump through its relay host), and three sites, two of them private,
    with every pair of relays trunked."""
    t = bring_up(topology)
    assert wanmpi("testbed", "up", "--ssh", "-t", t.source).returncode == 0
    path = tmp_path / "sites.toml"
    assert wanmpi("testbed", "hosts", "-o", str(path)).returncode == 0
    done = subprocess.run(net.node_command(t.node(launch_node), [
        "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "--mpi", mpi, "-t", str(path),
        "-n", str(len(ranks)), "--map", ",".join(ranks), "--timeout", "120", program(mpi, "where"),
        "--bytes", "100000"]), capture_output=True, text=True, timeout=200, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")] == ranks
    assert "allreduce ok" in done.stdout
    for r in t.relays:
        assert "trunk up" in (paths.STATE_DIR / "relay-logs" / f"{r.name}.log").read_text(), r.name
    assert left_behind(t) == []
