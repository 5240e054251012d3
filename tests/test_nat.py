"""Cloud regions behind 1:1 NAT on the testbed (examples/nat-regions.toml):
every node has a private address and a public one its router maps to it. The
MPIs alone fail across the regions, as on AWS (open-mpi/ompi #11174, #8257,
#12520); with wanmpi, libwanshim connects to the public addresses and
reports the private ones on accept, so jobs run directly, exact, with both
MPIs, no relays and no VPN."""
from __future__ import annotations

import re

import pytest

from conftest import MPIS, bring_up, program, wanmpi
from wanmpi.testbed import net


@pytest.fixture(scope="module")
def regions():
    t = bring_up("examples/nat-regions.toml")
    yield t
    net.teardown(net.State.load())


def run(mpi: str, t, *args: str, timeout: float = 240):
    extra = ["-x", "OMPI_MCA_op=^avx"] if mpi == "openmpi" else []  # open-mpi/ompi#8045
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
