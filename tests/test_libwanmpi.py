"""libwanmpi on the testbed: every collective it replaces gives exactly the MPI
library's result (tests/programs/collcheck checks each case against PMPI and
against its own computation), for both MPIs, C and Fortran, any rank placement,
two and three clusters; it changes nothing else; bad settings are reported."""
from __future__ import annotations

import glob
import json
import os
import re

import pytest

from conftest import EVERY_MPI, MPIS, bring_up, exact_reductions, program, wanmpi
from wanmpi.testbed import net

THREE = "examples/three-clusters.toml"
TWO = "examples/two-clusters.toml"
# gather and scatter(v) go to the MPI's own at some sizes by default, scan and exscan at all: ours at every size
ROOTED_OURS = [f"WANMPI_{c}=multilane" for c in ("GATHER", "SCATTER", "SCATTERV", "SCAN", "EXSCAN")]
# the collectives drawn together (the scans apart: added to the draw they would change its sequence)
DRAWN = ("bcast", "allreduce", "reduce", "allgather", "reduce_scatter_block", "barrier", "gather", "scatter",
         "allgatherv", "gatherv", "scatterv")


def stats(directory) -> list[dict]:
    return [json.loads(open(f).read()) for f in sorted(glob.glob(os.path.join(directory, "stats-*.json")))]


def calls(ranks: list[dict], coll: str, alg: str) -> int:
    return sum(r["collectives"].get(coll, {}).get(alg, 0) for r in ranks)


def run(mpi, prog, *args, ranks=8, map=None, env=(), topology=None, timeout=600):
    cmd = ["run", "--mpi", mpi, "-n", str(ranks), "--timeout", str(timeout - 30)]
    if map:
        cmd += ["--map", map]
    if topology:
        cmd += ["--topology", topology]
    cmd += exact_reductions(mpi)
    for e in env:
        cmd += ["-x", e]
    return wanmpi(*cmd, program(mpi, prog), *args, timeout=timeout)


@pytest.mark.parametrize("mpi", EVERY_MPI)
@pytest.mark.parametrize("placement", ["block", "interleave"])
def test_every_collective_is_exact(two_clusters, tmp_path, mpi, placement):
    env = [f"WANMPI_STATS={tmp_path}/stats-%r.json", *ROOTED_OURS]
    done = run(mpi, "collcheck", "--seed", "7" if placement == "block" else "8", "--cases", "120",
               "--max-bytes", "2000000", "--only", ",".join(DRAWN), map=placement, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 120 cases ok" in done.stdout
    ranks = stats(tmp_path)
    (tmp_path / "scans").mkdir()
    done = run(mpi, "collcheck", "--seed", "9", "--cases", "60", "--max-bytes", "2000000",
               "--only", "scan,exscan,reduce_scatter", map=placement,     # reduce_scatter: the built-in choice
               env=[f"WANMPI_STATS={tmp_path}/scans/stats-%r.json", *ROOTED_OURS, "WANMPI_REDUCE_SCATTER=multilane"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok" in done.stdout
    scans = stats(tmp_path / "scans")
    assert len(ranks) == 8
    for coll in ("bcast", "allreduce", "reduce", "allgather", "allgatherv", "reduce_scatter_block"):
        assert calls(ranks, coll, "multilane") > 0, f"{coll} never took the multi-lane path"
        assert calls(ranks, coll, "singlelane") > 0, f"{coll} never took the small-message path"
    for path in ("multilane", "singlelane"):      # irregular blocks, drawn with the scans
        assert calls(scans, "reduce_scatter", path) > 0, f"reduce_scatter never took the {path} path"
    for coll in ("barrier", "gather", "gatherv", "scatter", "scatterv"):     # one algorithm each
        assert calls(ranks, coll, "multilane") > 0, f"{coll} never took our path"
    for coll in ("scan", "exscan"):     # the prefix follows rank order: ours where clusters are rank ranges
        assert calls(scans, coll, "mpi") > 0, f"{coll} never went to the MPI (shuffled communicators)"
        assert placement == "interleave" or calls(scans, coll, "multilane") > 0, f"{coll} never took our path"


@pytest.mark.parametrize("mpi", EVERY_MPI)
@pytest.mark.parametrize("seed, cases, max_bytes, env", [
    ("31", "80", "2000000", ROOTED_OURS),
    # every size through our schedules, in 1 KB chunks over 3 lanes
    ("32", "60", "300000", ["WANMPI_CHUNK=1024", "WANMPI_SMALL=0", "WANMPI_LANES=3"]),
    ("33", "60", "1000000", ["WANMPI_PROGRESS=thread"]),
], ids=["default", "tiny-chunks", "progress-thread"])
def test_nonblocking_collectives_are_exact(two_clusters, mpi, seed, cases, max_bytes, env):
    """collcheck --nonblocking: each case's MPI_ side through the nonblocking
    variant (MPI_Ibcast ... MPI_Iexscan), completed by a call drawn from the
    case (Wait, Test, Request_get_status, Waitall, Testall, Waitany, Testany,
    Waitsome, Testsome), some among a ring exchange, some behind a second
    nonblocking collective completed first; the blocking PMPI_ call is the
    reference."""
    done = run(mpi, "collcheck", "--nonblocking", "--seed", seed, "--cases", cases, "--max-bytes", max_bytes,
               map="interleave", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"collcheck: {cases} cases ok (seed {seed}, nonblocking)" in done.stdout


@pytest.mark.parametrize("mpi", MPIS)
def test_active_nonblocking_collective_refuses_free_and_cancel(two_clusters, mpi):
    """MPI_Request_free and MPI_Cancel of an active nonblocking collective fail
    with MPI_ERR_REQUEST, and the request then completes with the right result
    (docs/nonblocking.md). Erroneous in the standard: MPICH 5.0.2 alone frees
    the request and answers MPI_Cancel with MPI_ERR_INTERN."""
    done = run(mpi, "collcheck", "--request-errors", "--cases", "0", map="interleave",
               env=["WANMPI_EXPECT_REQUEST_ERRORS=1"], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: request errors ok" in done.stdout


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_persistent_collectives_are_exact(two_clusters, mpi):
    """tests/programs/persistcheck: every persistent collective libwanmpi
    takes (MPI_<coll>_init; Open MPI's MPIX_<coll>_init), small (the MPI's
    own persistent call) and 200,000 ints (our schedules) mixed in one set,
    on MPI_COMM_WORLD and a split, started four times with new input each,
    by MPI_Startall or one MPI_Start each in an order that differs between
    ranks, completed by MPI_Waitall, a Testall loop or a Waitany loop: exact
    results, the requests stay allocated; MPI_Request_free and MPI_Start of
    an active one of ours are refused with MPI_ERR_REQUEST
    (docs/nonblocking.md). Under Intel MPI, whose own persistent
    collectives are broken, libwanmpi keeps the small ones too, each start
    Intel's nonblocking call on a duplicate communicator (docs/intelmpi.md)."""
    done = run(mpi, "persistcheck", map="interleave", env=["WANMPI_EXPECT_REQUEST_ERRORS=1", "WANMPI_DEBUG=1"],
               timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "persistcheck: 16 rounds ok" in done.stdout
    assert "nonblocking wm_reduce_multilane: ours" in done.stderr     # the large rounds took our schedules


@pytest.mark.parametrize("mpi", MPIS)
def test_single_lane_and_tiny_chunks_are_exact(two_clusters, mpi):
    """The baseline algorithms, and the pipeline cut into 1 KB chunks (many
    pieces in flight, counts never divisible by the chunk)."""
    single = [f"WANMPI_{c}=singlelane" for c in ("BCAST", "ALLREDUCE", "REDUCE", "ALLGATHER", "ALLGATHERV",
                                                  "REDUCE_SCATTER_BLOCK", "REDUCE_SCATTER")]
    done = run(mpi, "collcheck", "--seed", "11", "--cases", "60", "--max-bytes", "500000", env=single)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run(mpi, "collcheck", "--seed", "12", "--cases", "60", "--max-bytes", "500000",
               env=["WANMPI_CHUNK=1024", "WANMPI_SMALL=0", "WANMPI_LANES=3", *ROOTED_OURS])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("env, window", [(["WANMPI_WINDOW=1"], 2), (["WANMPI_WINDOW=1", "WANMPI_FAN=3"], 2),
                                         (["WANMPI_WINDOW=0"], 0), ([], 256)])
def test_allreduce_through_any_send_window_is_exact(two_clusters, mpi, env, window):
    """The allreduce's sends inside a cluster wait in a window, oldest piece
    first (coll/sendq.c): the smallest window (2 pieces: the strictest order,
    through rings and trees), none, or the default 256 KiB (256 pieces of
    1 KB), give the exact results; the other reductions take none."""
    done = run(mpi, "collcheck", "--seed", "21", "--cases", "40", "--max-bytes", "300000",
               env=["WANMPI_CHUNK=1024", "WANMPI_SMALL=0", "WANMPI_REDUCE_SCATTER=multilane",
                    "WANMPI_REDUCE_SCATTER_BLOCK=multilane", "WANMPI_REDUCE=multilane", "WANMPI_DEBUG=1", *env])
    assert done.returncode == 0, done.stdout + done.stderr
    windows = set(re.findall(r"reduction: window (\d+) pieces of 1024 bytes", done.stderr))
    assert windows == ({str(window), "0"} if window else {"0"}), windows


@pytest.mark.parametrize("mpi", MPIS)
def test_allgather_rings_are_exact(two_clusters, mpi):
    """The allgather(v) as rings (coll/allgather.c) at every size: one ring
    with the clusters' ranks interleaved, three rings in 1 KB pieces (a piece
    per ring in turn, counts never divisible by the chunk), nonblocking too."""
    rings = ["WANMPI_ALLGATHER_RING=0", "WANMPI_SMALL=0", "WANMPI_DEBUG=1"]
    for extra, args, want in (([], [], " 1 ring"),
                              (["WANMPI_LANES=3", "WANMPI_CHUNK=1024"], [], " 3 rings"),
                              ([], ["--nonblocking"], " 1 ring")):
        done = run(mpi, "collcheck", *args, "--seed", "31", "--cases", "40", "--max-bytes", "600000",
                   "--only", "allgather,allgatherv", map="interleave", env=[*rings, *extra])
        assert done.returncode == 0, done.stdout + done.stderr
        assert "collcheck: 40 cases ok" in done.stdout
        assert re.search(r"allgather of \d+ bytes:" + want + r"\b", done.stderr), done.stderr[-2000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_bad_arguments_give_the_mpis_error_class(two_clusters, mpi):
    """A root out of range, an operation not defined for the type, a negative
    count, MPI_DATATYPE_NULL, an uncommitted datatype, MPI_OP_NULL, given
    alike on every rank with MPI_ERRORS_RETURN: every wrapped call returns
    the class the MPI's own call returns (tests/programs/badargs.c), and the
    communicator works afterwards."""
    done = run(mpi, "badargs", "--verbose", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"badargs: 5\d cases ok", done.stdout), done.stdout
    assert "bcast an uncommitted type: ours 3, the MPI's own 3" in done.stderr     # MPI_ERR_TYPE


@pytest.mark.parametrize("mpi", MPIS)
def test_arguments_that_differ_between_ranks_give_an_error_on_every_rank(two_clusters, mpi):
    """With --check-arguments (WANMPI_CHECK=1), counts, type signatures, roots
    and operations that differ between ranks, in every wrapped blocking
    collective, return MPI_ERR_TRUNCATE / TYPE / ROOT / OP on every rank
    instead of hanging (tests/programs/mismatch.c; without the check most of
    these hang, docs/libwanmpi.md); the same signature in another layout is
    accepted and exact; with MPI_ERRORS_ARE_FATAL the job ends with a message
    that names the call and the sizes; with --check-all-arguments the
    nonblocking calls (and MPICH's MPI_Bcast_init) return it from their start."""
    done = run(mpi, "mismatch", "--bytes", "200000", env=["WANMPI_CHECK=1"], timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mismatch: 24 cases ok" in done.stdout, done.stdout + done.stderr
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--timeout", "120", "--check-arguments",
                  program(mpi, "mismatch"), "--fatal", timeout=180)
    assert done.returncode not in (0, 124), done.stdout + done.stderr
    assert re.search(r"wanmpi: MPI_Bcast on a communicator of 8 ranks \(rank \d\): the ranks passed different "
                     r"counts: messages of 4 to 8 bytes, [48] here \(WANMPI_CHECK=1\)", done.stderr), done.stderr
    assert "the broadcast returned" not in done.stderr
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--timeout", "120", "--check-all-arguments",
                  program(mpi, "mismatch"), "--nonblocking", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"mismatch: {13 if mpi == 'mpich' else 12} cases ok" in done.stdout    # MPICH: MPI_Bcast_init too


def test_large_count_alltoallv_takes_one_path_on_every_rank(two_clusters, tmp_path):
    """MPI_Alltoallv_c and MPI_Alltoallw_c (MPICH: MPI-4) where two ranks'
    displacements pass INT_MAX and the others' do not: every rank runs our
    scheduled all-to-all (a rank alone in the MPI's own call waited for ever
    before), every byte arrives, and the statistics count each call as
    what the program called."""
    done = run("mpich", "largecount", env=[f"WANMPI_STATS={tmp_path}/stats-%r.json"], timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "largecount: 2 calls ok" in done.stdout
    ranks = stats(tmp_path)
    assert len(ranks) == 8
    for coll in ("alltoallv", "alltoallw"):
        assert calls(ranks, coll, "scheduled") == 8, coll


def test_argument_check_needs_libwanmpi(two_clusters):
    done = wanmpi("run", "-n", "2", "--no-wanmpi", "--check-arguments", program("openmpi", "where"), timeout=60)
    assert done.returncode != 0
    assert "--check-arguments and --check-all-arguments are libwanmpi's: they cannot be used with --no-wanmpi" \
        in done.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_argument_check_accepts_every_correct_call(two_clusters, mpi):
    """WANMPI_CHECK=1 never rejects a correct program: the randomized exact
    cases of every collective (derived and non-contiguous types, in place,
    uneven v-counts, split communicators, every root) and the all-to-all(w)
    checks all pass with it; with WANMPI_CHECK=all the nonblocking exact cases
    and the persistent collectives too."""
    done = run(mpi, "collcheck", "--seed", "12", "--cases", "100", "--max-bytes", "1000000", map="interleave",
               env=["WANMPI_CHECK=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 100 cases ok" in done.stdout
    done = run(mpi, "collcheck", "--seed", "13", "--cases", "60", "--max-bytes", "1000000", "--nonblocking",
               map="interleave", env=["WANMPI_CHECK=all"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok" in done.stdout
    done = run(mpi, "persistcheck", env=["WANMPI_CHECK=all"], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rounds ok" in done.stdout
    for prog in ("a2acheck", "alltoallwcheck"):
        done = run(mpi, prog, env=["WANMPI_CHECK=1"], timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "cases ok" in done.stdout


@pytest.fixture(scope="module")
def three_clusters():
    t = bring_up(THREE)
    yield t
    net.teardown(net.State.load())


@pytest.mark.parametrize("mpi", MPIS)
def test_three_clusters_are_exact(three_clusters, mpi):
    done = run(mpi, "collcheck", "--seed", "21", "--cases", "80", "--max-bytes", "1000000",
               topology=THREE, map="interleave")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 80 cases ok" in done.stdout


def test_three_clusters_pace_each_pair_of_clusters_at_its_own_link_rate(three_clusters):
    """b-c is a 100 Mbit/s link, a-b and a-c 200 Mbit/s (WANMPI_WAN_RATES):
    MATB pacing gives a rank of b (2 ranks; 3 in a, 3 in c) B/(2 x 3) to each."""
    done = run("openmpi", "collbench", "--ops", "alltoall", "--sizes", "1M", "--iters", "1", "--warmup", "0",
               topology=THREE, env=["WANMPI_ALLTOALL_RATE=matb", "WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wanmpi[3]: alltoall: pace sockets to cluster a at 4166666 B/s (matb)" in done.stderr
    assert "wanmpi[3]: alltoall: pace sockets to cluster c at 2083333 B/s (matb)" in done.stderr


def test_three_clusters_allreduce_flows_fit_every_receiver_and_link(three_clusters):
    """The homed allreduce over clusters of 3, 2 and 3 nodes, where an owner
    sends to several owners of another cluster: the WAN sockets into one
    node, with its ring, stay within 1.15 x 0.95 of its NIC (the allreduce's
    overcommit), and the sockets over one link within 0.95 of its rate (a
    rate per socket once sent 2.1 x a NIC into a node of b)."""
    t = three_clusters
    done = run("openmpi", "collbench", "--ops", "allreduce", "--sizes", "4M", "--iters", "1", "--warmup", "0",
               topology=THREE, env=["WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = list(t.nodes)                                   # block placement: rank r on nodes[r]
    cluster_of = {n.address: n.cluster for n in nodes}
    ring = {int(r): int(v) for r, v in re.findall(r"wanmpi\[(\d+)\]: allreduce: pace the ring at (\d+) B/s",
                                                  done.stderr)}
    socket = {(int(r), host): int(v) for r, host, v in
              re.findall(r"wanmpi\[(\d+)\]: allreduce: pace my sockets to ([\d.]+) \(cluster \w+\) at (\d+) B/s",
                         done.stderr)}
    assert sorted(ring) == list(range(8)), done.stderr[-2000:]
    assert {r for r, _ in socket} == set(range(8)), "a rank paced no WAN socket"
    nic = min(c.nic_bps for c in t.clusters) / 8            # WANMPI_NIC_RATE: the slowest NIC
    for rank, node in enumerate(nodes):
        into = sum(v for (r, host), v in socket.items() if host == node.address)
        assert into > 0, f"nothing paced into {node.name}"
        assert into + ring[rank] <= 1.15 * 0.95 * nic * 1.001, (node.name, into, ring[rank])
    for link in t.links:
        for x, y in ((link.a, link.b), (link.b, link.a)):
            over = sum(v for (r, host), v in socket.items() if nodes[r].cluster == x and cluster_of[host] == y)
            assert 0 < over <= 0.95 * link.rate_bps / 8 * 1.001, (x, y, over)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("delay_us, bcast, allreduce", [("0", "in a chain", "homed"),
                                                        ("1000000", "in a star", "exchange")])
def test_three_clusters_chained_and_homed_pieces_are_exact(three_clusters, mpi, delay_us, bcast, allreduce):
    """The broadcast through every cluster in turn (a chain) or from the
    root's cluster to each (a star), the allreduce homed (pieces combined in
    one cluster each) or exchanged, in many small pieces, with more ranks than
    nodes (clusters of 4, 3 and 4 ranks) and two lanes. The WAN delay libwanmpi
    is told decides: none, the chain and homed; a second, the star and the
    exchange, at every size."""
    done = run(mpi, "collcheck", "--seed", "23", "--cases", "60", "--max-bytes", "300000",
               topology=THREE, ranks=11,
               env=["WANMPI_CHUNK=1024", "WANMPI_SMALL=0", "WANMPI_LANES=2", f"WANMPI_WAN_DELAY={delay_us}",
                    "WANMPI_DEBUG=2"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok" in done.stdout
    assert f"bcast: " in done.stderr and "allreduce: " in done.stderr, done.stderr[-2000:]
    for op, chosen in (("bcast", bcast), ("allreduce", allreduce)):
        seen = set(re.findall(rf"wanmpi\[\d+\]: {op}: \d+ bytes, ([a-z ]+)", done.stderr))
        seen = {x.strip() for x in seen} - {"clusters two"}        # communicators over two of the clusters
        assert seen == {f"clusters {chosen}" if op == "bcast" else chosen}, (op, seen)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("cluster_env, fan", [(["WANMPI_FAN=2"], "2"), (["WANMPI_FAN=3"], "3"),
                                              # a LAN as slow as a second per message: the model's tree
                                              (["WANMPI_LAN_LATENCY=1000000"], None)])
def test_trees_inside_clusters_are_exact(three_clusters, mpi, cluster_env, fan):
    """The broadcast's segments and the reductions' pieces through a tree
    inside every cluster (coll/tree.c) instead of the chain: fan-out 2 and 3
    forced, and the ones the model takes when messages between two ranks of
    a cluster are slow (communicators of every shape: trees wherever a
    cluster has three ranks or more). 14 ranks over three clusters (trees
    two levels deep), 1 KB pieces, every size through our schedules, exact."""
    done = run(mpi, "collcheck", "--seed", "41", "--cases", "50", "--max-bytes", "300000",
               "--only", "bcast,allreduce,reduce,reduce_scatter_block,reduce_scatter",
               topology=THREE, ranks=14,
               env=["WANMPI_CHUNK=1024", "WANMPI_SMALL=0", "WANMPI_REDUCE_SCATTER=multilane", "WANMPI_DEBUG=2",
                    *cluster_env])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 50 cases ok" in done.stdout
    for what in ("bcast", "reduction"):
        seen = set(re.findall(rf"wanmpi\[\d+\]: {what}: \d+ bytes, .*fan-out (\d+)", done.stderr))
        if fan:
            assert seen == {fan}, (what, seen, done.stderr[-2000:])
        else:
            assert max(map(int, seen)) > 1, (what, seen, done.stderr[-2000:])


@pytest.mark.parametrize("mpi", MPIS)
def test_nonblocking_alltoall_and_three_clusters_are_exact(three_clusters, mpi):
    """MPI_Ialltoall (which collcheck does not draw) and the other nonblocking
    calls of ours over three clusters of 3, 2 and 3 ranks (the homed
    allreduce): collbench checks every result exactly; our schedules ran."""
    done = run(mpi, "collbench", "--ops", "ibcast,iallreduce,iallgather,ialltoall", "--sizes", "64K,1M",
               "--iters", "1", "--warmup", "0", topology=THREE, map="interleave", env=["WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    for fn in ("wm_bcast_multilane", "wm_reduce_multilane", "wm_allgatherv_multilane", "wm_alltoall_scheduled"):
        assert f"nonblocking {fn}: ours" in done.stderr


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("source", ["collcheck_f90", "collcheck_f77"])
def test_fortran_reaches_wanmpi(two_clusters, tmp_path, mpi, source):
    """Open MPI's Fortran library calls PMPI_* directly: only the Fortran
    symbols of libwanmpi can catch these calls (MPICH's calls MPI_*)."""
    done = run(mpi, source, map="interleave", env=[f"WANMPI_STATS={tmp_path}/stats-%r.json", *ROOTED_OURS])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cases ok" in done.stdout
    ranks = stats(tmp_path)
    f90 = ["allgatherv", "gather", "gatherv", "scatter", "scatterv", "reduce_scatter"] if source == "collcheck_f90" \
        else []
    for coll in ("scan", "exscan") if source == "collcheck_f90" else ():    # interleaved: mostly the MPI's own
        assert calls(ranks, coll, "calls") > 0, f"Fortran {coll} calls did not reach libwanmpi: {ranks[0]}"
    for coll in ("bcast", "allreduce", *f90):
        ours = calls(ranks, coll, "multilane") + calls(ranks, coll, "singlelane")
        assert ours > 0, f"Fortran {coll} calls did not reach libwanmpi: {ranks[0]}"


# what a Fortran nonblocking collective of ours runs (WANMPI_DEBUG=1 names it)
FORTRAN_NB_OURS = ("wm_bcast_multilane", "wm_reduce_multilane", "wm_allgatherv_multilane", "wm_alltoall_scheduled",
                   "wm_alltoallv_scheduled")


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("source, thread", [("collcheck_f90", False), ("collcheck_f08", False),
                                            ("collcheck_f08", True)], ids=["f90", "f08", "f08-progress-thread"])
def test_fortran_nonblocking_collectives_are_exact(two_clusters, mpi, source, thread):
    """The nonblocking collectives of the `mpi` and `mpi_f08` modules reach
    libwanmpi's schedules (lib/src/fortran/nonblocking.c) and complete
    through the Fortran MPI_Wait family, point-to-point requests beside them
    and blocking MPI_Sendrecv/Ssend/Probe/Recv (and, with mpi_f08,
    Send/Mprobe/Mrecv) meanwhile (lib/src/fortran/progress.c): exact results,
    requests left MPI_REQUEST_NULL, indices and statuses as the MPI's own
    calls give them; collcheck_f90 also starts every persistent collective
    of ours (MPICH's MPI_<COLL>_INIT, Open MPI's MPIX_<COLL>_INIT) three
    times with new input. Nothing hangs: Open MPI's Fortran library and MPICH's
    mpi_f08 call PMPI_Wait directly, which alone never completes a request
    of ours (docs/nonblocking.md, "Fortran"). With WANMPI_PROGRESS=thread
    the Fortran MPI_INIT (Open MPI and MPICH's mpi_f08 call PMPI_Init) is
    ours too (lib/src/fortran/init.c): the progress thread runs."""
    env = ["WANMPI_DEBUG=1", *(["WANMPI_PROGRESS=thread"] if thread else [])]
    done = run(mpi, source, map="interleave", env=env, timeout=420)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert re.search(rf"{source}: \d+ cases ok", done.stdout), done.stdout
    for fn in FORTRAN_NB_OURS:
        assert f"nonblocking {fn}: ours" in done.stderr, f"no Fortran nonblocking call ran {fn}"
    if thread:
        assert "WANMPI_PROGRESS=thread: progress thread started" in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize("mpi", MPIS)
def test_program_without_collectives_is_unchanged(two_clusters, mpi):
    plain = run(mpi, "ring", "--bytes", "300000")
    plain_alone = wanmpi("run", "--mpi", mpi, "-n", "8", "--no-wanmpi", program(mpi, "ring"),
                         "--bytes", "300000")
    assert plain.returncode == plain_alone.returncode == 0, plain.stdout + plain.stderr
    assert plain.stdout == plain_alone.stdout
    assert "wanmpi" not in plain.stderr     # (Open MPI's launcher may warn about setpgid on its own)


@pytest.mark.parametrize("mpi", MPIS)
def test_one_sided_communication_is_exact(two_clusters, mpi):
    """MPI RMA across the clusters (tests/programs/rmacheck.c), with and
    without libwanmpi; under MPICH through active messages, since `wanmpi run`
    turns its RMA path off (MPIR_CVAR_CH4_OFI_ENABLE_RMA=0: no delivery
    acknowledgement per send)."""
    for extra in ([], ["--no-wanmpi"]):
        done = wanmpi("run", "--mpi", mpi, "-n", "8", "--map", "interleave", *extra,
                      program(mpi, "rmacheck"), "--count", "3000")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().splitlines()[-1] == "rmacheck ok ranks 8 count 3000", done.stdout


@pytest.mark.parametrize("mpi", MPIS)
def test_library_prints_nothing_unless_asked(two_clusters, mpi):
    ours = wanmpi("run", "--mpi", mpi, "-n", "8", "--map", "interleave", program(mpi, "where"))
    alone = wanmpi("run", "--mpi", mpi, "-n", "8", "--map", "interleave", "--no-wanmpi",
                   program(mpi, "where"))
    assert ours.returncode == alone.returncode == 0, ours.stdout + ours.stderr
    assert ours.stdout == alone.stdout
    assert "wanmpi" not in ours.stderr


def test_no_wanmpi_does_not_load_the_library(two_clusters, tmp_path):
    done = wanmpi("run", "-n", "8", "--no-wanmpi", "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                  program("openmpi", "where"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert stats(tmp_path) == []


@pytest.mark.parametrize("setting, message", [
    ("WANMPI_LANES=0", "WANMPI_LANES=0: expected an integer from 1"),
    ("WANMPI_CHUNK=12x", "WANMPI_CHUNK=12x: expected an integer"),
    ("WANMPI_WINDOW=-1", "WANMPI_WINDOW=-1: expected an integer from 0"),
    ("WANMPI_CHECK=yes", "WANMPI_CHECK=yes: expected 0, 1 or all"),
    ("WANMPI_BCAST=fastest", "WANMPI_BCAST=fastest: expected multilane, singlelane or mpi"),
    ("WANMPI_CLUSTER_MAP=a=10.99.0.0/24", "none of this host's addresses"),
    ("WANMPI_CLUSTER_MAP=a=300.1.0.0/24", "'300.1.0.0/24' is not an IPv4 network"),
    ("WANMPI_CLUSTER_MAP=a198.18.0.0/24", "expected NAME=NETWORK"),
    ("WANMPI_WAN_RATES=a-b=200000000", "'a-b=200000000' is not NAME:NAME=BITS"),
    ("WANMPI_WAN_RATES=a:b=fast", "the rate of a:b must be a positive integer of bits/s"),
    ("WANMPI_WAN_RATES=a:b=0", "the rate of a:b must be a positive integer of bits/s"),
    ("WANMPI_WAN_RATES=a:b c=1", "'b c' is not a cluster name"),
])
def test_bad_setting_is_reported(two_clusters, setting, message):
    done = wanmpi("run", "-n", "4", "--map", "a0,a1,b0,b1", "-x", setting, "--timeout", "60",
                  program("openmpi", "where"), timeout=120)
    assert done.returncode not in (0, 124), done.stdout + done.stderr
    assert message in done.stdout + done.stderr


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("seed, env", [
    ("5", []),
    # every block of more than 1 KB in pieces: many pieces, packed where the datatype is not contiguous
    ("6", ["WANMPI_CHUNK=1024"]),
], ids=["default", "tiny-chunks"])
def test_alltoallw_is_exact(two_clusters, tmp_path, mpi, seed, env):
    """tests/programs/alltoallwcheck: MPI_Alltoallw, MPI_Ialltoallw (completed
    by MPI_Wait) and MPI_Alltoallw_init (Open MPI: MPIX_; started once) with a datatype per block on both sides (contiguous, vector,
    struct with gaps), uneven counts with zeros, blocks past the chunk, byte
    displacements with gaps, on MPI_COMM_WORLD and a split of 5 ranks, and in
    place: exact against the same exchange in point-to-point messages. Our
    schedule ran (blocking: the statistics; nonblocking: the decision), and
    the in-place calls went to the MPI's own."""
    done = run(mpi, "alltoallwcheck", "--seed", seed, "--cases", "24", map="interleave",
               env=[f"WANMPI_STATS={tmp_path}/stats-%r.json", "WANMPI_DEBUG=1", *env])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"alltoallwcheck: 24 cases ok (seed {seed})" in done.stdout
    ranks = stats(tmp_path)
    assert calls(ranks, "alltoallw", "scheduled") > 0, "no MPI_Alltoallw took our schedule"
    assert calls(ranks, "alltoallw", "mpi") > 0, "no in-place MPI_Alltoallw went to the MPI"
    assert "nonblocking wm_alltoallw_scheduled: ours" in done.stderr


def test_alltoallw_has_no_paced_algorithm(two_clusters):
    done = wanmpi("run", "-n", "4", "--map", "a0,a1,b0,b1", "-x", "WANMPI_ALLTOALLW=paced", "--timeout", "60",
                  program("openmpi", "where"), timeout=120)
    assert done.returncode not in (0, 124), done.stdout + done.stderr
    assert "WANMPI_ALLTOALLW=paced: expected scheduled or mpi" in done.stdout + done.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_fortran_alltoallw_reaches_wanmpi(two_clusters, tmp_path, mpi):
    """The Fortran MPI_ALLTOALLW, MPI_IALLTOALLW and MPI_ALLTOALLW_INIT (Open
    MPI: MPIX_ALLTOALLW_INIT) (tests/programs/alltoallw_f90.f90: MPI_INTEGER
    sent, a contiguous type of 5 received, blocks under and past the chunk;
    the persistent one started twice) are exact and run our schedule: Open
    MPI's Fortran library would call PMPI_Alltoallw & co directly."""
    done = run(mpi, "alltoallw_f90", map="interleave", env=[f"WANMPI_STATS={tmp_path}/stats-%r.json",
                                                            "WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alltoallw_f90: ok" in done.stdout
    assert calls(stats(tmp_path), "alltoallw", "scheduled") == 8, "the Fortran call did not reach libwanmpi"
    ours = done.stderr.count("nonblocking wm_alltoallw_scheduled: ours")
    assert ours == 3 * 8, f"{ours} nonblocking or persistent rounds of ours, not 24 (8 ranks x 3 rounds)"


@pytest.mark.parametrize("mpi", MPIS)
def test_zero_counts_with_null_buffers(two_clusters, mpi):
    """tests/programs/nullbufs: every wrapped collective with count 0 and NULL
    buffers (legal; MPICH's own coll/gather test does MPI_Gather(NULL, 0,
    ...)), ours forced where there is a choice, world and a split: each
    returns MPI_SUCCESS (a gather of ours once stopped with "out of memory:
    0 bytes")."""
    done = run(mpi, "nullbufs", map="interleave", env=ROOTED_OURS, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nullbufs: ok" in done.stdout


@pytest.mark.parametrize("mpi", MPIS)
def test_new_communicators_cost_nothing_until_ours_runs(two_clusters, mpi):
    """tests/programs/newcomms: 12 new communicators (duplicates, splits, a
    create in reverse rank order), each used at once and freed. Their maps
    are read from MPI_COMM_WORLD's identities without a message and are right
    (the world's clusters, numbered by lowest rank in the new one). Where
    every call goes to the MPI (a non-commutative operation), none of them
    gets communicators of ours: only MPI_COMM_WORLD has them, made at
    MPI_Init. With MPI_SUM each one spanning two clusters gets them once, at
    its first call. Every result exact."""
    bring_up(TWO)       # the module's testbed may be the three clusters' by now
    made = {}
    for op in ("first", "sum"):
        done = run(mpi, "newcomms", "--op", op, "--rounds", "3", "--calls", "3", env=["WANMPI_DEBUG=1"],
                   topology=TWO, timeout=300)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out
        assert "newcomms: ok 12 communicators" in done.stdout
        assert out.count("spans 2 clusters") == 8 + 3 * 27      # world, then per round: 8 + 8 + 8 + 3 ranks
        made[op] = out.count("its communicators made")
    assert made == {"first": 8, "sum": 8 + 3 * 27}
