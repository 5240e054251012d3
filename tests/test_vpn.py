"""The WireGuard tunnel `wanmpi bench vpn` measures the relays against
(testbed/vpn.py): between the routers of examples/relays.toml's public and
private clusters, it carries a plain MPI job launched over ssh with the
hosts file of sites joined by a VPN, and leaves nothing behind: not after
the block, not after an error in it, and `wanmpi clean` removes what a
killed run left. Bad input is refused before anything is touched."""
from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from conftest import bring_up, program, wanmpi
from wanmpi import paths, shell
from wanmpi.testbed import net, real_sites, ssh, vpn


@pytest.fixture(scope="module")
def sites():
    t = bring_up("examples/relays.toml")
    up = wanmpi("testbed", "up", "--ssh", "-t", t.source)
    assert up.returncode == 0, up.stdout + up.stderr
    yield t
    net.teardown(net.State.load())


def tunnel_traces(t) -> list[str]:
    """Whatever of a tunnel is still there: daemons, devices, rules, routes, files."""
    found = [f"wireguard-go pid {p}" for p in vpn.daemon_pids()]
    for c in [c for c in t.clusters if c.router_netns in net.existing_namespaces()]:
        found += [f"{c.router_netns}: {line}" for line in
                  shell.output(["ip", "-n", c.router_netns, "-o", "link", "show"]).splitlines()
                  if vpn.DEVICE_PREFIX in line]
        found += [f"{c.router_netns}: rule {line}" for line in
                  shell.output(["ip", "-n", c.router_netns, "rule", "show"]).splitlines()
                  if f"lookup {vpn.ROUTE_TABLE}" in line]
        found += [f"{c.router_netns}: route {line}" for line in
                  shell.output(["ip", "-n", c.router_netns, "route", "show", "table", "all"]).splitlines()
                  if vpn.DEVICE_PREFIX in line]
    found += [str(p) for p in vpn.UAPI_DIR.glob(f"{vpn.DEVICE_PREFIX}*")] if vpn.UAPI_DIR.exists() else []
    found += [str(vpn.VPN_DIR)] if vpn.VPN_DIR.exists() else []
    return found


def test_plain_mpi_crosses_the_tunnel_and_nothing_is_left(sites, tmp_path):
    t = sites
    hosts = tmp_path / "vpn.toml"
    hosts.write_text(real_sites.topology_text(t, vpn=True))
    namespaces = sorted(net.existing_namespaces())
    with vpn.Tunnel(t) as tunnel:
        for key in vpn.VPN_DIR.glob("*.key"):
            assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        before = tunnel.transfer()
        done = subprocess.run(net.node_command(t.node("pub0"), [
            "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "-t", str(hosts),
            "-n", "2", "--map", "pub0,priv0", "--no-wanmpi", "--no-host-check", "--timeout", "120",
            program("openmpi", "where"), "--bytes", "100000"]),
            capture_output=True, text=True, timeout=200, cwd=paths.REPO)
        after = tunnel.transfer()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["rank 0 of 2 on pub0", "rank 1 of 2 on priv0", "allreduce ok"]
    # the job's bytes went through the tunnel: 100000 each way at least
    assert after["received"] - before["received"] > 100_000 and after["sent"] - before["sent"] > 100_000
    assert tunnel_traces(t) == []
    assert sorted(net.existing_namespaces()) == namespaces


def test_an_error_inside_the_block_and_a_killed_run_leave_nothing(sites):
    t = sites
    with pytest.raises(RuntimeError, match="inside"):
        with vpn.Tunnel(t):
            assert len(vpn.daemon_pids()) == 2
            raise RuntimeError("inside")
    assert tunnel_traces(t) == []
    killed = vpn.Tunnel(t)
    killed.up()                                   # never taken down, as if its run was killed
    assert len(vpn.daemon_pids()) == 2
    done = wanmpi("clean")
    assert done.returncode == 0, done.stderr
    for p in killed.processes.values():
        assert p.wait(5) is not None              # stopped by `clean` (reaped here, its parent)
    assert "tunnel keys" in done.stdout, done.stdout
    assert tunnel_traces(t) == [] and net.existing_namespaces() == []


def test_bench_vpn_refuses_a_topology_without_a_private_cluster_and_missing_wireguard():
    done = wanmpi("bench", "vpn", "-t", "examples/two-clusters.toml", "--reps", "1")
    assert done.returncode == 2
    assert ("examples/two-clusters.toml: no private cluster (`private = true`): the WireGuard tunnel joins "
            "one private cluster to one public one (clusters: a (public), b (public))") in done.stderr
    done = wanmpi("bench", "vpn", "-t", "examples/relays.toml", "--reps", "1", env={"PATH": "/nonexistent"})
    assert done.returncode == 2
    assert "wireguard-go and wg not found on PATH" in done.stderr and "apt-get install wireguard-go" in done.stderr
