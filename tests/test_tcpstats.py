"""TCP retransmission accounting: parsing /proc/net/netstat and /proc/net/snmp
(fixtures are real files from this machine and from a testbed node before and
after a job over a lossy WAN), differences and sums, and `wanmpi run
--tcp-stats` on the testbed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import program, wanmpi
from wanmpi import paths, topo
from wanmpi.job import tcpstats
from wanmpi.testbed import emulator
from wanmpi.job.tcpstats import Snapshot, TcpStats
from wanmpi.topo import Node

FIXTURES = Path(__file__).parent / "fixtures" / "proc-net"


def fixture(*names: str) -> str:
    return "".join((FIXTURES / n).read_text() for n in names)


# ---- parsing -----------------------------------------------------------------------
def test_parser_reads_every_counter_of_the_real_files():
    counters, notes = tcpstats.parse(fixture("netstat", "snmp"))
    assert notes == []
    assert counters["TcpExt.TCPTimeouts"] == 4
    assert counters["TcpExt.TCPLossProbes"] == 7025
    assert counters["Tcp.RetransSegs"] == 4529
    assert counters["Tcp.MaxConn"] == -1                 # signed values parse too
    assert counters["IpExt.InOctets"] == 40798304802     # beyond 32 bits
    assert len([k for k in counters if k.startswith("TcpExt.")]) > 100


def test_stats_of_the_real_files_name_the_kernel_counters():
    stats = tcpstats.stats_from_text(fixture("netstat", "snmp"))
    assert (stats.rto, stats.spurious_rto, stats.retrans_segs, stats.out_segs) == (4, 0, 4529, 2352606)
    assert (stats.loss_probes, stats.loss_probe_recoveries) == (7025, 6)
    assert (stats.fast_retrans, stats.sack_recoveries, stats.dsack_recv) == (31, 29, 4519)
    assert stats.notes == ()


def test_a_missing_file_counts_as_zero_with_a_note():
    stats = tcpstats.stats_from_text(fixture("netstat"))           # no /proc/net/snmp
    assert stats.retrans_segs == 0 and stats.out_segs == 0
    assert stats.rto == 4                                          # TcpExt still read
    assert any("Tcp.RetransSegs" in n and "taken as 0" in n for n in stats.notes)


@pytest.mark.parametrize("text, note", [
    ("TcpExt: TCPTimeouts TCPLossProbes\nTcpExt: 3\n", "2 names but 1 values"),
    ("TcpExt: TCPTimeouts\nTcpExt: many\n", "is not a number"),
    ("TcpExt: TCPTimeouts\n", "names but no values"),
    ("garbage without a colon\nTcpExt: TCPTimeouts\nTcpExt: 3\n", "not 'Section: ...'"),
    ("Tcp: RetransSegs\nTcpExt: TCPTimeouts\nTcpExt: 3\n", "section Tcp has names but no values"),
])
def test_malformed_text_never_raises_and_says_what_was_wrong(text, note):
    counters, notes = tcpstats.parse(text)
    assert any(note in n for n in notes), notes
    stats = tcpstats.stats_from_text(text)
    assert stats.rto in (0, 3)


def test_empty_text_gives_zeros_and_notes():
    stats = tcpstats.stats_from_text("")
    assert stats.values() == {name: 0 for name in stats.values()}
    assert stats.notes and "TcpExt.TCPTimeouts" in stats.notes[0]


# ---- differences and sums --------------------------------------------------------------
def test_difference_of_real_snapshots_around_a_lossy_job():
    before = tcpstats.stats_from_text(fixture("a0-lossy/netstat.before", "a0-lossy/snmp.before"))
    after = tcpstats.stats_from_text(fixture("a0-lossy/netstat.after", "a0-lossy/snmp.after"))
    d = after.delta(before)
    assert d.retrans_segs > 0 and d.out_segs > 1000
    assert d.fast_retrans > 0 and d.sack_recoveries > 0
    assert d.rto >= 0 and d.notes == ()
    assert d.retrans_segs == after.retrans_segs - before.retrans_segs


def test_counter_that_went_backwards_counts_from_zero_with_a_note():
    d = TcpStats(rto=2, retrans_segs=5).delta(TcpStats(rto=7, retrans_segs=1))
    assert (d.rto, d.retrans_segs) == (2, 4)
    assert any("went backwards" in n and "rto" in n for n in d.notes)


def test_snapshot_sums_nodes_and_names_them_in_notes():
    t0 = Snapshot({"a0": TcpStats(rto=1, out_segs=10), "b0": TcpStats(out_segs=5)}, taken_at=100.0)
    t1 = Snapshot({"a0": TcpStats(rto=3, out_segs=30, retrans_segs=2),
                   "b0": TcpStats(out_segs=25, notes=("missing counters, taken as 0: Tcp.InSegs",))},
                  taken_at=102.5)
    d = t1.delta(t0)
    assert d.seconds == 2.5
    assert (d.total.rto, d.total.out_segs, d.total.retrans_segs) == (2, 40, 2)
    assert d.total.retrans_share == pytest.approx(0.05)
    assert d.total.notes == ("b0: missing counters, taken as 0: Tcp.InSegs",)
    text = tcpstats.report(d)
    assert "summed over 2 node(s) (a0, b0)" in text and "in 2.5 s" in text
    assert "retransmission timeouts (RTO)          2" in text
    assert "note: b0: missing counters" in text


def test_a_node_read_only_once_is_left_out_with_a_note():
    d = Snapshot({"a0": TcpStats(rto=1), "b0": TcpStats(rto=9)}).delta(Snapshot({"a0": TcpStats()}))
    assert d.total.rto == 1
    assert d.nodes["b0"].notes == ("not read before the job: left out",)


def test_json_holds_sums_and_nodes(tmp_path):
    d = Snapshot({"a0": TcpStats(rto=1, loss_probes=4)}, taken_at=5.0).delta(Snapshot({"a0": TcpStats()}, taken_at=4.0))
    tcpstats.write_json(tmp_path / "t.json", d)
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["total"]["rto"] == 1 and data["total"]["loss_probes"] == 4
    assert data["nodes"]["a0"]["rto"] == 1 and data["seconds"] == 1.0
    assert set(data["total"]) == {*TcpStats().values(), "notes"}


# ---- reading nodes --------------------------------------------------------------------
def test_real_hosts_are_read_through_the_remote_shell(monkeypatch):
    monkeypatch.setattr(paths, "REMOTE_SHELL", "my-ssh")
    argv = tcpstats.read_command(Node("node01", "site", 0, "node01", emulated=False))
    assert argv == ["my-ssh", "node01", "cat /proc/net/netstat /proc/net/snmp"]
    assert tcpstats.read_command(Node("a0", "a", 0, "198.18.0.1"))[:4] == ["ip", "netns", "exec", "wm-a0"]


def test_a_node_that_cannot_be_read_gets_zeros_and_a_note():
    t = topo.load(None)
    gone = Node("zz9", "a", 9, "198.18.0.10")        # namespace wm-zz9 does not exist
    snap = tcpstats.snapshot(t, [gone])
    assert snap.nodes["zz9"].values() == TcpStats().values()
    assert "cannot read its counters" in snap.nodes["zz9"].notes[0]


# ---- on the testbed ---------------------------------------------------------------------
def test_job_over_a_lossy_wan_reports_retransmitted_segments(two_clusters, tmp_path):
    out = tmp_path / "tcp.json"
    before = emulator.counters()[("a-b", "a_to_b")]["drop_loss"]
    try:
        assert wanmpi("link", "set", "a-b", "--loss", "1%").returncode == 0
        done = wanmpi("run", "-n", "2", "--map", "a0,b0", "--tcp-stats-json", str(out),
                      program("openmpi", "where"), "--bytes", "2000000")
    finally:
        assert wanmpi("link", "set", "a-b", "--loss", "0").returncode == 0
    assert done.returncode == 0, done.stdout + done.stderr
    assert emulator.counters()[("a-b", "a_to_b")]["drop_loss"] > before
    data = json.loads(out.read_text())
    assert set(data["nodes"]) == {"a0", "b0"}
    assert data["total"]["retrans_segs"] > 0
    assert data["total"]["out_segs"] > 2 * 2_000_000 // 1500
    assert data["total"]["notes"] == []
    assert "wanmpi: TCP during the job" in done.stderr and "retransmitted segments" in done.stderr


def test_job_on_an_idle_lossless_wan_has_no_retransmission_timeout(two_clusters, tmp_path):
    out = tmp_path / "tcp.json"
    done = wanmpi("run", "-n", "2", "--map", "a0,b0", "--tcp-stats", "--tcp-stats-json", str(out),
                  program("openmpi", "where"))
    assert done.returncode == 0, done.stdout + done.stderr
    total = json.loads(out.read_text())["total"]
    assert total["rto"] == 0 and total["out_segs"] > 0 and total["notes"] == []
    assert "retransmission timeouts (RTO)          0" in done.stderr


def test_measure_reads_real_hosts_through_the_remote_shell(two_clusters, monkeypatch, tmp_path):
    # the testbed's ns-exec agent stands in for ssh: real-host mode, testbed counters
    monkeypatch.setattr(paths, "REMOTE_SHELL", str(paths.NS_EXEC_AGENT))
    real = tmp_path / "real.toml"
    real.write_text("".join(f'[[cluster]]\nname = "{c.name}"\nhosts = ["{c.name}3"]\nnetwork = "{c.network}"\n'
                            for c in two_clusters.clusters))
    hosts = topo.load(real)
    with tcpstats.measure(hosts) as m:
        pass
    assert set(m.delta.nodes) == {"a3", "b3"}
    assert m.delta.total.notes == ()
    direct = tcpstats.snapshot(two_clusters, [two_clusters.node("a3")]).nodes["a3"]
    assert m.after.nodes["a3"].values() == direct.values()        # idle node: the same counters
