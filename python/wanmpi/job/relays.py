"""The relays of a job, on the emulated testbed or on real relay hosts (over
ssh, remote_relay.py): their configuration, their processes, and what the
ranks need to use them.

With `relays = N` in a topology, every cluster has N relay nodes
(testbed/net.py builds them). For a job that spans clusters, `wanmpi run`
starts one wanrelay per relay node (`RelaySet.start`), waits until every
trunk is authenticated, gives the job `environment()` (the shim sends each
connect to another cluster through a relay of its own cluster), watches the
relays while the job runs and stops them afterwards. Each job gets a fresh
pre-shared key.

Pairing (the IMPI relay paper's trunks): relay k of a cluster with n relays
pairs with relay k mod m of every other cluster with m relays, for k up to
max(n, m). Each pair keeps `[relay] connections` TCP trunks; a relay reaches
the nodes of the far cluster through its pairs there. The shim picks the
relay of its own cluster by destination host, so traffic spreads over the
pairs host by host.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..testbed import emulator, net
from ..topo import RELAY_METRICS_PORT, RELAY_OUTSIDE_PORT, Relay, Topology
from . import remote_relay

LAST_LOGS = paths.STATE_DIR / "relay-logs"       # the last job's relays: <name>.log, <name>.metrics
START_TIMEOUT_S = 15.0          # every trunk authenticated within this
TRUNK_RECONNECT_MIN, TRUNK_RECONNECT_MAX = "20ms", "2s"
# how often trunks are looked at while they come up: a remote relay's log is
# read here (cheap); an emulated relay's metrics need a process in its namespace
START_POLL_S = {"remote": 0.02, "emulated": 0.1}
PACING_SHARE = 0.95             # "auto" pacing: this share of the bottleneck
TRUNK_UP = re.compile(r'^wanrelay_trunk_up\{peer="([^"]+)",trunk="(\d+)"\} (\d+)', re.M)
RBUDP_UP = re.compile(r'^wanrelay_rbudp_up\{peer="([^"]+)",trunk="(\d+)"\} (\d+)', re.M)
# wanrelay's log when a trunk's connect fails or times out (the dialing side; it retries)
NOT_CONNECTED = re.compile(r'(?:cannot connect to peer relay|connect to peer relay (timed out)); retrying '
                           r'peer="?([\w.-]+)"? slot=\d+ addr=(\S+)(?: error=(.*?))? failures=\d+')


# Relay nodes stand for machines of their own; on the testbed their processes
# share two cores with the ranks, the launchers and the emulator. They run at
# real-time priority 1 (below the emulator's 50, ARCHITECTURE.md "Testbed
# fidelity"), so they never wait behind ranks or launchers, and off the
# emulator's CPU, where they would wait behind its real-time releases.
# Measured at 0 ms, 3 alternating runs each, median latency added per relay
# (docs/benchmarks.md, "Relays against direct connections"): normal priority
# 17.5 us (Open MPI) / 28.1 us (MPICH); real-time 17.6 / 17.0 us (another
# series: 14.2 / 23.4 us); real-time off the emulator's CPU 10.4 / 5.7 us.
def relay_launch() -> list[str]:
    """The command prefix a relay process starts with."""
    prefix = ["chrt", "-f", "1"]
    cpu = emulator.cpu()
    if cpu:                       # every CPU but the emulator's (the last)
        prefix = ["taskset", "-c", f"0-{cpu - 1}", *prefix]
    return prefix


class RelayError(RuntimeError):
    """The relays could not be configured or started; the message says why."""


# ---- configuration -------------------------------------------------------------------
def pairs(topo: Topology) -> list[tuple[Relay, Relay]]:
    """Every relay pair, once: (relay of the earlier cluster, relay of the later)."""
    out = []
    clusters = [c for c in topo.clusters if c.relay_nodes]
    for i, x in enumerate(clusters):
        for y in clusters[i + 1:]:
            for k in range(max(len(x.relay_nodes), len(y.relay_nodes))):
                pair = (x.relay_nodes[k % len(x.relay_nodes)], y.relay_nodes[k % len(y.relay_nodes)])
                if pair not in out:
                    out.append(pair)
    return out


def path_rate(topo: Topology, a: str, b: str) -> int:
    """The slowest WAN link on the route from cluster a to cluster b, bits/s."""
    rate, here = None, a
    while here != b:
        link = topo.next_hops(here)[b]
        rate = link.rate_bps if rate is None else min(rate, link.rate_bps)
        here = link.b if link.a == here else link.a
    return rate or 0


def pacing_bps(topo: Topology, x: Relay, y: Relay) -> int | None:
    """The rate of relay x's trunks toward y (bits/s), or None: not paced."""
    setting = topo.relay.pacing
    if setting == "off":
        return None
    if setting != "auto":
        return int(setting)
    sharing = sum(1 for p in pairs(topo) if {p[0].cluster, p[1].cluster} == {x.cluster, y.cluster})
    bottleneck = min(x.nic_bps, y.nic_bps, path_rate(topo, x.cluster, y.cluster) // sharing)
    return int(bottleneck * PACING_SHARE)


def check_rbudp_rate(topo: Topology, x: Relay, y: Relay) -> None:
    """The blasts of every relay pair between two clusters together must fit
    the WAN path between them and the relays' NICs: RBUDP does not back off."""
    s = topo.relay
    sharing = sum(1 for p in pairs(topo) if {p[0].cluster, p[1].cluster} == {x.cluster, y.cluster})
    path = path_rate(topo, x.cluster, y.cluster)
    if s.rbudp_rate_bps * sharing > path or s.rbudp_rate_bps > min(x.nic_bps, y.nic_bps):
        raise RelayError(f"{topo.source}: [relay] rbudp_rate {s.rbudp_rate_bps / 1e6:g} Mbit/s per relay pair "
                         f"x {sharing} pair(s) between clusters {x.cluster} and {y.cluster} exceeds the WAN path "
                         f"({path / 1e6:g} Mbit/s) or a relay NIC ({min(x.nic_bps, y.nic_bps) / 1e6:g} Mbit/s): "
                         "blasts would overflow the link; lower rbudp_rate")


def config(topo: Topology, relay: Relay, key_file: Path) -> dict:
    """wanrelay's configuration (docs/wanrelay.md) for one relay node."""
    cluster = topo.cluster(relay.cluster)
    rbudp = topo.relay.transport == "rbudp"
    peers = []
    for x, y in pairs(topo):
        if relay not in (x, y):
            continue
        peer = y if relay == x else x
        entry = {"name": peer.name, "cluster": peer.cluster, "addresses": [peer.outside_endpoint],
                 "reachable": [topo.cluster(peer.cluster).network],
                 "trunks": topo.relay.connections}
        rate = pacing_bps(topo, relay, peer)
        if rate:
            entry["pacing_rate"] = f"{rate}bit"
        if rbudp:
            check_rbudp_rate(topo, relay, peer)
            entry.update(transport="rbudp", rate=f"{topo.relay.rbudp_rate_bps}bit",
                         payload=topo.relay.rbudp_payload, rbudp_streams=topo.relay.rbudp_streams)
        peers.append(entry)
    return {
        "name": relay.name, "cluster": relay.cluster, "key_file": str(key_file),
        "log_level": "info",
        **({"busy_poll": f"{topo.relay.busy_poll_us}us"} if topo.relay.busy_poll_us else {}),
        "inside": {"listen": [relay.inside_endpoint], "members": [f"{n.address}/32" for n in cluster.nodes],
                   "bind": relay.inside},
        "outside": {"listen": [relay.outside_endpoint], "bind": relay.outside,
                    **({"udp_listen": relay.outside_endpoint} if rbudp else {})},
        "metrics": {"listen": f"127.0.0.1:{RELAY_METRICS_PORT}"},
        # a job's relays start within a few hundred ms of each other: the dialer
        # retries a peer not yet listening after 20 ms, not wanrelay's 100 ms
        # doubling (200 ms lost per trunk at start, docs/benchmarks.md)
        "trunk": {"reconnect_min": TRUNK_RECONNECT_MIN, "reconnect_max": TRUNK_RECONNECT_MAX},
        "peer": peers,
    }


def environment(topo: Topology) -> dict[str, str]:
    """What every process of the job needs to relay: each cluster's relays in
    index order (the shim takes its own cluster's entry)."""
    return {"WANMPI_RELAYS": ";".join(
        f"{c.name}=" + ",".join(r.inside_endpoint for r in c.relay_nodes) for c in topo.clusters)}


def expected_trunks(topo: Topology, relay: Relay) -> set[tuple[str, int]]:
    peers = [y if relay == x else x for x, y in pairs(topo) if relay in (x, y)]
    return {(p.name, k) for p in peers for k in range(topo.relay.connections)}


# ---- processes ---------------------------------------------------------------------------
@dataclass
class Running:
    relay: Relay
    proc: subprocess.Popen
    log: Path


class RelaySet:
    """The relays of one job: started together, watched, stopped together.

    Use as a context manager: everything is stopped and its files removed on
    exit, also after a failure."""

    def __init__(self, topo: Topology, tag: str):
        if not topo.has_relays:
            raise RelayError(f"{topo.source}: no relays (set relays = N in the clusters)")
        self.topo = topo
        self.dir = paths.STATE_DIR / f"relays-{tag}"
        self.running: list[Running] = []

    def __enter__(self) -> "RelaySet":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start every relay and wait until all trunks are authenticated."""
        if not paths.WANRELAY.is_file():
            raise RelayError(f"{paths.WANRELAY} is not built (run `make build`)")
        self.dir.mkdir(parents=True, exist_ok=True)
        key = self.dir / "psk"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        for relay in self.topo.relays:
            log = self.dir / f"{relay.name}.log"
            if relay.emulated:
                conf = self.dir / f"{relay.name}.json"
                conf.write_text(json.dumps(config(self.topo, relay, key), indent=1))
                with open(log, "w") as out:
                    proc = subprocess.Popen(net.in_netns(relay.netns, [*relay_launch(), str(paths.WANRELAY),
                                                                       "--config", str(conf)]),
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
            else:
                proc = remote_relay.start(relay, config(self.topo, relay, Path(remote_relay.KEY_FILE)),
                                          key.read_text(), log)
            self.running.append(Running(relay, proc, log))
        self.wait_for_trunks(timeout)

    def wait_for_trunks(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = self.dead()
            if dead:
                raise RelayError(f"relay {dead[0].relay.name} exited at start: {self.tail(dead[0])}")
            # with rbudp, also every trunk's RBUDP session: a blast request on a
            # stream opened before it is up would stay on TCP
            missing = [(r, t) for r in self.running for t in sorted(expected_trunks(self.topo, r.relay))
                       if t not in self.up(r)]
            if not missing:
                return
            if time.monotonic() > deadline:
                r, (peer, k) = missing[0]
                what = "trunk" if self.topo.relay.transport == "tcp" else "trunk (or its RBUDP session)"
                raise RelayError(f"relay {r.relay.name}: {what} {k} to {peer} not up after {timeout:g} s "
                                 f"({len(missing)} trunk(s) missing)" + (self.unreached() or
                                                                         f"; its log: {self.tail(r)}"))
            time.sleep(START_POLL_S["emulated" if any(r.relay.emulated for r in self.running) else "remote"])

    def unreached(self) -> str:
        """What the relays' logs say about peers they could not connect to
        (the last attempt per pair), with what must be open; '' if nothing."""
        last: dict[tuple[str, str], tuple[str, str]] = {}
        for r in self.running:
            try:
                text = r.log.read_text(errors="replace")
            except OSError:
                continue
            for timed_out, peer, address, error in NOT_CONNECTED.findall(text):
                last[(r.relay.name, peer)] = (address, error.strip() or timed_out)
        if not last:
            return ""
        said = "; ".join(f"{dialer} could not connect to {peer} at {address} ({error})"
                         for (dialer, peer), (address, error) in last.items())
        return (f": {said}. The peer relays' outside addresses were not reached: they must be reachable "
                f"from the other site's relays on TCP port {RELAY_OUTSIDE_PORT} (open it in the firewalls "
                "between the sites; if both clusters are private, at least one side's relays need an outside "
                "address the other side reaches: docs/real-clusters.md, \"Private clusters: relays\")")

    def up(self, r: Running) -> set[tuple[str, int]]:
        """The trunks of a relay that are up (with rbudp, with their RBUDP session)."""
        if not r.relay.emulated:
            return remote_relay.trunks_up(r.log, self.topo.relay.transport == "rbudp")
        return (trunks_up if self.topo.relay.transport == "tcp" else rbudp_up)(r.relay)

    def dead(self) -> list[Running]:
        return [r for r in self.running if r.proc.poll() is not None]

    def tail(self, r: Running, lines: int = 3) -> str:
        try:
            text = r.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        # each relay's counters at the end of the job, kept beside its log
        for r in self.running:
            if r.relay.emulated and r.proc.poll() is None:
                try:
                    (self.dir / f"{r.relay.name}.metrics").write_text(metrics(r.relay))
                except (OSError, subprocess.SubprocessError):
                    pass
        remote_relay.stop([r.proc for r in self.running if not r.relay.emulated])
        alive = [r.proc.pid for r in self.running if r.proc.poll() is None]
        net.kill_pids(alive, grace=6.0)         # wanrelay's own shutdown grace is 5 s
        for r in self.running:
            r.proc.wait()
        self.running = []
        # the logs and final counters of the last job's relays stay for a look
        # afterwards; config and key go
        shutil.rmtree(LAST_LOGS, ignore_errors=True)
        if self.dir.is_dir():
            LAST_LOGS.mkdir(parents=True)
            for kept in [*self.dir.glob("*.log"), *self.dir.glob("*.metrics")]:
                kept.replace(LAST_LOGS / kept.name)
        shutil.rmtree(self.dir, ignore_errors=True)


def metrics(relay: Relay) -> str:
    """The relay's Prometheus text, fetched inside its namespace ('' if it does not answer)."""
    fetch = ("import urllib.request,sys\n"
             f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{RELAY_METRICS_PORT}/metrics', "
             "timeout=2).read().decode())")
    done = subprocess.run(net.in_netns(relay.netns, ["python3", "-c", fetch]), capture_output=True,
                          text=True, timeout=10)
    return done.stdout if done.returncode == 0 else ""


SAMPLE = re.compile(r"^(\w+)(\{[^}]*\})? (\S+)$", re.M)


def final_counters(relay_name: str) -> dict[tuple[str, str], float]:
    """(metric name, labels text) -> value: the relay's counters at the end of
    the last job (kept in LAST_LOGS); empty if it left none."""
    try:
        text = (LAST_LOGS / f"{relay_name}.metrics").read_text()
    except OSError:
        return {}
    return {(m.group(1), m.group(2) or ""): float(m.group(3)) for m in SAMPLE.finditer(text)}


def counter_total(counters: dict[tuple[str, str], float], name: str, **labels: str) -> float:
    """The sum of metric `name` over the samples whose labels include `labels`."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for (n, l), v in counters.items() if n == name and all(w in l for w in want))


def trunks_up(relay: Relay) -> set[tuple[str, int]]:
    return {(peer, int(k)) for peer, k, up in TRUNK_UP.findall(metrics(relay)) if up == "1"}


def rbudp_up(relay: Relay) -> set[tuple[str, int]]:
    """Trunks whose trunk and RBUDP session are both up."""
    text = metrics(relay)
    trunks = {(peer, int(k)) for peer, k, up in TRUNK_UP.findall(text) if up == "1"}
    return trunks & {(peer, int(k)) for peer, k, up in RBUDP_UP.findall(text) if up == "1"}
