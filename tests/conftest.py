"""Fixtures for tests on the real testbed: namespaces, the wanem emulator and
real Open MPI / MPICH jobs. Each fixture removes what it built, also when a
test fails, and the session ends by checking that nothing is left behind.

There is one testbed per machine, so a test session holds an exclusive lock
(flock on $WANMPI_TEST_LOCK, default /tmp/wanmpi-testbed.lock) from start to
end: two sessions on one machine (two developers, or CI beside a benchmark
that takes the same lock with `flock`) take turns instead of tearing down each
other's testbed. Do not wrap pytest itself in `flock` on that file: it would
wait for itself."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wanmpi import paths, topo
from wanmpi.job import launch
from wanmpi.testbed import emulator, net

REPO = paths.REPO
WANMPI = [sys.executable, "-m", "wanmpi"]
MPIS = launch.defaults()        # openmpi5: tests/test_openmpi5.py (issue 19)


def wanmpi(*args: str, timeout: float = 300, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run the wanmpi command; its output is captured as text."""
    return subprocess.run([*WANMPI, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env={**os.environ, **(env or {})}, **kwargs)


def program(mpi: str, name: str) -> str:
    path = paths.BUILD / mpi / name
    assert path.exists(), f"{path} is not built: run `make build`"
    return str(path)


BROUGHT_UP: list[str] = []           # topologies this session built (see nothing_left_behind)


def bring_up(path: str) -> topo.Topology:
    t = topo.load(REPO / path)
    BROUGHT_UP.append(path)
    state = net.State.load()
    if state is not None and state.topology_text != t.text:
        net.teardown(state)
    net.Net(t).up()
    return t


@pytest.fixture(scope="module")
def two_clusters():
    t = bring_up("examples/two-clusters.toml")
    yield t
    net.teardown(net.State.load())


@pytest.fixture(scope="module")
def private_cluster():
    t = bring_up("examples/private-cluster.toml")
    yield t
    net.teardown(net.State.load())


def namespace_processes() -> list[tuple[str, str]]:
    """(namespace, command line) of every process in a testbed namespace."""
    found = []
    for ns in net.existing_namespaces():
        for pid in net.namespace_pids(ns):
            try:
                with open(f"/proc/{pid}/cmdline") as f:
                    found.append((ns, f.read().replace("\0", " ")))
            except OSError:
                continue
    return found


def is_ssh_session(cmd: str) -> bool:
    """An sshd process serving a connection (not a node's listening sshd)."""
    return cmd.startswith("sshd:") and "[listener]" not in cmd


def left_behind(t=None) -> list[str]:
    """wanrelay processes, ssh sessions, ranks of `sleep 600` and relay key
    directories still there (relays over ssh, tests/test_real_relay*.py)."""
    found = []
    for ns, cmd in namespace_processes():
        rank = cmd.split()[-2:] == ["/usr/bin/sleep", "600"] or cmd.split() == ["/bin/sleep", "600"]
        if "wanrelay" in cmd or is_ssh_session(cmd) or rank:
            found.append(f"{ns}: {cmd}")
    found += [str(p) for p in Path("/tmp").glob("wanrelay-job.*")]
    return found


def wan_counters() -> dict:
    return emulator.counters()


@pytest.fixture(scope="session", autouse=True)
def testbed_lock():
    path = os.environ.get("WANMPI_TEST_LOCK", "/tmp/wanmpi-testbed.lock")
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"\nwaiting for the testbed lock {path} (another session or benchmark holds it)",
                  file=sys.stderr, flush=True)
            started = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            print(f"got the testbed lock after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        yield
        fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(testbed_lock):
    found = net.State.load()
    yield
    state = net.State.load()
    if (not BROUGHT_UP and found is not None and state is not None
            and state.topology_text == found.topology_text):
        # a session that built nothing (loopback tests run under another
        # WANMPI_TEST_LOCK) leaves alone the testbed it found: someone else's
        return
    net.teardown(state)
    left = net.existing_namespaces()
    assert not left, f"namespaces left behind: {left}"
    assert not emulator.pids(), "a wanem process was left running"
