"""`wanmpi deploy` through the code real sites run: the testbed brought up
with OpenSSH in every node (each with a disk of its own at /opt/wanmpi, as
real hosts have), written as real hosts, an installed prefix deployed from
a0 by tar over ssh, checked on every host, skipped where the same version is
already there, refused where the destination is not a wanmpi prefix, a host
that does not answer named; then a job runs from the deployed copies."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, bring_up, wanmpi
from wanmpi import install, topo
from wanmpi.job import deploy
from wanmpi.testbed import net, ssh

VERSION = install.checkout_version(REPO)
# what the test's copy of the prefix leaves out, so that copies over the
# emulated links stay quick: the plotting libraries, which nothing here loads
HEAVY = ("matplotlib", "numpy", "numpy.libs", "fontTools", "PIL", "pillow.libs", "kiwisolver", "contourpy")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("deploy") / "wanmpi"
    done = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "install", f"PREFIX={p}"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    for site in p.glob("lib/wanmpi/venv/lib/python3*/site-packages"):
        for name in HEAVY:
            shutil.rmtree(site / name, ignore_errors=True)
    return p


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    t = bring_up("tests/topologies/deploy.toml")
    up = wanmpi("testbed", "up", "--ssh", "-t", t.source)
    assert up.returncode == 0, up.stdout + up.stderr
    path = tmp_path_factory.mktemp("sites") / "hosts.toml"
    assert wanmpi("testbed", "hosts", "-o", str(path)).returncode == 0
    yield t, topo.load(path)
    net.teardown(net.State.load())


def on_a0(t, argv: list, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(net.node_command(t.node("a0"), ["env", f"WANMPI_SSH={ssh.WRAPPER}", *map(str, argv)]),
                          capture_output=True, text=True, timeout=timeout, cwd="/")


def rows(table: str) -> dict[str, list[str]]:
    """host -> its columns, from deploy's table (columns split on 2+ spaces)."""
    import re
    lines = table.strip().splitlines()
    return {cols[0]: cols for cols in (re.split(r"\s{2,}", line) for line in lines[1:]) if len(cols) >= 6}


def test_hosts_of_a_topology_are_its_nodes_and_relay_hosts():
    t = topo.loads('[[cluster]]\nname = "a"\nnetwork = "10.1.0.0/16"\nhosts = "n[1-2]"\n'
                   'relays = [{ host = "gw", inside = "10.1.0.9", outside = "1.2.3.4" }]\n'
                   '[[cluster]]\nname = "b"\nnetwork = "10.2.0.0/16"\nhosts = ["m1"]\n'
                   'relays = [{ host = "gw2", inside = "10.2.0.9", outside = "1.2.3.5" }]\n', "t.toml")
    assert deploy.hosts_of(t) == [("n1", "node of a"), ("n2", "node of a"), ("gw", "relay of a"),
                                  ("m1", "node of b"), ("gw2", "relay of b")]


def test_deploy_copies_checks_skips_and_runs_a_job(prefix, sites, tmp_path):
    t, real = sites
    first = on_a0(t, [prefix / "bin" / "wanmpi", "deploy", "-t", real.source, "--prefix", ssh.HOST_LOCAL])
    assert first.returncode == 0, first.stdout + first.stderr
    table = rows(first.stdout)
    assert sorted(table) == ["a0", "a1", "b0", "b1"], first.stdout
    for host, cols in table.items():
        assert cols[2] == "copied (tar)" and cols[3] == VERSION, first.stdout
        assert cols[4] == "openmpi, mpich" and "fail" in cols[5], first.stdout
    # the same version is not copied again
    again = on_a0(t, [prefix / "bin" / "wanmpi", "deploy", "-t", real.source, "--prefix", ssh.HOST_LOCAL])
    assert again.returncode == 0 and all(c[2] == "same version" for c in rows(again.stdout).values()), again.stdout
    # a job from the deployed copies, started on a0 over ssh as a user would
    job = on_a0(t, [ssh.WRAPPER, "a0", f"WANMPI_SSH={ssh.WRAPPER}", ssh.HOST_LOCAL / "bin" / "wanmpi", "run",
                    "--mpi", "openmpi", "-t", real.source, "-n", "4",
                    ssh.HOST_LOCAL / "libexec" / "wanmpi" / "openmpi" / "where"])
    assert job.returncode == 0, job.stdout + job.stderr
    assert [line.split()[-1] for line in job.stdout.splitlines() if line.startswith("rank ")] == \
        ["a0", "a1", "b0", "b1"]
    assert "allreduce ok" in job.stdout


def test_deploy_refuses_what_is_not_a_prefix_and_names_a_silent_host(prefix, sites, tmp_path):
    t, real = sites
    assert on_a0(t, [ssh.WRAPPER, "b1", "mkdir -p /opt/wanmpi/site && touch /opt/wanmpi/site/data"]).returncode == 0
    broken = tmp_path / "broken.toml"
    broken.write_text(real.text.replace('{ host = "b1", address = "198.18.1.2" },',
                                        '{ host = "b1", address = "198.18.1.2" },\n'
                                        '    { host = "198.18.1.99", address = "198.18.1.99" },'))
    done = on_a0(t, [prefix / "bin" / "wanmpi", "deploy", "-t", broken, "--prefix", "/opt/wanmpi/site", "--check"])
    assert done.returncode == 1
    table = rows(done.stdout)
    assert table["b1"][2] == "failed" and "b1: /opt/wanmpi/site exists and is not a wanmpi prefix" in done.stdout
    assert table["198.18.1.99"][2] == "failed" and "198.18.1.99: no answer through" in done.stdout
    assert table["a0"][2] == "checked" and "a0: no installation there" in done.stdout


def test_deploy_needs_an_installed_prefix():
    done = wanmpi("deploy", "-t", "examples/real-clusters.toml")
    assert done.returncode == 2 and "runs from a source checkout" in done.stderr


def test_a_host_with_another_version_or_without_the_program_is_named_before_the_job(prefix, sites):
    """Deployed everywhere, then b1's copy made another version and a
    program put on a0's disk only: `wanmpi run` from the deployed prefix
    names b1's version against its own, and every host lacking the
    program, before any rank starts; deploying again repairs b1."""
    t, real = sites
    wm = ssh.HOST_LOCAL / "bin" / "wanmpi"
    assert on_a0(t, [prefix / "bin" / "wanmpi", "deploy", "-t", real.source, "--prefix", ssh.HOST_LOCAL]).returncode == 0
    manifest = ssh.HOST_LOCAL / install.MANIFEST
    assert on_a0(t, [ssh.WRAPPER, "b1", f"sed -i 's/\"version\": \"[^\"]*\"/\"version\": \"0.0.1\"/; "
                                        f"s/\"content_hash\": \"[^\"]*\"/\"content_hash\": \"sha256:{'e' * 64}\"/' {manifest}"]
                 ).returncode == 0
    here_only = ssh.HOST_LOCAL / "site-programs" / "where"
    assert on_a0(t, [ssh.WRAPPER, "a0", f"mkdir -p {here_only.parent} && "
                                        f"cp {ssh.HOST_LOCAL}/libexec/wanmpi/openmpi/where {here_only}"]).returncode == 0

    def job(program):
        return on_a0(t, [ssh.WRAPPER, "a0", f"WANMPI_SSH={ssh.WRAPPER}", wm, "run", "-t", real.source, "-n", "4",
                         program])
    done = job(here_only)
    assert done.returncode != 0 and "the job cannot start" in done.stderr, done.stdout + done.stderr
    assert f"host b1: has wanmpi 0.0.1 (content eeeeeeeeeeee) in {ssh.HOST_LOCAL}, this host {VERSION}" in done.stderr
    assert "run `wanmpi deploy -t TOPOLOGY`" in done.stderr
    for host in ("a1", "b0", "b1"):
        assert f"host {host}: program {here_only} is not an executable file there" in done.stderr, done.stderr
    assert "host a0" not in done.stderr and "rank " not in done.stdout
    # deploy puts b1 right; then the job runs
    again = on_a0(t, [prefix / "bin" / "wanmpi", "deploy", "-t", real.source, "--prefix", ssh.HOST_LOCAL])
    assert again.returncode == 0 and rows(again.stdout)["b1"][2] == "copied (tar)", again.stdout
    fixed = job(ssh.HOST_LOCAL / "libexec" / "wanmpi" / "openmpi" / "where")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
