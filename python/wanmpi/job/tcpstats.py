"""TCP retransmission accounting: what the kernels' TCP did during a job.

Every node's /proc/net/netstat (TcpExt) and /proc/net/snmp (Tcp) is read
before and after the job; the differences, summed over the nodes, say how
many retransmission timeouts (RTOs) fired, how many segments were sent
again, how many tail-loss probes and fast recoveries there were. On the
testbed each node is a network namespace with counters of its own (read with
`ip netns exec`); on real clusters the counters are the host's, read through
the remote shell `wanmpi run` launches with (paths.REMOTE_SHELL), and include
whatever else the host did meanwhile.

    with tcpstats.measure(topo, job.ranks) as m:
        launch.run_job(mpi, job)
    print(m.delta.total.rto, m.delta.total.retrans_segs)

or `before = snapshot(...)`, `after = snapshot(...)`, `after.delta(before)`.
Reading never raises: a counter the kernel does not have counts as 0 and a
node that cannot be read counts as all zeros, each with a note in the result.
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

from .. import paths
from ..topo import Node, Topology

PROC_FILES = ("/proc/net/netstat", "/proc/net/snmp")
READ_TIMEOUT = 20.0          # seconds per node (ssh to a real host may be slow)


def _counter(label: str, *sources: str) -> int:
    """A TcpStats field: the sum of the named kernel counters ("Section.Name")."""
    return field(default=0, metadata={"label": label, "sources": sources})


@dataclass(frozen=True)
class TcpStats:
    """TCP counters of one node or a sum of nodes (a snapshot or a difference).

    Every field is the kernel counter(s) in its metadata["sources"]."""
    rto: int = _counter("retransmission timeouts (RTO)", "TcpExt.TCPTimeouts")
    spurious_rto: int = _counter("RTOs found spurious (F-RTO)", "TcpExt.TCPSpuriousRTOs")
    rto_retrans: int = _counter("segments resent after an RTO", "TcpExt.TCPSlowStartRetrans")
    retrans_segs: int = _counter("retransmitted segments", "Tcp.RetransSegs")
    out_segs: int = _counter("segments sent", "Tcp.OutSegs")
    in_segs: int = _counter("segments received", "Tcp.InSegs")
    loss_probes: int = _counter("tail-loss probes (TLP)", "TcpExt.TCPLossProbes")
    loss_probe_recoveries: int = _counter("losses repaired by a TLP", "TcpExt.TCPLossProbeRecovery")
    fast_retrans: int = _counter("fast retransmits", "TcpExt.TCPFastRetrans")
    sack_recoveries: int = _counter("SACK recoveries", "TcpExt.TCPSackRecovery")
    reno_recoveries: int = _counter("recoveries without SACK", "TcpExt.TCPRenoRecovery")
    lost_retrans: int = _counter("retransmissions lost again", "TcpExt.TCPLostRetransmit")
    dsack_recv: int = _counter("needless retransmissions (D-SACK)", "TcpExt.TCPDSACKRecv")
    syn_retrans: int = _counter("SYN retransmissions", "TcpExt.TCPSynRetrans")
    drops: int = _counter("segments dropped by the receiving TCP", "TcpExt.TCPBacklogDrop",
                          "TcpExt.TCPOFODrop", "TcpExt.TCPRcvQDrop", "TcpExt.TCPZeroWindowDrop")
    notes: tuple[str, ...] = ()    # what could not be read (counted as 0)

    @classmethod
    def counter_fields(cls) -> list:
        return [f for f in fields(cls) if "sources" in f.metadata]

    @classmethod
    def from_counters(cls, counters: dict[str, int], notes: Iterable[str] = ()) -> "TcpStats":
        """From parsed counters ("Section.Name" -> value); absent ones count as 0 with a note."""
        values: dict = {}
        missing = []
        for f in cls.counter_fields():
            total = 0
            for source in f.metadata["sources"]:
                if source in counters:
                    total += counters[source]
                else:
                    missing.append(source)
            values[f.name] = total
        found_notes = list(notes)
        if missing:
            found_notes.append(f"missing counters, taken as 0: {', '.join(missing)}")
        return cls(**values, notes=tuple(found_notes))

    def values(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in self.counter_fields()}

    def delta(self, before: "TcpStats") -> "TcpStats":
        """self - before. A counter that went backwards (the node's namespace
        was rebuilt, the host rebooted) contributes its value after, with a note."""
        values, reset = {}, []
        for name, after in self.values().items():
            prior = getattr(before, name)
            values[name] = after - prior if after >= prior else after
            if after < prior:
                reset.append(name)
        notes = _unique(before.notes + self.notes)
        if reset:
            notes += (f"counters went backwards (counted from 0): {', '.join(reset)}",)
        return TcpStats(**values, notes=notes)

    def __add__(self, other: "TcpStats") -> "TcpStats":
        values = {name: v + getattr(other, name) for name, v in self.values().items()}
        return TcpStats(**values, notes=_unique(self.notes + other.notes))

    @property
    def retrans_share(self) -> float:
        """Retransmitted segments per segment sent (0 if nothing was sent)."""
        return self.retrans_segs / self.out_segs if self.out_segs > 0 else 0.0

    def as_dict(self) -> dict:
        return {**self.values(), "notes": list(self.notes)}


def _unique(notes: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(notes))


# ---- parsing -------------------------------------------------------------------
def parse(text: str) -> tuple[dict[str, int], list[str]]:
    """Counters of /proc/net/netstat and /proc/net/snmp text (either or both,
    concatenated): pairs of lines "Section: Name1 Name2 ..." and "Section: v1 v2 ...".
    Returns ("Section.Name" -> value, notes on what was malformed)."""
    counters: dict[str, int] = {}
    notes: list[str] = []
    header: tuple[str, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        section, sep, rest = line.partition(":")
        if not sep or not section or " " in section.strip():
            if line.strip():
                notes.append(f"line {number}: not 'Section: ...', ignored")
            continue
        section, words = section.strip(), rest.split()
        if header is None or header[0] != section:
            if header is not None:
                notes.append(f"line {number}: section {header[0]} has names but no values")
            header = (section, words)
            continue
        names = header[1]
        header = None
        if len(words) != len(names):
            notes.append(f"line {number}: {section} has {len(names)} names but {len(words)} values")
        for name, word in zip(names, words):
            try:
                counters[f"{section}.{name}"] = int(word)
            except ValueError:
                notes.append(f"line {number}: {section}.{name} = {word!r} is not a number")
    if header is not None:
        notes.append(f"section {header[0]} has names but no values")
    return counters, notes


def stats_from_text(text: str, notes: Iterable[str] = ()) -> TcpStats:
    counters, parse_notes = parse(text)
    return TcpStats.from_counters(counters, [*notes, *parse_notes])


# ---- reading nodes ---------------------------------------------------------------
def read_command(node: Node) -> list[str]:
    """How to print a node's counters: inside its namespace on the testbed,
    through the remote shell on a real host."""
    if node.emulated:
        return ["ip", "netns", "exec", node.netns, "cat", *PROC_FILES]
    return [paths.REMOTE_SHELL, node.name, "cat " + " ".join(PROC_FILES)]


@dataclass(frozen=True)
class Snapshot:
    """Counters per node (a reading, or the difference of two readings)."""
    nodes: dict[str, TcpStats]
    taken_at: float = field(default_factory=time.time)    # seconds since the epoch
    seconds: float | None = None                          # for a difference: the time between

    @property
    def total(self) -> TcpStats:
        """The sum over the nodes; notes name the node they come from."""
        total = TcpStats()
        for name, stats in self.nodes.items():
            total = total + TcpStats(**stats.values(), notes=tuple(f"{name}: {n}" for n in stats.notes))
        return total

    def delta(self, before: "Snapshot") -> "Snapshot":
        """Per node: self - before. A node read only once counts as all zeros."""
        nodes = {}
        for name, after in self.nodes.items():
            if name in before.nodes:
                nodes[name] = after.delta(before.nodes[name])
            else:
                nodes[name] = TcpStats(notes=("not read before the job: left out",))
        for name in before.nodes.keys() - self.nodes.keys():
            nodes[name] = TcpStats(notes=("not read after the job: left out",))
        return Snapshot(nodes, self.taken_at, self.taken_at - before.taken_at)

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "taken_at": self.taken_at, "total": self.total.as_dict(),
                "nodes": {name: s.as_dict() for name, s in self.nodes.items()}}


def snapshot(topo: Topology, nodes: Iterable[Node] | None = None) -> Snapshot:
    """Read the counters of `nodes` (default: every node of the topology) at
    once. Never raises: a node that cannot be read gets zeros and a note."""
    chosen = list(dict.fromkeys(nodes if nodes is not None else topo.nodes))
    started: dict[str, subprocess.Popen | str] = {}
    for node in chosen:
        try:
            started[node.name] = subprocess.Popen(read_command(node), stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE, text=True)
        except OSError as e:
            started[node.name] = f"cannot read its counters: {e}"
    taken_at = time.time()
    result = {}
    for name, proc in started.items():
        if isinstance(proc, str):
            result[name] = TcpStats(notes=(proc,))
            continue
        try:
            out, err = proc.communicate(timeout=READ_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            result[name] = TcpStats(notes=(f"reading its counters took over {READ_TIMEOUT:g} s",))
            continue
        if proc.returncode != 0 and not out.strip():
            detail = err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
            result[name] = TcpStats(notes=(f"cannot read its counters: {detail}",))
            continue
        result[name] = stats_from_text(out)
    return Snapshot(result, taken_at)


@dataclass
class Measurement:
    """Counters before and after a block of code (see `measure`)."""
    before: Snapshot
    after: Snapshot | None = None

    @property
    def delta(self) -> Snapshot:
        if self.after is None:
            raise RuntimeError("the measurement has not ended yet")
        return self.after.delta(self.before)


@contextmanager
def measure(topo: Topology, nodes: Iterable[Node] | None = None) -> Iterator[Measurement]:
    """Snapshot the nodes' counters before and after the block; `.delta` after it."""
    chosen = list(nodes) if nodes is not None else None
    m = Measurement(snapshot(topo, chosen))
    try:
        yield m
    finally:
        m.after = snapshot(topo, chosen)


# ---- reporting ----------------------------------------------------------------------
def report(delta: Snapshot) -> str:
    """A few lines for people: the sums over the nodes of a difference."""
    t = delta.total
    names = list(delta.nodes)
    shown = ", ".join(names) if len(names) <= 8 else f"{', '.join(names[:8])}, ..."
    took = f" in {delta.seconds:.1f} s" if delta.seconds is not None else ""
    lines = [f"TCP during the job{took}, summed over {len(names)} node(s) ({shown}):",
             f"  retransmission timeouts (RTO)  {t.rto:>9}   spurious {t.spurious_rto}, "
             f"segments resent after them {t.rto_retrans}",
             f"  retransmitted segments         {t.retrans_segs:>9}   of {t.out_segs} sent "
             f"({100 * t.retrans_share:.3g} %)",
             f"  tail-loss probes (TLP)         {t.loss_probes:>9}   repaired a loss: {t.loss_probe_recoveries}",
             f"  fast retransmits               {t.fast_retrans:>9}   SACK recoveries {t.sack_recoveries}, "
             f"without SACK {t.reno_recoveries}",
             f"  retransmissions lost again     {t.lost_retrans:>9}   needless (D-SACK) {t.dsack_recv}, "
             f"SYN {t.syn_retrans}",
             f"  dropped by the receiving TCP   {t.drops:>9}"]
    lines += [f"  note: {n}" for n in t.notes]
    return "\n".join(lines)


def write_json(path: str | Path, delta: Snapshot) -> None:
    Path(path).write_text(json.dumps(delta.as_dict(), indent=1) + "\n")
