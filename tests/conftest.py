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


def installed(mpi: str):
    """An MPI as a test parameter, skipped where it is not installed (with
    what installs it: `make test` installs every one)."""
    missing = launch.launcher(mpi).missing()
    return pytest.param(mpi, marks=pytest.mark.skipif(missing is not None, reason=f"{missing}"))


# The MPIs of the tests. EVERY_MPI (every registered one: Open MPI 4.1, MPICH,
# Open MPI 5, Intel MPI) for the core tests: the randomized exact collectives,
# relays, pacing, launch and cleanup, mpi4py. MPIS for the others: the
# default MPIs (Open MPI 4.1 and MPICH), or every one with
# WANMPI_TEST_MPIS=all (`make test-all`, the complete set; docs/testing.md).
EVERY_MPI = [installed(m) for m in launch.Launcher.registry]
MPI_NAMES = list(launch.Launcher.registry) if os.environ.get("WANMPI_TEST_MPIS") == "all" else launch.defaults()
MPIS = [installed(m) for m in MPI_NAMES]


def wanmpi(*args: str, timeout: float = 300, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run the wanmpi command; its output is captured as text."""
    return subprocess.run([*WANMPI, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env={**os.environ, **(env or {})}, **kwargs)


def exact_reductions(mpi: str) -> list[str]:
    """`wanmpi run` options that keep an MPI's own reductions exact, the
    reference of the exact tests: Open MPI's AVX op component saturates 8-
    and 16-bit integer sums instead of wrapping (open-mpi/ompi#8045; 4.1.4
    and 5.0.11 alike, docs/testing.md "Bugs of the MPIs")."""
    return ["-x", "OMPI_MCA_op=^avx"] if launch.launcher(mpi).mpiabi == "openmpi" else []


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
