"""`wanmpi bench emulator`: measure the WAN emulator (wanem) itself on the
testbed, side by side in one run, on one WAN link (the first, or --link):

  rtt       idle RTT against 2 x one-way delay at 0 (the path alone), 1, 5, 10
            and 20 ms, node to node (a0 -> b0) and router to router (the WAN
            addresses, no LAN in between), plus a ping of the router's own
            address (the ping and one network stack, no link at all)
  tcp       TCP goodput against the configured rate, 1 and 4 flows, cubic and
            bbr, at the link's rate and at 1 Gbit/s, queue one bandwidth-delay
            product, router to router (node NICs would cap it), after a warm-up
  loss      measured against configured random loss (0.1 %, 1 %): a UDP probe
            counts what arrives, the emulator counts what it dropped; 95 %
            Wilson interval
  load      the default benchmark load (4 TCP flows between node pairs at the
            link's own settings, like `bench net`): wanem's CPU and packet rate
  capacity  the highest packet rate wanem forwards with under 1 % extra loss,
            at MTU 1500 and 9000 (TUN devices and wanem restarted for 9000),
            with the rate limit lifted; where the loss happened and what
            limited the measurement; headroom = capacity / default load

Every measurement records what the emulator counted meanwhile (late releases,
drops, wanem's CPU, the machine's idle share) and is flagged when the emulator
fell behind (more than 1 % of releases > 0.2 ms late, 0.1 % > 1 ms late, or a
transmit drop). Every setting changed is restored at the end, also on failure,
Ctrl-C or SIGTERM. Without a running testbed, one is brought up and taken down.

Here: the run and its report document; the parts are measured in
wanem_parts.py, judged against their targets and printed in wanem_report.py.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, replace

from .. import shell
from ..testbed import net
from ..topo import Topology, WanLink
from .cases import BenchError
from .results import result_document, write_json
from .wanem_parts import FULL, QUICK, Bench, Plan
from .wanem_report import flagged, headroom, print_report, rtt_summary

PARTS = ("rtt", "tcp", "loss", "load", "capacity")


@contextmanager
def terminate_as_interrupt():
    """SIGTERM unwinds like Ctrl-C, so every setting is put back."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# ---- running ----------------------------------------------------------------------------------------
def check_arguments(topo: Topology, link_name: str | None, seconds: float | None) -> WanLink:
    if seconds is not None and not 0 < seconds <= 600:
        raise BenchError(f"--seconds: expected a duration in (0, 600] seconds, got {seconds:g}")
    if not topo.links:
        raise BenchError(f"{topo.source}: has no WAN link to measure")
    if link_name is None:
        return topo.links[0]
    for link in topo.links:
        if link.name == link_name:
            return link
    raise BenchError(f"--link: no link {link_name!r} (links: {', '.join(l.name for l in topo.links)})")


def run(topo: Topology, *, quick: bool = False, seconds: float | None = None, json_path: str | None = None,
        parts: tuple[str, ...] | None = None, link_name: str | None = None) -> int:
    selected = parts or PARTS
    link = check_arguments(topo, link_name, seconds)
    plan = QUICK if quick else FULL
    if seconds is not None:
        plan = replace(plan, tcp_seconds=seconds, load_seconds=seconds)
    if json_path and not os.access(os.path.dirname(os.path.abspath(json_path)), os.W_OK):
        raise BenchError(f"--json: cannot write {json_path}: no such directory or not writable")
    t0 = time.monotonic()
    state = net.State.load()
    brought_up = False
    if state is None:
        print(f"no testbed is up: bringing up {topo.source} (taken down at the end)", file=sys.stderr)
        net.Net(topo).up()
        brought_up = True
    elif state.topology_text != topo.text:
        raise BenchError(f"the testbed of {state.topology_source} is up, not {topo.source}: "
                         "run `wanmpi testbed down` first, or drop --topology")
    try:
        problems = net.health(net.State.load())
        if problems:
            raise BenchError("the testbed is not healthy: " + "; ".join(problems))
        with terminate_as_interrupt():
            report = measure_parts(topo, link, plan, selected, quick)
    except shell.CommandError as e:
        raise BenchError(str(e)) from None
    finally:
        if brought_up:
            net.teardown(net.State.load())
    print_report(report)
    if json_path:       # the result format (results.py); the report is its summary
        settings = {"quick": quick, "parts": list(selected), "link": link.name, "plan": asdict(plan)}
        write_json(json_path, result_document("emulator", topo, settings, [], report, report["date"],
                                              time.monotonic() - t0))
    return 0


def measure_parts(topo: Topology, link: WanLink, plan: Plan, selected: tuple[str, ...], quick: bool) -> dict:
    bench = Bench(topo, link, plan)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    load_before = os.getloadavg()
    results: dict = {}
    try:
        for part in PARTS:
            if part in selected:
                results[part] = getattr(bench, part)()
    finally:
        bench.restore()
    capacity, load = results.get("capacity", []), results.get("load")
    report = {
        "date": started, "topology": topo.source, "link": link.name, "quick": quick,
        "loadavg": {"before": load_before[0], "after": os.getloadavg()[0]},
        "configured": {**bench.saved[(link.name, "a_to_b")], "mtu": topo.mtu},
        "plan": asdict(plan),
        "rtt": [{**asdict(r), "excess_ms": r.excess_ms} for r in results.get("rtt", [])],
        "rtt_summary": rtt_summary(results.get("rtt", [])),
        "tcp": [{**asdict(r), "of_rate": r.of_rate, "of_bound": r.of_bound} for r in results.get("tcp", [])],
        "loss": [asdict(r) for r in results.get("loss", [])],
        "load": asdict(load) if load else None,
        "capacity": [{**asdict(c), "steps": [{**asdict(s), "loss": s.loss, "emulator_loss": s.emulator_loss,
                                              "sender_limited": s.sender_limited} for s in c.steps]}
                     for c in capacity],
        "headroom": headroom(capacity, load, bench.saved[(link.name, "a_to_b")]["rate_bps"]),
    }
    report["behind"] = flagged(report)
    return report
