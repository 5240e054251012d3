"""The measurements of `wanmpi bench emulator` (wanem.py) on one WAN link,
one method of `Bench` per part: rtt, tcp, loss, load and capacity. Each
records what the emulator counted meanwhile (`EmulatorShare`), changes the
link's settings as it needs them and puts them back.
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from .. import shell, units
from ..testbed import emulator, net, probe
from ..topo import UDP_IP_HEADERS, Cluster, Topology, WanLink
from .runner import BEHIND_LATE_1MS, BEHIND_LATE_200US

FAST_RATE_BPS = 1_000_000_000        # the second TCP rate
CAPACITY_RATE_BPS = 1_000_000_000_000   # lifts the rate limit: only wanem's speed counts
CAPACITY_QUEUE_BYTES = 1 << 30
CAPACITY_START_BPS = 250e6           # first offered rate, then doubled, then bisected
CAPACITY_MAX_STEPS = 8
LOSS_SEED = 1003                     # the loss PRNG restarts from this seed: reproducible
LOSS_PAYLOAD = 64                    # small datagrams: many samples, little load
TCP_BUFFER_MAX = 16 << 20            # tcp_rmem/tcp_wmem ceiling while measuring TCP
CAPACITY_LOSS = 0.01                 # "under 1 % extra loss"


@dataclass(frozen=True)
class Plan:
    rtt_delays_ms: tuple[int, ...] = (1, 5, 10, 20)
    rtt_count: int = 50
    tcp_cases: tuple[tuple[int | None, str, int], ...] = tuple(   # (rate or None = the link's, cc, flows)
        (rate, cc, n) for rate in (None, FAST_RATE_BPS) for cc in ("cubic", "bbr") for n in (1, 4))
    tcp_seconds: float = 5.0
    tcp_warmup: float = 2.0
    loss_cases: tuple[tuple[float, int, int], ...] = ((0.001, 400_000, 50_000), (0.01, 100_000, 50_000))
    load_seconds: float = 5.0
    capacity_mtus: tuple[int, ...] = (1500, 9000)
    capacity_seconds: float = 2.0
    capacity_refine: int = 3


FULL = Plan()
QUICK = Plan(rtt_delays_ms=(1, 10), rtt_count=10,
             tcp_cases=((None, "bbr", 1), (None, "cubic", 4), (FAST_RATE_BPS, "bbr", 1)),
             tcp_seconds=1.0, tcp_warmup=0.5,
             loss_cases=((0.01, 20_000, 50_000),), load_seconds=1.0,
             capacity_mtus=(1500, 9000), capacity_seconds=0.5, capacity_refine=0)


# ---- what the emulator counted ------------------------------------------------------------
@dataclass
class EmulatorShare:
    """What the emulator counted during one measurement, both directions of the link."""
    seconds: float
    released: int            # packets written to the far end (or refused by it)
    late_200us: int
    late_1ms: int
    mean_late_us: float
    drop_queue: int
    drop_loss: int
    drop_tx: int
    wanem_cpu: float         # share of one core
    wanem_core_irq: float    # share of wanem's core spent in interrupts and softirqs
    cpu_idle: float          # share of the whole machine
    behind: bool


@dataclass
class Reading:
    time: float
    counters: dict
    ticks: dict[str, list[int]]
    wanem_cpu_s: float


def read_emulator() -> Reading:
    state = net.State.load()
    cpu = probe.process_cpu_seconds(state.wanem_pid) if state and state.wanem_pid else 0.0
    return Reading(time.monotonic(), emulator.counters(), probe.cpu_ticks(), cpu)


def delta(before: Reading, after: Reading, link: str, direction: str) -> dict[str, int]:
    b, a = before.counters[(link, direction)], after.counters[(link, direction)]
    return {k: a[k] - b[k] for k in a if k != "queue_bytes" and k != "late_max_ns"}


def usage(before: Reading, after: Reading) -> tuple[float, float, float]:
    """Between two readings: wanem's CPU (share of one core), the share of
    wanem's core spent in interrupts and softirqs, the machine's idle share."""
    seconds = after.time - before.time

    def share(line: str, fields: slice) -> float:
        d = [a - b for a, b in zip(after.ticks.get(line, []), before.ticks.get(line, []))]
        return sum(d[fields]) / sum(d) if d and sum(d) else 0.0
    core = f"cpu{emulator.cpu()}" if emulator.cpu() is not None else "cpu"
    return ((after.wanem_cpu_s - before.wanem_cpu_s) / seconds if seconds > 0 else 0.0,
            share(core, slice(5, 7)), share("cpu", slice(3, 5)))


def released(snap: Reading, link: str) -> int:
    """Packets the emulator has released on `link`, both directions."""
    return sum(snap.counters[(link, d)]["tx_packets"] + snap.counters[(link, d)]["drop_tx"]
               for d in emulator.DIRECTIONS)


def share_since(before: Reading, link: str, busy: tuple[Reading, Reading] | None = None) -> EmulatorShare:
    """What the emulator counted on `link` since `before`; the CPU shares over
    `busy` if given (the steady part of the traffic, without start-up and the
    wait after it)."""
    after = read_emulator()
    d = [delta(before, after, link, direction) for direction in emulator.DIRECTIONS]
    total = {k: sum(x[k] for x in d) for k in d[0]}
    count = total["tx_packets"] + total["drop_tx"]
    wanem_cpu, core_irq, cpu_idle = usage(*(busy or (before, after)))
    return EmulatorShare(
        seconds=after.time - before.time, released=count, late_200us=total["late_200us"],
        late_1ms=total["late_1ms"], mean_late_us=total["late_sum_ns"] / count / 1000 if count else 0.0,
        drop_queue=total["drop_queue"], drop_loss=total["drop_loss"], drop_tx=total["drop_tx"],
        wanem_cpu=wanem_cpu, wanem_core_irq=core_irq, cpu_idle=cpu_idle,
        behind=(total["late_200us"] > BEHIND_LATE_200US * count
                or total["late_1ms"] > BEHIND_LATE_1MS * count or total["drop_tx"] > 0))


def marker() -> tuple[dict, object]:
    """A dict of readings and the `between` callback of the probes that fills it."""
    marks: dict[str, Reading] = {}
    return marks, lambda event: marks.__setitem__(event, read_emulator())


# ---- results ---------------------------------------------------------------------------------
@dataclass
class RttRow:
    delay_ms: float
    path: str
    count: int
    expected_ms: float
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    emulator: EmulatorShare

    @property
    def excess_ms(self) -> float:
        return self.median_ms - self.expected_ms


@dataclass
class TcpRow:
    rate_bps: int
    queue_bytes: int
    cc: str
    flows: int
    path: str
    seconds: float
    goodput_bps: float
    bound_bps: float
    emulator: EmulatorShare

    @property
    def of_rate(self) -> float:
        return self.goodput_bps / self.rate_bps

    @property
    def of_bound(self) -> float:
        return self.goodput_bps / self.bound_bps


@dataclass
class LossRow:
    configured: float
    emulator_arrivals: int       # datagrams that reached wanem
    emulator_dropped: int        # dropped by its loss PRNG
    emulator_measured: float     # dropped / arrivals: the emulator's loss itself
    emulator_ci95: tuple[float, float]
    sent: int
    received: int
    lost: int
    measured: float              # lost / sent: what an application sees
    ci95: tuple[float, float]
    lost_before_emulator: int    # sent, never read by wanem (TUN ring full)
    lost_at_receiver: int        # UDP receive errors in the receiving namespace
    lost_elsewhere: int          # lost, but not by the emulator's random loss
    emulator: EmulatorShare


@dataclass
class CapacityStep:
    offered_pps: float
    sent_pps: float
    delivered_pps: float
    sent: int
    delivered: int
    lost_before_emulator: int    # the ingress TUN's ring was full: wanem read too slowly
    lost_in_emulator: int        # wanem's own drops (queue, transmit)
    lost_at_receiver: int        # UDP receive errors in the receiving namespace
    sender_cpu: float
    receiver_cpu: float
    emulator: EmulatorShare

    @property
    def loss(self) -> float:
        return 1 - self.delivered / self.sent if self.sent else 1.0

    @property
    def emulator_loss(self) -> float:
        return (self.lost_before_emulator + self.lost_in_emulator) / self.sent if self.sent else 1.0

    @property
    def sender_limited(self) -> bool:
        return self.sent_pps < 0.97 * self.offered_pps


@dataclass
class Capacity:
    mtu: int
    payload: int
    pps: float                   # highest delivered rate with < 1 % loss end to end
    gbit_per_s: float
    emulator_pps: float          # highest delivered rate with < 1 % lost at or in wanem
    wanem_cpu: float             # at `pps`
    limited_by: str
    steps: list[CapacityStep] = field(default_factory=list)


@dataclass
class Load:
    flows: int
    path: str
    goodput_bps: float
    pps: float                   # packets through wanem, both directions
    emulator: EmulatorShare


# ---- settings that are changed and put back -------------------------------------------------------
def set_link(link: str, direction: str = "both", **values) -> None:
    emulator.request({"cmd": "set", "link": link, "dir": direction, **values})


@contextmanager
def raised_tcp_buffers(namespaces: list[str]):
    """Let TCP buffers grow to TCP_BUFFER_MAX (a 1 Gbit/s flow with 1 BDP queued
    needs more than the default 4 MB of send buffer); put the values back after."""
    saved = {}
    try:
        for ns in namespaces:
            for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
                old = shell.output(net.in_netns(ns, ["sysctl", "-n", key])).split()
                saved[(ns, key)] = " ".join(old)
                if int(old[2]) < TCP_BUFFER_MAX:
                    shell.run(net.in_netns(ns, ["sysctl", "-q", "-w", f"{key}={old[0]} {old[1]} {TCP_BUFFER_MAX}"]))
        yield
    finally:
        for (ns, key), value in saved.items():
            shell.run(net.in_netns(ns, ["sysctl", "-q", "-w", f"{key}={value}"]), check=False)


@contextmanager
def emulator_mtu(topo: Topology, link: WanLink, mtu: int):
    """The link's TUN devices and wanem at `mtu` (wanem restarted), back after."""
    if mtu == topo.mtu:
        yield
        return
    try:
        net.restart_emulator(net.State.load(), topo, {link.name: mtu})
        yield
    finally:
        net.restart_emulator(net.State.load(), topo)


# ---- the measurements ----------------------------------------------------------------------------
class Bench:
    def __init__(self, topo: Topology, link: WanLink, plan: Plan, log=None):
        self.topo, self.link, self.plan = topo, link, plan
        self.a, self.b = topo.cluster(link.a), topo.cluster(link.b)
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.saved = emulator.settings()        # every link: a restart of wanem resets them all

    def restore(self) -> None:
        emulator.apply(self.saved)

    def node_pair(self) -> tuple[Cluster, Cluster] | None:
        """A direction whose receiving cluster accepts connections (is public)."""
        for src, dst in ((self.a, self.b), (self.b, self.a)):
            if not dst.private:
                return src, dst
        return None

    # -- RTT
    def rtt(self) -> list[RttRow]:
        rows = []
        pair = self.node_pair()
        for delay in (0, *self.plan.rtt_delays_ms):
            self.log(f"rtt: {delay} ms one-way")
            set_link(self.link.name, delay_us=delay * 1000)
            paths = []
            if pair:
                src, dst = pair
                paths.append((f"node {src.nodes[0].name}->{dst.nodes[0].name}", src.nodes[0].netns,
                              dst.nodes[0].address))
            paths.append((f"router {self.a.name}->{self.b.name}", self.a.router_netns, self.b.public_address))
            if delay == 0:
                paths.append(("own address (no link)", self.a.router_netns, self.a.public_address))
            interval = max(0.05, 4 * delay / 1000)
            for name, ns, address in paths:
                before = read_emulator()
                samples = probe.rtt_samples_ms(ns, address, self.plan.rtt_count, interval)
                rows.append(RttRow(delay, name, len(samples), 0.0 if "own" in name else 2.0 * delay,
                                   statistics.median(samples), statistics.fmean(samples), samples[0],
                                   samples[-1], share_since(before, self.link.name)))
        self.restore()
        return rows

    # -- TCP
    def tcp(self) -> list[TcpRow]:
        rows = []
        routers = [self.a.router_netns, self.b.router_netns]
        path = f"router {self.a.name}->{self.b.name}"
        with raised_tcp_buffers(routers):
            for rate, cc, flows in self.plan.tcp_cases:
                rate = rate or self.saved[(self.link.name, "a_to_b")]["rate_bps"]
                delay_us = self.saved[(self.link.name, "a_to_b")]["delay_us"]
                queue = max(rate * 2 * delay_us // 8_000_000, 2 * self.topo.mtu)
                self.log(f"tcp: {units.format_rate(rate)}, queue {units.format_size(queue)}, {cc}, "
                         f"{flows} flow{'s' if flows > 1 else ''}")
                set_link(self.link.name, rate_bps=rate, queue_bytes=queue, loss=0.0)
                pairs = [(self.a.router_netns, self.b.router_netns, self.b.public_address)] * flows
                before = read_emulator()
                marks, mark = marker()
                result = probe.tcp_flows(pairs, self.plan.tcp_seconds, cc, self.plan.tcp_warmup, mark)
                share = share_since(before, self.link.name, (marks["start"], marks["end"]))
                bound = rate * (self.topo.mtu - probe.TCP_IP_HEADERS) / self.topo.mtu
                rows.append(TcpRow(rate, queue, cc, flows, path, self.plan.tcp_seconds,
                                   result.steady_bits_per_s, bound, share))
        self.restore()
        return rows

    # -- loss
    def loss(self) -> list[LossRow]:
        rows = []
        tun = (self.a.router_netns, emulator.tun_device(self.b.name))
        for configured, count, pps in self.plan.loss_cases:
            self.log(f"loss: {configured:.2%} configured, {count} datagrams")
            set_link(self.link.name, "a_to_b", loss=configured, seed=LOSS_SEED)
            ring0, rcv0 = probe.tx_dropped(*tun), probe.udp_receive_errors(self.b.router_netns)
            before = read_emulator()
            sent, got = probe.udp_probe(self.a.router_netns, self.b.router_netns, self.b.public_address,
                                        LOSS_PAYLOAD, pps=pps, count=count)
            share = share_since(before, self.link.name)
            d = delta(before, read_emulator(), self.link.name, "a_to_b")
            lost = sent["sent"] - got["unique"]
            rows.append(LossRow(
                configured, d["rx_packets"], d["drop_loss"], d["drop_loss"] / max(1, d["rx_packets"]),
                wilson(d["drop_loss"], d["rx_packets"]), sent["sent"], got["unique"], lost,
                lost / sent["sent"], wilson(lost, sent["sent"]), probe.tx_dropped(*tun) - ring0,
                probe.udp_receive_errors(self.b.router_netns) - rcv0, lost - d["drop_loss"], share))
        self.restore()
        return rows

    # -- the default load
    def load(self) -> Load | None:
        pair = self.node_pair()
        if pair is None:
            return None
        src, dst = pair
        n = min(4, len(src.nodes), len(dst.nodes))
        self.log(f"load: {n} TCP flows {src.name}->{dst.name} at the link's own settings")
        self.restore()
        pairs = [(src.nodes[i].netns, dst.nodes[i].netns, dst.nodes[i].address) for i in range(n)]
        before = read_emulator()
        marks, mark = marker()
        result = probe.tcp_flows(pairs, self.plan.load_seconds, warmup=self.plan.tcp_warmup, between=mark)
        share = share_since(before, self.link.name, (marks["start"], marks["end"]))
        start, end = marks["start"], marks["end"]
        pps = (released(end, self.link.name) - released(start, self.link.name)) / (end.time - start.time)
        return Load(n, f"nodes {src.name}->{dst.name}", result.steady_bits_per_s, pps, share)

    # -- capacity
    def capacity(self) -> list[Capacity]:
        out = []
        for mtu in self.plan.capacity_mtus:
            with emulator_mtu(self.topo, self.link, mtu):
                set_link(self.link.name, "a_to_b", rate_bps=CAPACITY_RATE_BPS,
                         queue_bytes=CAPACITY_QUEUE_BYTES, loss=0.0)
                out.append(self.capacity_at(mtu))
        self.restore()
        return out

    def capacity_step(self, payload: int, pps: float) -> CapacityStep:
        tun = (self.a.router_netns, emulator.tun_device(self.b.name))
        ring0, rcv0 = probe.tx_dropped(*tun), probe.udp_receive_errors(self.b.router_netns)
        marks, mark = marker()
        sent, got = probe.udp_probe(self.a.router_netns, self.b.router_netns, self.b.public_address, payload,
                                    pps=pps, seconds=self.plan.capacity_seconds, gso=True, between=mark)
        share = share_since(marks["start"], self.link.name, (marks["start"], marks["end"]))
        d = delta(marks["start"], read_emulator(), self.link.name, "a_to_b")
        seconds = sent["seconds"]
        return CapacityStep(
            offered_pps=pps, sent_pps=sent["sent"] / seconds, delivered_pps=got["unique"] / seconds,
            sent=sent["sent"], delivered=got["unique"],
            lost_before_emulator=probe.tx_dropped(*tun) - ring0,
            lost_in_emulator=d["drop_queue"] + d["drop_loss"] + d["drop_down"] + d["drop_tx"],
            lost_at_receiver=probe.udp_receive_errors(self.b.router_netns) - rcv0,
            sender_cpu=sent["cpu_seconds"] / seconds, receiver_cpu=got["cpu_seconds"] / seconds,
            emulator=share)

    def capacity_at(self, mtu: int) -> Capacity:
        payload = mtu - UDP_IP_HEADERS
        pps = max(1000.0, round(CAPACITY_START_BPS / (8 * mtu), -3))
        steps: list[CapacityStep] = []
        good = bad = None

        def run(rate: float) -> CapacityStep:
            self.log(f"capacity: MTU {mtu}, offering {rate:,.0f} packets/s")
            s = self.capacity_step(payload, rate)
            steps.append(s)
            return s
        for _ in range(CAPACITY_MAX_STEPS):
            s = run(pps)
            if s.loss >= CAPACITY_LOSS:
                bad = s
                break
            good = s
            if s.sender_limited:
                break
            pps *= 2
        for _ in range(self.plan.capacity_refine):
            if good is None or bad is None or good.sender_limited:
                break
            s = run(round((good.offered_pps + bad.offered_pps) / 2, -3))
            if s.loss >= CAPACITY_LOSS:
                bad = s
            else:
                good = s
        passing = [s for s in steps if s.loss < CAPACITY_LOSS]
        best = max(passing, key=lambda s: s.delivered_pps, default=None)
        emu_best = max((s.delivered_pps for s in steps if s.emulator_loss < CAPACITY_LOSS), default=0.0)
        pps_best = best.delivered_pps if best else 0.0
        return Capacity(mtu, payload, pps_best, pps_best * mtu * 8 / 1e9, emu_best,
                        best.emulator.wanem_cpu if best else 0.0, limit_of(bad, good), steps)


def limit_of(bad: CapacityStep | None, good: CapacityStep | None) -> str:
    """What stopped the rate from going higher."""
    if bad is None:
        if good is not None and good.sender_limited:
            return (f"the sender: udpprobe reached {good.sent_pps:,.0f} of {good.offered_pps:,.0f} "
                    "packets/s without loss")
        return "nothing within the steps tried"
    where = {"wanem did not read its TUN device fast enough (ring full)": bad.lost_before_emulator,
             "wanem's own drops": bad.lost_in_emulator,
             "the receiving namespace's UDP socket overflowed (receiver and its stack short of CPU)":
                 bad.lost_at_receiver}
    worst = max(where, key=where.get)
    cpu = f"wanem at {bad.emulator.wanem_cpu:.0%} of its core, sender {bad.sender_cpu:.0%}"
    return f"at {bad.offered_pps:,.0f} packets/s {bad.loss:.1%} lost, mostly {worst} ({cpu})"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
