"""Relays on real hosts, through the code real sites run: the testbed of a
public and a private cluster (examples/relays.toml) brought up with OpenSSH in
every node and relay, written as real sites (`testbed hosts`), and jobs
launched over ssh from pub0. `wanmpi run` starts wanrelay on the relay hosts
over ssh with a fresh key on stdin, waits for the trunks, and stops every
relay afterwards: after success, failure, or a launcher killed mid-job,
nothing is left on any host."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import MPI_NAMES, MPIS, bring_up, left_behind, program, wanmpi
from wanmpi import paths, topo
from wanmpi.job import standing_relays
from wanmpi.testbed import net, ssh


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    t = bring_up("examples/relays.toml")
    up = wanmpi("testbed", "up", "--ssh", "-t", t.source)
    assert up.returncode == 0, up.stdout + up.stderr
    path = tmp_path_factory.mktemp("sites") / "relays.toml"
    done = wanmpi("testbed", "hosts", "-o", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    yield t, topo.load(path)
    net.teardown(net.State.load())


def from_pub0(t, argv: list[str], **kwargs) -> list[str]:
    return net.node_command(t.node("pub0"), ["env", f"WANMPI_SSH={ssh.WRAPPER}", *argv])


@pytest.mark.parametrize("mpi", MPIS)
def test_a_private_cluster_is_reached_through_relays_started_over_ssh(sites, mpi):
    t, real = sites
    done = subprocess.run(from_pub0(t, [
        sys.executable, "-m", "wanmpi", "run", "--mpi", mpi, "-t", real.source, "-n", "4",
        "--map", "pub0,pub1,priv0,priv1", "--timeout", "120", program(mpi, "where"), "--bytes", "100000"]),
        capture_output=True, text=True, timeout=200, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")]
    assert hosts == ["pub0", "pub1", "priv0", "priv1"]
    assert "allreduce ok" in done.stdout
    # every relay ran on its host and carried the job; none is left
    for r in real.relays:
        log = (paths.STATE_DIR / "relay-logs" / f"{r.name}.log").read_text()
        assert "trunk up: peer relay authenticated" in log, log
    assert left_behind(t) == []


def test_a_launcher_killed_mid_job_leaves_no_relay_on_any_host(sites):
    t, real = sites
    proc = subprocess.Popen(from_pub0(t, [
        sys.executable, "-m", "wanmpi", "run", "--mpi", "openmpi", "-t", real.source, "-n", "2",
        "--map", "pub0,priv0", "/bin/sleep", "600"]), cwd=paths.REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(x.endswith("sleep 600 ") and "wanmpi" not in x for x in left_behind(t)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    assert any("wanrelay" in x for x in left_behind(t))
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    deadline = time.monotonic() + 20
    while left_behind(t) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left_behind(t) == []


def test_a_relay_host_that_does_not_answer_is_named(sites, tmp_path):
    t, real = sites
    broken = tmp_path / "broken.toml"
    broken.write_text(real.text.replace('host = "priv-relay1"', 'host = "198.19.2.99"'))
    done = subprocess.run(from_pub0(t, [
        sys.executable, "-m", "wanmpi", "run", "--mpi", "openmpi", "-t", str(broken), "-n", "2",
        "--map", "pub0,priv0", "/bin/true"]), capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert done.returncode != 0
    assert "198.19.2.99" in done.stderr, done.stderr
    assert left_behind(t) == []


def test_a_relay_port_in_use_is_named_and_nothing_is_left(sites):
    """Something else listens on a relay host's inside port: wanrelay cannot
    bind, and the job fails at once naming the relay and the address."""
    t, real = sites
    relay = t.relay_node("priv-relay0")
    squatter = subprocess.Popen(net.in_netns(relay.netns, [
        sys.executable, "-c", "import socket,time; s=socket.socket(); "
        f"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('{relay.inside}', 7400)); "
        "s.listen(); print('listening', flush=True); time.sleep(120)"]), stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout.readline().strip() == "listening"
        done = subprocess.run(from_pub0(t, [
            sys.executable, "-m", "wanmpi", "run", "--mpi", "openmpi", "-t", real.source, "-n", "2",
            "--map", "pub0,priv0", "/bin/true"]), capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    finally:
        squatter.kill()
        squatter.wait()
    assert done.returncode != 0
    assert "relay priv-relay0 exited at start" in done.stderr and f"{relay.inside}:7400" in done.stderr, done.stderr
    assert left_behind(t) == []


def test_relays_that_cannot_reach_each_other_are_named_with_the_port(sites):
    """A firewall between the sites drops the relays' trunk port: the relays
    start, but no trunk comes up; within the start timeout the job fails
    naming the relays, the address and port that were not reached and what
    must be open, and nothing is left running."""
    t, real = sites
    rule = ["FORWARD", "-p", "tcp", "--dport", str(topo.RELAY_OUTSIDE_PORT), "-j", "DROP"]
    routers = [c.router_netns for c in t.clusters]
    for ns in routers:
        subprocess.run(net.in_netns(ns, ["iptables", "-w", "-I", *rule]), check=True)
    try:
        started = time.monotonic()
        done = subprocess.run(from_pub0(t, [
            sys.executable, "-m", "wanmpi", "run", "--mpi", "openmpi", "-t", real.source, "-n", "2",
            "--map", "pub0,priv0", "/bin/true"]), capture_output=True, text=True, timeout=120, cwd=paths.REPO)
        took = time.monotonic() - started
    finally:
        for ns in routers:
            subprocess.run(net.in_netns(ns, ["iptables", "-w", "-D", *rule]), check=True)
    assert done.returncode != 0
    said = re.findall(r"(\S+) could not connect to (\S+) at (\S+) \(", done.stderr)
    assert said, done.stderr
    for dialer, peer, address in said:
        assert t.relay_node(dialer).cluster != t.relay_node(peer).cluster
        assert address == f"{t.relay_node(peer).outside}:{topo.RELAY_OUTSIDE_PORT}", done.stderr
    assert "not reached" in done.stderr and "TCP port" in done.stderr, done.stderr
    assert took < 60
    assert left_behind(t) == []


def test_a_job_that_times_out_leaves_no_relay_on_any_host(sites):
    t, real = sites
    done = subprocess.run(from_pub0(t, [
        sys.executable, "-m", "wanmpi", "run", "--mpi", "mpich", "-t", real.source, "-n", "2",
        "--map", "pub0,priv0", "--timeout", "5", "/bin/sleep", "600"]), capture_output=True, text=True,
        timeout=120, cwd=paths.REPO)
    assert done.returncode == 124, done.stdout + done.stderr
    assert "ran longer than 5 s" in done.stdout
    deadline = time.monotonic() + 20
    while left_behind(t) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left_behind(t) == []


def test_standing_relays_up_used_by_jobs_and_down(sites, tmp_path):
    """`wanmpi relay up|status|down` keep relays running on the relay hosts
    (key, configuration, pid and log in standing_relays.STATE, the key mode
    0600); a topology with [relay] standing = true makes jobs use them and
    leave them running."""
    t, real = sites
    standing = tmp_path / "standing.toml"
    standing.write_text(real.text + "\n[relay]\nstanding = true\n")
    wm = [sys.executable, "-m", "wanmpi"]

    def on_pub0(*args, timeout=120):
        return subprocess.run(from_pub0(t, [*wm, *args]), capture_output=True, text=True, timeout=timeout,
                              cwd=paths.REPO)
    before = on_pub0("relay", "status", "-t", str(standing))
    assert before.returncode == 1 and "relay priv-relay0 (priv-relay0) is not running" in before.stdout
    refused = on_pub0("run", "-t", str(standing), "-n", "2", "--map", "pub0,priv0", "/bin/true")
    assert refused.returncode != 0 and "standing relays are not ready" in refused.stderr
    try:
        up = on_pub0("relay", "up", "-t", str(standing))
        assert up.returncode == 0, up.stdout + up.stderr
        assert up.stdout.count("running  trunks up 1/1") == 4, up.stdout
        for r in real.relays:
            assert Path(standing_relays.files(r.name).key).stat().st_mode & 0o777 == 0o600
        pids = sorted(Path(standing_relays.files(r.name).pid).read_text() for r in real.relays)
        for mpi in MPI_NAMES:
            job = on_pub0("run", "--mpi", mpi, "-t", str(standing), "-n", "2", "--map", "pub0,priv0",
                          program(mpi, "where"))
            assert job.returncode == 0, job.stdout + job.stderr
            assert [line.split()[-1] for line in job.stdout.splitlines() if line.startswith("rank ")] == \
                ["pub0", "priv0"]
        assert on_pub0("relay", "status", "-t", str(standing)).returncode == 0
        again = on_pub0("relay", "up", "-t", str(standing))
        assert again.returncode == 0 and sorted(Path(standing_relays.files(r.name).pid).read_text()
                                                for r in real.relays) == pids
    finally:
        down = on_pub0("relay", "down", "-t", str(standing))
    assert down.returncode == 0 and down.stdout.count("stopped") == 4, down.stdout + down.stderr
    assert not list(Path(standing_relays.STATE).glob("*"))
    assert not any("wanrelay" in x for x in left_behind(t))
