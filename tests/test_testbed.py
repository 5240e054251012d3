"""Testbed lifecycle: up, up again, down, a failed up, a crashed emulator, clean;
and what the network lets through (NAT for private clusters)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import bring_up, wanmpi
from wanmpi import paths
from wanmpi.testbed import emulator, net


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_up_down_leaves_no_namespace_interface_or_process():
    net.teardown(net.State.load())
    links_before = root_links()
    up = wanmpi("testbed", "up", "--topology", "examples/two-clusters.toml")
    assert up.returncode == 0, up.stderr
    state = net.State.load()
    assert len(state.namespaces) == 12         # 2 x (switch, router, 4 nodes)
    assert set(state.namespaces) <= set(net.existing_namespaces())
    assert emulator.pids() == [state.wanem_pid]
    status = wanmpi("testbed", "status")
    assert status.returncode == 0 and "testbed: up" in status.stdout, status.stdout
    down = wanmpi("testbed", "down")
    assert down.returncode == 0, down.stderr
    assert net.existing_namespaces() == []
    assert emulator.pids() == []
    assert root_links() == links_before
    assert not paths.STATE_FILE.exists()
    assert wanmpi("testbed", "status").returncode == 1


def test_up_twice_is_harmless():
    first = wanmpi("testbed", "up", "--topology", "examples/two-clusters.toml")
    assert first.returncode == 0, first.stderr
    pid = net.State.load().wanem_pid
    again = wanmpi("testbed", "up", "--topology", "examples/two-clusters.toml")
    assert again.returncode == 0 and "already up" in again.stdout
    assert net.State.load().wanem_pid == pid and emulator.pids() == [pid]
    other = wanmpi("testbed", "up", "--topology", "examples/three-clusters.toml")
    assert other.returncode == 2 and "run `wanmpi testbed down` first" in other.stderr
    assert wanmpi("testbed", "down").returncode == 0


def test_failed_up_leaves_nothing_behind(tmp_path):
    broken = tmp_path / "wanem"
    broken.write_text("#!/bin/sh\necho 'cannot attach' >&2\nexit 1\n")
    broken.chmod(0o755)
    up = wanmpi("testbed", "up", env={"WANMPI_WANEM": str(broken)})
    assert up.returncode == 2
    assert "testbed up failed and was undone" in up.stderr
    assert "emulator exited at start" in up.stderr and "cannot attach" in up.stderr
    assert net.existing_namespaces() == []
    assert not paths.STATE_FILE.exists()


def test_crashed_emulator_is_reported_and_clean_removes_everything():
    bring_up("examples/two-clusters.toml")
    os.kill(net.State.load().wanem_pid, signal.SIGKILL)
    time.sleep(0.2)
    status = wanmpi("testbed", "status")
    assert status.returncode == 1
    assert "UNHEALTHY" in status.stdout and "emulator is not running" in status.stdout
    # a rank-like process left in a node namespace must go too
    stray = subprocess.Popen(net.in_netns("wm-a1", ["sleep", "600"]))
    clean = wanmpi("clean")
    assert clean.returncode == 0 and "namespace wm-a1" in clean.stdout
    assert stray.wait(timeout=10) != 0
    assert net.existing_namespaces() == []
    assert wanmpi("clean").stdout.strip() == "nothing to clean"


def test_clean_removes_the_files_of_killed_jobs_only():
    """`wanmpi run` on real hosts keeps a remote-shell wrapper and a hostfile
    in /tmp for the job; a run killed with SIGKILL leaves them. `wanmpi clean`
    removes those of jobs with no process left, and keeps a running job's."""
    dead, alive = "0badc0ffee00", "0badc0ffee01"
    files = {j: [Path(f"/tmp/wanmpi-agent-{j}"), Path(f"/tmp/wanmpi-agent-{j}.env"),
                 Path(f"/tmp/wanmpi-hosts-{j}")] for j in (dead, alive)}
    for f in files[dead] + files[alive]:
        f.write_text("x")
    running = subprocess.Popen(["sleep", "600"], env={**os.environ, "WANMPI_JOB_ID": alive})
    try:
        clean = wanmpi("clean")
        assert clean.returncode == 0, clean.stderr
        assert [f for f in files[dead] if f.exists()] == []
        assert all(f"file {f} of a job that no longer runs" in clean.stdout for f in files[dead])
        assert all(f.exists() for f in files[alive])
    finally:
        running.kill()
        running.wait()
        for f in files[dead] + files[alive]:
            f.unlink(missing_ok=True)


def test_clean_removes_mpich_topology_files_while_no_launcher_runs(tmp_path):
    """MPICH's mpiexec.hydra leaves /tmp/hydra_hwloc_xmlfile_* when a job ends
    abnormally; `wanmpi clean` removes them, but not while a launcher (here a
    process named hydra_pmi_proxy) runs, whose file it might be."""
    leftover = Path("/tmp/hydra_hwloc_xmlfile_wmtest")
    leftover.write_text("<topology/>")
    proxy = tmp_path / "hydra_pmi_proxy"
    proxy.write_bytes(Path("/bin/sleep").read_bytes())
    proxy.chmod(0o755)
    running = subprocess.Popen([str(proxy), "600"])
    try:
        time.sleep(0.2)
        clean = wanmpi("clean")
        assert clean.returncode == 0, clean.stderr
        assert leftover.exists(), "removed while a launcher runs"
        running.kill()
        running.wait()
        clean = wanmpi("clean")
        assert clean.returncode == 0, clean.stderr
        assert not leftover.exists()
        assert f"file {leftover} of a job that no longer runs" in clean.stdout
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
        leftover.unlink(missing_ok=True)


def can_connect(src_ns: str, address: str, port: int = 7000, timeout: float = 2.0) -> bool:
    code = ("import socket,sys\n"
            f"s=socket.socket(); s.settimeout({timeout})\n"
            f"try: s.connect(({address!r},{port})); print(s.recv(64).decode())\n"
            "except OSError as e: print('FAIL', e); sys.exit(1)\n")
    done = subprocess.run(net.in_netns(src_ns, ["python3", "-c", code]), capture_output=True, text=True,
                          timeout=timeout + 10)
    return done.returncode == 0


def peer_seen_by_server(server_ns: str, port: int = 7000):
    """A one-shot TCP server in server_ns that sends the client's address back."""
    code = ("import socket\n"
            f"l=socket.create_server(('0.0.0.0',{port})); l.settimeout(15)\n"
            "c,a=l.accept(); c.sendall(a[0].encode()); c.close()\n")
    return subprocess.Popen(net.in_netns(server_ns, ["python3", "-c", code]))


def test_private_cluster_reaches_out_but_cannot_be_reached(private_cluster):
    pub, priv = private_cluster.clusters
    # out: ping and TCP from the private node to a public node, through NAT
    assert subprocess.run(net.in_netns(priv.nodes[0].netns, ["ping", "-c", "1", "-W", "3",
                          pub.nodes[0].address]), capture_output=True).returncode == 0
    server = peer_seen_by_server(pub.nodes[0].netns)
    try:
        time.sleep(0.3)
        code = (f"import socket; s=socket.create_connection(({pub.nodes[0].address!r},7000),timeout=5);"
                "print(s.recv(64).decode())")
        seen = subprocess.run(net.in_netns(priv.nodes[0].netns, ["python3", "-c", code]),
                              capture_output=True, text=True, timeout=20)
        assert seen.stdout.strip() == priv.public_address       # the NAT address, not 10.1.0.1
    finally:
        server.kill()
        server.wait()
    # in: nothing from the public cluster gets to a private node...
    server = peer_seen_by_server(priv.nodes[0].netns)
    try:
        time.sleep(0.3)
        assert subprocess.run(net.in_netns(pub.nodes[0].netns, ["ping", "-c", "1", "-W", "2",
                              priv.nodes[0].address]), capture_output=True).returncode != 0
        assert not can_connect(pub.nodes[0].netns, priv.nodes[0].address)
        # ...not even when the public router is told a route to the private network
        net.ip(pub.router_netns, "route", "add", priv.network, "dev", f"wan-{priv.name}")
        assert not can_connect(pub.nodes[0].netns, priv.nodes[0].address)
        assert not can_connect(pub.nodes[0].netns, priv.public_address)
    finally:
        server.kill()
        server.wait()
