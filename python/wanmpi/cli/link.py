"""`wanmpi link show|set|monitor`: the emulated WAN links while they run,
through the emulator's control socket (testbed/emulator.py)."""
from __future__ import annotations

import json
import os

from .. import topo, units
from ..testbed import emulator, net
from ..topo import Topology
from .options import CliError, quantity


def register(commands) -> None:
    link = commands.add_parser("link", help="show or change the emulated WAN links while they run")
    actions = link.add_subparsers(metavar="ACTION", required=True)
    show = actions.add_parser("show", help="live settings and counters of every link and direction")
    show.add_argument("--json", action="store_true", help="print the emulator's reply as JSON")
    show.set_defaults(handler=cmd_link_show)
    change = actions.add_parser("set", help="change a link's settings at once (not the topology file)")
    change.add_argument("link", metavar="LINK", help="link name, e.g. a-b (see `wanmpi link show`)")
    change.add_argument("--dir", default="both", choices=["a_to_b", "b_to_a", "both"],
                        help="direction: a_to_b is from the first cluster of the name (default: both)")
    change.add_argument("--delay", type=quantity("--delay", units.parse_duration_us),
                        help="one-way delay, e.g. 20ms")
    change.add_argument("--rate", type=quantity("--rate", units.parse_rate), help="bottleneck rate, e.g. 1Gbit")
    change.add_argument("--queue", type=quantity("--queue", units.parse_size),
                        help="drop-tail queue, e.g. 500KB (at least one MTU)")
    change.add_argument("--loss", type=quantity("--loss", units.parse_loss), help="random loss, e.g. 0.001 or 0.1%%")
    updown = change.add_mutually_exclusive_group()
    updown.add_argument("--up", dest="up", action="store_true", default=None, help="carry traffic again")
    updown.add_argument("--down", dest="up", action="store_false", help="cut the link: drop every packet")
    change.set_defaults(handler=cmd_link_set)
    monitor = actions.add_parser("monitor", help="record bytes, packets, drops and queue per 1 ms bin to CSV")
    monitor.add_argument("file", nargs="?", metavar="FILE.csv", help="where to write (omit with --stop)")
    monitor.add_argument("--stop", action="store_true", help="stop recording and flush the file")
    monitor.set_defaults(handler=cmd_link_monitor)


def running_links() -> Topology:
    state = net.State.load()
    if state is None:
        raise CliError("the testbed is not up: run `wanmpi testbed up` first")
    return topo.loads(state.topology_text, state.topology_source)


def cmd_link_show(args) -> int:
    running_links()
    reply = emulator.request({"cmd": "show"})
    if args.json:
        print(json.dumps(reply, indent=1))
        return 0
    for link in reply["links"]:
        print(f"link {link['name']}")
        for d in emulator.DIRECTIONS:
            st, c = link[d], link[d]["counters"]
            print(f"  {d}: {'up' if st['up'] else 'DOWN'}, {units.format_rate(st['rate_bps'])}, "
                  f"{units.format_duration_us(st['delay_us'])} one-way, queue "
                  f"{units.format_size(st['queue_bytes'])}, loss {st['loss']:g}")
            print(f"    {c['tx_packets']} packets / {c['tx_bytes']} bytes delivered, queue now "
                  f"{c['queue_bytes']} B, drops: {c['drop_queue']} queue, {c['drop_loss']} loss, "
                  f"{c['drop_down']} down; released late: {c['late_200us']} > 0.2 ms, "
                  f"{c['late_1ms']} > 1 ms")
    if "spin_s" in reply:
        print(f"emulator: up {reply['uptime_s']:.1f} s, {reply['spin_s'] * 1e3:.1f} ms of it spinning "
              f"before releases")
    return 0


def cmd_link_set(args) -> int:
    t = running_links()
    if args.link not in {l.name for l in t.links}:
        raise CliError(f"no link {args.link!r} (links: {', '.join(l.name for l in t.links)})")
    change: dict = {}
    for option, field in (("delay", "delay_us"), ("rate", "rate_bps"), ("queue", "queue_bytes"), ("loss", "loss")):
        if getattr(args, option) is not None:
            change[field] = getattr(args, option)
    if args.up is not None:
        change["up"] = args.up
    if not change:
        raise CliError("nothing to change: give --delay, --rate, --queue, --loss, --up or --down")
    emulator.request({"cmd": "set", "link": args.link, "dir": args.dir, **change})
    print(f"link {args.link} {args.dir}: " + ", ".join(f"{k}={v}" for k, v in change.items()))
    return 0


def cmd_link_monitor(args) -> int:
    running_links()
    if args.stop == bool(args.file):
        raise CliError("give FILE.csv to start recording, or --stop to stop it")
    path = None if args.stop else os.path.abspath(args.file)
    emulator.request({"cmd": "monitor", "file": path})
    print(f"monitor {'stopped' if args.stop else 'recording to ' + path}")
    return 0
