"""`wanmpi bench rbudp`: goodput of one bulk transfer across the emulated WAN
link with RBUDP (through a wanrelay pair this benchmark starts on the first
node of each cluster) beside direct TCP with cubic and with bbr, at several
random-loss rates.

For every loss rate (set on the link, both directions) and variant, one
transfer of `size` bytes from the first node of the first cluster to the
first node of the second:

  rbudp      source -> relay on a0 (loopback in the node) ==== RBUDP blasts over
             the WAN, TCP trunk as control channel ==== relay on b0 -> sink (loopback)
  tcp-cubic  source on a0 -> sink on b0, one TCP connection, congestion control cubic
  tcp-bbr    the same with bbr

Goodput is the bytes the sink received divided by the time from the
source's connect to the sink's end of stream (one clock: CLOCK_MONOTONIC is
shared by every namespace). A transfer still running after `max_seconds` is
cut there and reported as partial (TCP at 1 % loss would take many minutes
for 1 GB). The bound is the path rate: min(WAN rate, both NICs).

RBUDP sends at `rate` (default 97 % of the path rate) whatever the loss: it
is for dedicated links only (docs/rbudp.md). The relays get their own
configuration and a fresh pre-shared key in a private temporary directory.
Congestion control is set per socket; cubic needs the host's
tcp_allowed_congestion_control to list it, so the benchmark adds it for the
run and puts the list back afterwards (also on Ctrl-C), like `bench pacing`.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import paths, units
from ..testbed import congestion, emulator, net
from ..testbed.probe import HARNESS
from ..topo import RELAY_INSIDE_PORT, RELAY_METRICS_PORT, RELAY_OUTSIDE_PORT, UDP_IP_HEADERS, Node, Topology
from .cases import BenchError
from .results import now_iso, result_document, write_json
from .runner import require_testbed

VARIANTS = ("rbudp", "tcp-cubic", "tcp-bbr")
DEFAULT_LOSSES = "0,0.001,0.01"
WANRELAY = paths.WANRELAY
UDP_PORT, SINK_PORT = 7402, 7410


@dataclass
class Result:
    loss: float
    variant: str
    bytes: int
    seconds: float
    partial: bool
    emulator_drops: int
    datagrams_sent: int | None = None
    datagrams_resent: int | None = None

    @property
    def goodput_bps(self) -> float:
        return 8 * self.bytes / self.seconds if self.seconds > 0 else 0.0


def transfer_cmd(*args: str) -> list[str]:
    return [*HARNESS, sys.executable, "-m", "wanmpi.testbed.transfer", *args]


class RelayPair:
    """wanrelay on the first node of two clusters, RBUDP between them."""

    def __init__(self, topo: Topology, workdir: Path, rate_bps: int, payload: int):
        if not WANRELAY.is_file():
            raise BenchError(f"{WANRELAY} is not built: run `make build`")
        self.topo, self.workdir = topo, workdir
        a, b = topo.clusters[0], topo.clusters[1]
        self.a, self.b = a.nodes[0], b.nodes[0]
        key = workdir / "psk"
        key.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
        key.chmod(0o600)
        self.procs: list[subprocess.Popen] = []
        self.configs = {}
        for me, cluster, peer, peer_cluster, dial in ((self.a, a, self.b, b, "connect"),
                                                      (self.b, b, self.a, a, "accept")):
            text = (f'name = "bench-{me.name}"\ncluster = "{cluster.name}"\nkey_file = "{key}"\n'
                    f'log_level = "warn"\n\n'
                    f'[inside]\nlisten = ["{me.address}:{RELAY_INSIDE_PORT}"]\nmembers = ["{cluster.network}"]\n\n'
                    f'[outside]\nlisten = ["{me.address}:{RELAY_OUTSIDE_PORT}"]\n'
                    f'udp_listen = "{me.address}:{UDP_PORT}"\n\n'
                    f'[metrics]\nlisten = "{me.address}:{RELAY_METRICS_PORT}"\n\n'
                    f'[[peer]]\nname = "bench-{peer.name}"\ncluster = "{peer_cluster.name}"\n'
                    f'addresses = ["{peer.address}:{RELAY_OUTSIDE_PORT}"]\nreachable = ["{peer_cluster.network}"]\n'
                    f'dial = "{dial}"\ntransport = "rbudp"\nrate = "{rate_bps}bit"\npayload = {payload}\n')
            path = workdir / f"{me.name}.toml"
            path.write_text(text)
            self.configs[me.name] = path

    def start(self) -> None:
        for node in (self.b, self.a):
            log = open(self.workdir / f"{node.name}.log", "w")
            self.procs.append(subprocess.Popen(
                net.in_netns(node.netns, [*HARNESS, str(WANRELAY), "--config", str(self.configs[node.name])]),
                stdout=log, stderr=log))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise BenchError(f"a relay exited: {self.log_tail()}")
            if self.metric(self.a, f'wanrelay_rbudp_up{{peer="bench-{self.b.name}",trunk="0"}}') == 1:
                return
            time.sleep(0.2)
        raise BenchError(f"the relays' RBUDP session did not come up within 15 s: {self.log_tail()}")

    def log_tail(self) -> str:
        return " | ".join(f"{n.name}: " + (self.workdir / f"{n.name}.log").read_text()[-300:]
                          for n in (self.a, self.b) if (self.workdir / f"{n.name}.log").exists())

    def metrics(self, node: Node) -> str:
        done = subprocess.run(net.in_netns(node.netns, transfer_cmd("scrape", "--url", f"http://{node.address}:{RELAY_METRICS_PORT}/metrics")),
                              capture_output=True, text=True, timeout=20)
        return done.stdout if done.returncode == 0 else ""

    def metric(self, node: Node, series: str) -> float | None:
        m = re.search(rf"^{re.escape(series)} (\S+)$", self.metrics(node), re.M)
        return float(m.group(1)) if m else None

    def datagrams(self) -> tuple[int, int]:
        page = self.metrics(self.a)
        def get(kind: str) -> int:
            m = re.search(rf'^wanrelay_rbudp_datagrams_total{{peer="bench-{self.b.name}",kind="{kind}"}} (\S+)$',
                          page, re.M)
            return int(float(m.group(1))) if m else 0
        return get("sent"), get("resent")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def link_drops(link: str) -> int:
    return sum(c["drop_queue"] + c["drop_loss"] for (name, _), c in emulator.counters().items() if name == link)


def set_link(link: str, delay_ms: float, loss: float) -> None:
    for (name, direction), values in emulator.settings().items():
        if name == link:
            emulator.request({"cmd": "set", "link": name, "dir": direction, **values,
                              "delay_us": int(round(delay_ms * 1000)), "loss": loss})


def one_transfer(src: Node, dst: Node, size: int, max_seconds: float, *, cc: str | None = None,
                 relay: RelayPair | None = None) -> tuple[int, float, bool]:
    sink = subprocess.Popen(net.in_netns(dst.netns, transfer_cmd(
        "sink", "--listen", f"{dst.address}:{SINK_PORT}", *(["--preamble"] if relay else []),
        "--timeout", str(max_seconds + 120))), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sink.stderr.readline()                         # "ready": listening
        args = ["source", "--to", f"{dst.address}:{SINK_PORT}", "--size", str(size),
                "--max-seconds", str(max_seconds)]
        if relay:
            args += ["--via", f"{src.address}:{RELAY_INSIDE_PORT}", "--source-ip", src.address]
        elif cc:
            args += ["--cc", cc]
        done = subprocess.run(net.in_netns(src.netns, transfer_cmd(*args)), capture_output=True, text=True,
                              timeout=max_seconds + 180)
        if done.returncode != 0:
            raise BenchError(f"the source failed: {done.stderr.strip()[-400:]}")
        sent = json.loads(done.stdout.strip().splitlines()[-1])
        out, err = sink.communicate(timeout=120)
        if sink.returncode != 0:
            raise BenchError(f"the sink failed: {err.strip()[-400:]}")
        got = json.loads(out.strip().splitlines()[-1])
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    if got["bytes"] != sent["sent"]:
        raise BenchError(f"the sink received {got['bytes']} bytes of {sent['sent']} sent")
    return got["bytes"], got["end"] - sent["start"], sent["partial"]


def run(topo: Topology, size: int, losses: list[float], delay_ms: float, rate_bps: int | None, payload: int,
        variants: list[str], max_seconds: float, json_path: str | None) -> int:
    require_testbed(topo)
    if len(topo.clusters) < 2 or not topo.links:
        raise BenchError("the topology needs two clusters joined by a WAN link")
    a, b = topo.clusters[0], topo.clusters[1]
    if b.private:
        raise BenchError(f"cluster {b.name} is private: RBUDP needs both relays reachable by UDP")
    link = topo.links[0].name
    path_bps = min(topo.links[0].rate_bps, a.nic_bps, b.nic_bps)
    rate = rate_bps or int(path_bps * 0.97)
    if payload + UDP_IP_HEADERS > topo.mtu:
        raise BenchError(f"--payload {payload}: above the MTU ({topo.mtu}) less 28 bytes of IP and UDP headers")
    saved = emulator.settings()
    workdir = Path(tempfile.mkdtemp(prefix="wanmpi-bench-rbudp-"))
    relays = None
    results: list[Result] = []
    started, started_iso = time.monotonic(), now_iso()
    with congestion.allowing([v.removeprefix("tcp-") for v in variants if v.startswith("tcp-")]):
        try:
            if "rbudp" in variants:
                relays = RelayPair(topo, workdir, rate, payload)
                relays.start()
            src, dst = a.nodes[0], b.nodes[0]
            for loss in losses:
                set_link(link, delay_ms, loss)
                for v in variants:
                    print(f"[{time.monotonic() - started:6.0f} s] loss {loss:g}, {v}: {units.format_size(size)} "
                          f"{src.name} -> {dst.name}", flush=True)
                    d0 = link_drops(link)
                    g0 = relays.datagrams() if v == "rbudp" else None
                    n, secs, partial = one_transfer(src, dst, size, max_seconds,
                                                    cc=v.removeprefix("tcp-") if v != "rbudp" else None,
                                                    relay=relays if v == "rbudp" else None)
                    r = Result(loss, v, n, secs, partial, link_drops(link) - d0)
                    if g0 is not None:
                        g1 = relays.datagrams()
                        r.datagrams_sent, r.datagrams_resent = g1[0] - g0[0], g1[1] - g0[1]
                    results.append(r)
                    print(f"           {r.goodput_bps / 1e6:8.1f} Mbit/s in {secs:.1f} s"
                          f"{' (cut at --max-seconds)' if partial else ''}", flush=True)
        finally:
            if relays:
                relays.stop()
            try:
                emulator.apply(saved)
            except emulator.EmulatorError as e:
                print(f"wanmpi: could not restore the link settings ({e}); check `wanmpi link show`")
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(results, variants, path_bps, rate, delay_ms, size)
    if json_path:
        settings = {"size": size, "losses": losses, "delay_ms": delay_ms, "variants": variants,
                    "max_seconds": max_seconds, "path_bps": path_bps, "rbudp_rate_bps": rate, "payload": payload,
                    "source": a.nodes[0].name, "destination": b.nodes[0].name}
        summary = [{**asdict(r), "goodput_bps": r.goodput_bps, "of_path": r.goodput_bps / path_bps}
                   for r in results]
        write_json(json_path, result_document("rbudp", topo, settings, [], summary, started_iso,
                                              time.monotonic() - started))
    return 0


def print_table(results: list[Result], variants: list[str], path_bps: int, rate: int, delay_ms: float,
                size: int) -> None:
    print(f"\ngoodput of {units.format_size(size)} at {delay_ms:g} ms one-way, path rate "
          f"{units.format_rate(path_bps)}; RBUDP at {units.format_rate(rate)} "
          "(Mbit/s, share of the path rate; * = cut at --max-seconds)")
    print(f"{'loss':>7} " + " ".join(f"{v:>20}" for v in variants) + "   rbudp resent / sent")
    for loss in dict.fromkeys(r.loss for r in results):
        cells, extra = [], ""
        for v in variants:
            r = next((r for r in results if r.loss == loss and r.variant == v), None)
            if r is None:
                cells.append(f"{'-':>20}")
                continue
            cell = f"{r.goodput_bps / 1e6:7.1f} ({100 * r.goodput_bps / path_bps:5.1f} %){'*' if r.partial else ' '}"
            cells.append(f"{cell:>20}")
            if r.datagrams_sent:
                extra = f"   {r.datagrams_resent} / {r.datagrams_sent}"
        print(f"{loss * 100:6.2g}% " + " ".join(cells) + extra)
