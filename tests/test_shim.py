"""libwanshim: rates land on exactly the sockets to other clusters, read back
with getsockopt(SO_MAX_PACING_RATE) and TCP_INFO; set before and after a
connection, through the environment and the C API; intercepted calls keep
their results and errno; bad settings are reported and the shim steps aside.

On loopback (no testbed): tests/programs/shimcheck, with loopback addresses as
clusters (this host, 127.0.0.1, is in a; 127.0.0.2 is b; 127.0.0.3 is c).
On the testbed: tests/programs/shimpaced under `wanmpi run`, both MPIs."""
from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess

import pytest

from conftest import EVERY_MPI, MPIS, program, wanmpi
from wanmpi import paths, topo
from wanmpi.job import launch, libwanmpi

SHIMCHECK = paths.BUILD / "tests" / "shimcheck"
LOOPBACK_MAP = "a=127.0.0.1/32;b=127.0.0.2/32;c=127.0.0.3/32"
OTHER = ["to-b", "to-c", "to-b-nonblocking", "to-b-ipv6-mapped", "accepted-from-b"]
SAME = ["to-a", "accepted-from-a", "udp-to-b"]       # a UDP socket is never tracked
RATE = 3_000_000


def shimcheck(*args: str, preload: bool = True, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    assert SHIMCHECK.exists(), f"{SHIMCHECK} is not built: run `make build`"
    assert libwanmpi.shim_library().exists(), "libwanshim.so is not built: run `make lib`"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WANMPI_") and k != "LD_PRELOAD"}
    environment["WANMPI_CLUSTER_MAP"] = LOOPBACK_MAP
    if preload:
        environment["LD_PRELOAD"] = str(libwanmpi.shim_library())
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    done = subprocess.run([str(SHIMCHECK), *args], capture_output=True, text=True, timeout=60,
                          env=environment, **kwargs)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def rates(stdout: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(phase, socket) -> (SO_MAX_PACING_RATE, tcpi_max_pacing_rate); '-' = no cap."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("rate "):
            _, phase, name, so, info = line.split()
            out[phase, name] = (so, info)
    return out


def api(stdout: str) -> dict[str, str]:
    return {line.split()[1]: " ".join(line.split()[2:]) for line in stdout.splitlines()
            if line.startswith("api ")}


def assert_paced(found: dict, phase: str, paced: list[str], rate: int | None, unpaced: list[str]) -> None:
    want = "-" if rate is None else str(rate)
    for name in paced:
        assert found[phase, name] == (want, want), f"{phase} {name}: {found[phase, name]}, want {want}"
    for name in unpaced:
        so, info = found[phase, name]
        assert so == "-" and info in ("-", "error:EOPNOTSUPP"), f"{phase} {name} is paced: {so} {info}"


# ---- loopback -------------------------------------------------------------------
def test_rate_from_the_environment_lands_only_on_other_cluster_sockets():
    done = shimcheck("pacing", "4000000", env={"WANMPI_PACING_RATE": str(RATE)})
    found = rates(done.stdout)
    assert_paced(found, "initial", OTHER, RATE, SAME)
    assert api(done.stdout)["count-initial"] == "5"
    assert done.stderr == ""            # nothing printed unless asked


def test_api_paces_sockets_connected_before_and_after_it():
    done = shimcheck("pacing", str(RATE))
    found, calls = rates(done.stdout), api(done.stdout)
    assert_paced(found, "initial", [], None, OTHER + SAME)       # no rate yet: nothing paced
    assert calls["set_wan_rate"] == "5" and calls["wan_rate"] == str(RATE)
    assert_paced(found, "after-set", OTHER, RATE, SAME)
    assert_paced(found, "after-set", ["to-b-late"], RATE, [])     # connected after the rate was set
    assert calls["count-after-set"] == "6"


def test_rate_zero_lifts_every_cap():
    done = shimcheck("pacing", str(RATE), env={"WANMPI_PACING_RATE": "1000000"})
    found, calls = rates(done.stdout), api(done.stdout)
    assert calls["set_wan_rate_0"] == "6"
    still_open = [n for n in OTHER if n != "to-c"] + SAME + ["to-b-late", "dup-of-to-c"]
    assert_paced(found, "after-unset", [], None, still_open)
    assert calls["count-after-close"] == "0"


def test_one_cluster_can_have_its_own_rate():
    done = shimcheck("pacing", str(RATE))
    found, calls = rates(done.stdout), api(done.stdout)
    assert calls["set_cluster_rate_c"] == "1"
    assert calls["cluster_rate_c"] == str(RATE // 2) and calls["cluster_rate_b"] == str(RATE)
    assert found["cluster-c", "to-c"] == (str(RATE // 2),) * 2
    assert found["cluster-c", "to-b"] == (str(RATE),) * 2
    assert calls["set_cluster_rate_a"] == "-1 EINVAL"           # our own cluster
    assert calls["set_cluster_rate_z"] == "-1 EINVAL"           # not in the map
    assert found["cluster-c-wan", "to-c"] == (str(RATE),) * 2    # back to the WAN rate


def test_sockets_inside_the_cluster_are_paced_only_on_request():
    done = shimcheck("pacing", str(RATE))
    found, calls = rates(done.stdout), api(done.stdout)
    # to-a, accepted-from-a and the connecting end of accepted-from-a
    assert calls["set_local_rate"] == "3"
    assert_paced(found, "local", ["to-a", "accepted-from-a"], RATE // 4, ["udp-to-b"])
    assert_paced(found, "local", ["to-b", "to-b-nonblocking"], RATE, [])   # the WAN rate, untouched
    assert calls["set_local_rate_0"] == "3"


def test_one_peer_host_can_have_its_own_rate_and_give_it_back():
    done = shimcheck("pacing", str(RATE))
    found, calls = rates(done.stdout), api(done.stdout)
    assert calls["set_peer_rate_c"] == "1"
    assert found["peer", "to-c"] == (str(RATE // 3),) * 2
    assert found["peer", "to-b"] == (str(RATE),) * 2             # other hosts keep theirs
    assert calls["set_peer_rate_unix"] == "-1 EINVAL"
    assert calls["set_peer_rate_c_back"] == "1"
    assert found["peer-back", "to-c"] == (str(RATE),) * 2


def test_duplicate_keeps_a_socket_tracked_after_the_original_closes():
    done = shimcheck("pacing", str(RATE))
    found, calls = rates(done.stdout), api(done.stdout)
    assert calls["count-after-dup-close"] == "6"
    assert found["after-dup", "dup-of-to-c"] == (str(RATE + 1),) * 2


def test_rates_above_4_gbytes_per_s_use_the_64_bit_option():
    done = shimcheck("pacing", "5000000000")
    assert rates(done.stdout)["after-set", "to-b"] == ("5000000000",) * 2


@pytest.mark.parametrize("text, bytes_per_s", [
    ("800000", 800_000), ("100Mbit", 12_500_000), ("100 mbit/s", 12_500_000), ("12.5MB", 12_500_000),
    ("1GiB/s", 1 << 30), ("1kbit", 125), ("0", None),
])
def test_rate_units(text, bytes_per_s):
    found = rates(shimcheck("pacing", "1", env={"WANMPI_PACING_RATE": text}).stdout)
    assert_paced(found, "initial", OTHER, bytes_per_s, SAME)


def test_named_cluster_wins_over_the_host_addresses():
    found = rates(shimcheck("pacing", "1", env={"WANMPI_PACING_RATE": str(RATE), "WANMPI_CLUSTER": "b"}).stdout)
    assert_paced(found, "initial", ["to-a", "to-c", "accepted-from-a"], RATE,
                 ["to-b", "to-b-nonblocking", "to-b-ipv6-mapped", "accepted-from-b"])


def test_without_a_cluster_map_every_socket_is_left_alone():
    done = shimcheck("pacing", str(RATE), env={"WANMPI_CLUSTER_MAP": None, "WANMPI_PACING_RATE": "1000"})
    found, calls = rates(done.stdout), api(done.stdout)
    assert calls["enabled"] == "0" and calls["count-initial"] == "0"
    assert_paced(found, "after-set", [], None, OTHER + SAME + ["to-b-late"])


def test_program_runs_alone_when_the_shim_is_not_preloaded():
    done = shimcheck("pacing", str(RATE), preload=False)
    assert "api loaded 0" in done.stdout
    assert_paced(rates(done.stdout), "initial", [], None, OTHER + SAME)


@pytest.mark.parametrize("debug", ["0", "2"])
def test_failing_calls_keep_their_result_and_errno(debug):
    alone = shimcheck("errors", preload=False)
    shimmed = shimcheck("errors", env={"WANMPI_SHIM_DEBUG": debug})
    assert shimmed.stdout == alone.stdout
    for expected in ("connect-refused-other-cluster -1 ECONNREFUSED", "connect-not-a-socket -1 ENOTSOCK",
                     "accept-not-a-socket -1 ENOTSOCK", "accept-nothing-pending -1 EAGAIN",
                     "connect-ok-keeps-errno 0 EDOM", "accept-ok-keeps-errno 0 EDOM",
                     "close-ok-keeps-errno 0 EDOM", "dup2-ok-keeps-errno 0 EDOM", "close-bad-fd -1 EBADF"):
        assert f"call {expected}" in shimmed.stdout
    if debug == "2":        # the debug log shows the intercepted calls
        assert "connect(" in shimmed.stderr and "accept(" in shimmed.stderr


def test_threads_connecting_and_closing_while_the_rate_changes():
    assert "threads ok" in shimcheck("threads").stdout


def test_sockets_open_before_the_shim_looked_are_paced():
    """MPICH's ranks inherit their hydra proxy's connection to mpiexec."""
    with socket.create_server(("127.0.0.2", 0)) as server:
        client = socket.create_connection(server.getsockname())
        with client, server.accept()[0]:
            done = shimcheck("inherited", str(client.fileno()), pass_fds=[client.fileno()],
                             env={"WANMPI_PACING_RATE": str(RATE)})
    assert api(done.stdout)["count"] == "1"
    assert rates(done.stdout)["inherited", "inherited-to-b"] == (str(RATE),) * 2


@pytest.mark.parametrize("name, value, message", [
    ("WANMPI_PACING_RATE", "fast", "WANMPI_PACING_RATE=fast: expected bytes/s (an integer) or a rate with a unit"),
    ("WANMPI_PACING_RATE", "10Mbps", "WANMPI_PACING_RATE=10Mbps: ambiguous unit"),
    ("WANMPI_PACING_RATE", "12.5", "WANMPI_PACING_RATE=12.5: a rate without a unit is bytes/s and must be an integer"),
    ("WANMPI_PACING_RATE", "-5", "WANMPI_PACING_RATE=-5: expected bytes/s"),
    ("WANMPI_PACING_RATE", "5 parsecs", "WANMPI_PACING_RATE=5 parsecs: unknown unit (units: B, KB"),
    ("WANMPI_PACING_RATE", "5 MB x", "WANMPI_PACING_RATE=5 MB x: unexpected text after the rate"),
    ("WANMPI_CLUSTER_MAP", "a=300.1.0.0/24", "WANMPI_CLUSTER_MAP=a=300.1.0.0/24: '300.1.0.0/24' is not an IPv4 network"),
    ("WANMPI_CLUSTER_MAP", "a=127.0.0.0/33", "'127.0.0.0/33' has a bad prefix length"),
    ("WANMPI_CLUSTER_MAP", "a127.0.0.1", "WANMPI_CLUSTER_MAP=a127.0.0.1: expected NAME=NETWORK"),
    ("WANMPI_CLUSTER_MAP", "a=10.99.0.0/24", "none of this host's addresses (127.0.0.1"),
    ("WANMPI_CLUSTER_MAP", "a=127.0.0.0/8;b=127.0.0.1/32", "this host has addresses in two clusters ('a' and 'b')"),
    ("WANMPI_CLUSTER", "a b", "WANMPI_CLUSTER=a b: cluster name must"),
    ("WANMPI_SHIM_DEBUG", "yes", "WANMPI_SHIM_DEBUG=yes: expected 0, 1 or 2"),
    ("WANMPI_NAT_MAP", "10.0.0.1", "WANMPI_NAT_MAP=10.0.0.1: '10.0.0.1' is not PRIVATE=PUBLIC"),
    ("WANMPI_NAT_MAP", "10.0.0.1=3.3.3.3,10.0.0.2=nat", "'10.0.0.2=nat' needs two IPv4 addresses"),
    ("WANMPI_NAT_MAP", "10.0.0.1=3.3.3.3,10.0.0.1=3.3.3.4", "'10.0.0.1=3.3.3.4' repeats an address"),
    ("WANMPI_NAT_MAP", "10.0.0.1=3.3.3.3,", "'' is not PRIVATE=PUBLIC"),
])
def test_bad_setting_is_reported_and_the_shim_steps_aside(name, value, message):
    done = shimcheck("pacing", str(RATE), env={"WANMPI_PACING_RATE": "1000", name: value})
    assert message in done.stderr
    assert done.stderr.count("the shim is off in this process") == 1, done.stderr
    calls = api(done.stdout)
    assert calls["enabled"] == "0" and calls["set_wan_rate"] == "-1 ENOSYS"
    assert_paced(rates(done.stdout), "after-set", [], None, OTHER + SAME)


def retries(stdout: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(phase, socket) -> (TCP_RTO_MAX_MS, TCP_USER_TIMEOUT) as shimcheck read them."""
    return {(l.split()[1], l.split()[2]): (l.split()[3], l.split()[4]) for l in stdout.splitlines()
            if l.startswith("retry ")}


@pytest.mark.parametrize("env, rto_max, user_timeout", [
    ({}, "1000", "900000"),
    ({"WANMPI_TCP_RTO_MAX": "5000", "WANMPI_TCP_USER_TIMEOUT": "60000"}, "5000", "60000"),
    ({"WANMPI_TCP_RTO_MAX": "0", "WANMPI_TCP_USER_TIMEOUT": "0"}, "120000", "0"),      # the kernel's
])
def test_wan_sockets_retransmit_through_outages(env, rto_max, user_timeout):
    """Every TCP socket to another cluster gets the retransmission cap and the
    user timeout (lib/src/shim/retry.c); sockets inside the cluster keep the
    kernel's (120 s cap, no user timeout), with or without a rate."""
    found = retries(shimcheck("pacing", "4000000", env=env).stdout)
    for phase in ("initial", "after-set"):
        for name in OTHER:
            assert found[phase, name] == (rto_max, user_timeout), (phase, name, found[phase, name])
        for name in ("to-a", "accepted-from-a"):
            assert found[phase, name] == ("120000", "0"), (phase, name, found[phase, name])


@pytest.mark.parametrize("name, value, message", [
    ("WANMPI_TCP_RTO_MAX", "500", "WANMPI_TCP_RTO_MAX=500: expected milliseconds from 1000 to 120000, or 0"),
    ("WANMPI_TCP_RTO_MAX", "1s", "WANMPI_TCP_RTO_MAX=1s: expected milliseconds from 1000 to 120000"),
    ("WANMPI_TCP_RTO_MAX", "200000", "WANMPI_TCP_RTO_MAX=200000: expected milliseconds from 1000 to 120000"),
    ("WANMPI_TCP_USER_TIMEOUT", "-1", "WANMPI_TCP_USER_TIMEOUT=-1: expected milliseconds up to 86400000"),
])
def test_bad_retry_setting_is_reported_and_the_shim_steps_aside(name, value, message):
    done = shimcheck("pacing", str(RATE), env={"WANMPI_PACING_RATE": "1000", name: value})
    assert message in done.stderr and done.stderr.count("the shim is off in this process") == 1, done.stderr
    assert retries(done.stdout)["after-set", "to-b"] == ("120000", "0")


# ---- topology and launch ------------------------------------------------------------
BASE = (paths.REPO / "examples" / "two-clusters.toml").read_text()


@pytest.mark.parametrize("table, bytes_per_s", [
    ("", 0),
    ('[pacing]\nmode = "off"\n', 0),
    ('[pacing]\nmode = "fixed"\nrate = "40Mbit"\n', 5_000_000),
    ('[pacing]\nmode = "matb"\n', 200_000_000 // 8 // 4),      # B / nodes of a cluster
    ('[pacing]\nmode = "matb"\nsenders = 8\n', 200_000_000 // 8 // 8),
])
def test_pacing_table_gives_every_rank_its_rate(table, bytes_per_s):
    t = topo.loads(BASE + table, "t.toml")
    assert libwanmpi.environment(t)["WANMPI_PACING_RATE"] == str(bytes_per_s)


@pytest.mark.parametrize("table, message", [
    ('mode = "fast"', "pacing.mode: 'fast' is not a pacing mode (choose off, fixed, matb)"),
    ('mode = "fixed"', "pacing.rate: missing"),
    ('mode = "matb"\nrate = "1Mbit"', "pacing.rate: only with mode = \"fixed\""),
    ('mode = "fixed"\nrate = "1Mbit"\nsenders = 2', "pacing.senders: only with mode = \"matb\""),
    ('mode = "matb"\nsenders = 0', "pacing.senders: 0 is outside"),
    ('mode = "fixed"\nrate = "10Mbps"', "pacing.rate: ambiguous unit"),
    ("speed = 1", "pacing.speed: unknown key"),
])
def test_bad_pacing_table_is_reported(table, message):
    with pytest.raises(topo.TopologyError, match=re.escape(message)):
        topo.loads(BASE + "[pacing]\n" + table + "\n", "t.toml")


def test_ranks_preload_libwanmpi_then_libwanshim_then_the_users():
    t = topo.loads(BASE, "t.toml")
    job = launch.Job(t, ["prog"], list(t.nodes), {"LD_PRELOAD": "/opt/tracer.so"})
    assert job.rank_environment("mpich")["LD_PRELOAD"].split(":") == [
        str(libwanmpi.library("mpich")), str(libwanmpi.shim_library()), "/opt/tracer.so"]
    alone = launch.Job(t, ["prog"], list(t.nodes), {}, wanmpi=False)
    assert "LD_PRELOAD" not in alone.rank_environment("openmpi")


# ---- the testbed: real MPI jobs ---------------------------------------------------------
def sockets(stdout: str, t: topo.Topology) -> dict[tuple[int, str], list[tuple[str, str, str]]]:
    """(rank, phase) -> [(local cluster, peer cluster, rate)] from shimpaced's report."""
    def cluster(address: str) -> str:
        ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
        return next((c.name for c in t.clusters if ip in ipaddress.ip_network(c.network)), "-")
    out: dict = {}
    for line in stdout.splitlines():
        if line.startswith("sock "):
            _, rank, phase, local, peer, rate = line.split()
            out.setdefault((int(rank), phase), []).append((cluster(local), cluster(peer), rate))
    return out


def counts(stdout: str) -> dict[tuple[int, str], int]:
    return {(int(l.split()[1]), l.split()[2]): int(l.split()[3]) for l in stdout.splitlines()
            if l.startswith("count ")}


def check_exactly_wan_sockets_paced(report: dict, tally: dict, phase: str, rate: str, ranks: int) -> None:
    for r in range(ranks):
        found = report[r, phase]
        wan = [s for s in found if "-" not in s[:2] and s[0] != s[1]]
        assert wan, f"rank {r} has no socket to the other cluster: {found}"
        for local, peer, got in found:
            want = rate if local != "-" and peer != "-" and local != peer else "-"
            assert got == want, f"rank {r} {phase}: socket {local}->{peer} has rate {got}, want {want}"
        assert tally[r, phase] == len(wan), f"rank {r}: the shim counts {tally[r, phase]} WAN sockets, there are {len(wan)}"


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_mpi_jobs_on_the_testbed_pace_exactly_their_other_cluster_sockets(two_clusters, mpi):
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--map", "interleave", "--timeout", "120",
                  "-x", f"WANMPI_PACING_RATE={RATE}", program(mpi, "shimpaced"), "--rate", "4000000",
                  timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    report, tally = sockets(done.stdout, two_clusters), counts(done.stdout)
    check_exactly_wan_sockets_paced(report, tally, "traffic", str(RATE), 8)
    check_exactly_wan_sockets_paced(report, tally, "after", "4000000", 8)
    assert "wanshim" not in done.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_mpi_job_on_the_testbed_unpaced_by_default_until_the_api_sets_a_rate(two_clusters, mpi):
    done = wanmpi("run", "--mpi", mpi, "-n", "4", "--map", "a0,a1,b0,b1", "--timeout", "120",
                  program(mpi, "shimpaced"), "--rate", str(RATE), timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    report, tally = sockets(done.stdout, two_clusters), counts(done.stdout)
    check_exactly_wan_sockets_paced(report, tally, "traffic", "-", 4)    # [pacing] mode is off
    check_exactly_wan_sockets_paced(report, tally, "after", str(RATE), 4)


def test_no_wanmpi_preloads_no_shim_on_the_testbed(two_clusters):
    done = wanmpi("run", "-n", "4", "--map", "a0,a1,b0,b1", "--no-wanmpi", "--timeout", "120",
                  "-x", f"WANMPI_PACING_RATE={RATE}", program("openmpi", "shimpaced"), timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(counts(done.stdout).values()) == {-1}
    assert all(rate == "-" for found in sockets(done.stdout, two_clusters).values() for *_, rate in found)


@pytest.mark.parametrize("mpi", MPIS)
def test_paced_wan_bandwidth_on_the_testbed_follows_the_rate(two_clusters, mpi):
    """2.5 MB/s = 20 Mbit/s: the WAN peer's bandwidth drops to it (measured 19.6-19.7
    for both MPIs, 85-87 unpaced); the peer in the same cluster keeps its NIC rate."""
    done = wanmpi("run", "--mpi", mpi, "-n", "3", "--map", "a0,a1,b0", "--timeout", "120",
                  "-x", "WANMPI_PACING_RATE=2500000", program(mpi, "pingpong"), "-s", "4000000", "-r", "4",
                  timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    mbit = {int(l.split()[1]): float(l.split()[l.split().index("bandwidth_mbit") + 1])
            for l in done.stdout.splitlines() if l.startswith("peer ")}
    assert 16 <= mbit[2] <= 21, f"WAN peer at {mbit[2]} Mbit/s, paced at 20"
    assert mbit[1] > 60, f"same-cluster peer at {mbit[1]} Mbit/s: it must not be paced"
