"""Cloud regions behind 1:1 NAT on the testbed (examples/nat-regions.toml):
every node has a private address and a public one its router maps to it. The
MPIs alone fail across the regions, as on AWS (open-mpi/ompi #11174, #8257,
#12520); with wanmpi, libwanshim connects to the public addresses and
reports the private ones on accept, so jobs run directly, exact, with both
MPIs, no relays and no VPN."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIS, bring_up, exact_reductions, program, wanmpi
from wanmpi import paths
from wanmpi.testbed import net, ssh


@pytest.fixture(scope="module")
def regions():
    t = bring_up("examples/nat-regions.toml")
    yield t
    net.teardown(net.State.load())


def run(mpi: str, t, *args: str, timeout: float = 240):
    extra = exact_reductions(mpi)
    return wanmpi("run", "--mpi", mpi, "-t", t.source, "-n", "4", "--timeout", str(timeout - 60),
                  *extra, *args, timeout=timeout)


@pytest.mark.parametrize("mpi", MPIS)
def test_a_job_crosses_one_to_one_nat_through_public_addresses(regions, mpi):
    done = run(mpi, regions, "--env", "WANMPI_SHIM_DEBUG=2", program(mpi, "ring"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "token 6 (expected 6)" in done.stdout
    # connects to the other region's private addresses went to their public ones
    translated = set(re.findall(r"connect\(\d+, (10\.\d+\.0\.\d+):\d+\) = -?\d+ \S* ?\(to its public address\)",
                                done.stderr))
    assert translated & {"10.1.0.1", "10.1.0.2"} and translated & {"10.0.0.1", "10.0.0.2"}, done.stderr[-3000:]
    # and the accepting side saw the private address of the connecting node
    accepted = set(re.findall(r"accept4?\(\d+\) = \d+ from (\d+\.\d+\.\d+\.\d+):", done.stderr))
    assert accepted and not any(a.startswith("198.19.") for a in accepted), accepted


@pytest.mark.parametrize("mpi", MPIS)
def test_collectives_are_exact_across_nat(regions, mpi):
    done = run(mpi, regions, program(mpi, "collcheck"), "--seed", "11", "--cases", "40",
               "--max-bytes", "300000")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 40 cases ok" in done.stdout, done.stdout[-2000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_the_mpi_alone_cannot_cross_one_to_one_nat(regions, mpi):
    done = run(mpi, regions, "--no-wanmpi", program(mpi, "ring"), timeout=150)
    assert done.returncode != 0
    assert "token 6" not in done.stdout


@pytest.mark.parametrize("mpi", MPIS)
def test_real_hosts_cross_one_to_one_nat_over_ssh(regions, tmp_path, mpi):
    """The real-sites path: the regions as real hosts launched over OpenSSH
    from east0; the launcher's ssh and the daemons on the far side reach the
    other region through the shim (the daemons get it through the job's
    remote-shell wrapper, ssh carries no environment)."""
    assert wanmpi("testbed", "up", "--ssh", "-t", regions.source).returncode == 0
    sites = tmp_path / "regions.toml"
    assert wanmpi("testbed", "hosts", "-o", str(sites)).returncode == 0
    done = subprocess.run(net.node_command(regions.node("east0"), [
        "env", f"WANMPI_SSH={ssh.WRAPPER}", sys.executable, "-m", "wanmpi", "run", "--mpi", mpi,
        "-t", str(sites), "-n", "4", "--timeout", "120", program(mpi, "where"), "--bytes", "100000"]),
        capture_output=True, text=True, timeout=200, cwd=paths.REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("rank ")]
    assert hosts == ["east0", "east1", "west0", "west1"]
    assert "allreduce ok" in done.stdout
    assert not list(Path("/tmp").glob("wanmpi-agent-*")), "the job's remote-shell wrapper was left behind"
