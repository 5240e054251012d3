"""`wanmpi testbed up|down|status`, `wanmpi clean` and `wanmpi topology`: the
emulated testbed (testbed/net.py) and the topology file it is built from."""
from __future__ import annotations

import json
from pathlib import Path

from .. import topo, units
from ..job import processes
from ..sim import run as sim_run
from ..testbed import emulator, net, real_sites, ssh
from ..topo import Topology
from .options import slurm_option, topology_for, topology_option


def register(commands) -> None:
    testbed = commands.add_parser("testbed", help="build, remove or inspect the emulated testbed")
    actions = testbed.add_subparsers(metavar="ACTION", required=True)
    for action, handler, text in (("up", cmd_up, "build the testbed of a topology (harmless if up)"),
                                  ("down", cmd_down, "remove the testbed"),
                                  ("status", cmd_status, "show the testbed and its health")):
        p = actions.add_parser(action, help=text)
        topology_option(p)
        p.set_defaults(handler=handler)
        if action == "up":
            p.add_argument("--ssh", action="store_true",
                           help="also run an OpenSSH server in every node and relay, for `testbed hosts`")
    hosts = actions.add_parser("hosts", help="write the testbed that is up as a topology of real hosts "
                               "(launched over ssh: testbed up --ssh)")
    hosts.add_argument("--output", "-o", metavar="FILE", required=True, help="topology file to write")
    hosts.set_defaults(handler=cmd_hosts)

    clean = commands.add_parser("clean", help="remove every namespace and process a crashed run left behind")
    clean.set_defaults(handler=cmd_clean)

    check = commands.add_parser("topology", help="check a topology file and show what it describes")
    check.add_argument("file", nargs="?", help="topology file (default: the embedded default)")
    check.add_argument("--json", action="store_true", help="print as JSON")
    slurm_option(check)
    check.set_defaults(handler=cmd_topology)


def cmd_up(args) -> int:
    t = topology_for(args)
    built = net.Net(t, ssh=args.ssh).up()
    print(f"testbed {'up' if built else 'already up'}: {describe(t)}")
    if args.ssh:
        print(f"ssh: an sshd in every node; WANMPI_SSH={ssh.WRAPPER} (see `wanmpi testbed hosts`)")
    return 0


def cmd_hosts(args) -> int:
    state = net.State.load()
    if state is None:
        raise net.TestbedError("the testbed is not up: run `wanmpi testbed up --ssh` first")
    t = topo.loads(state.topology_text, state.topology_source)
    try:
        text = real_sites.topology_text(t)
    except real_sites.RealSitesError as e:
        raise net.TestbedError(str(e)) from None
    Path(args.output).write_text(text)
    print(f"wrote {args.output}: {len(t.nodes)} hosts in {len(t.clusters)} clusters")
    if not state.ssh:
        print("note: the testbed runs no ssh servers; bring it up with `wanmpi testbed up --ssh`")
    print(f"launch over ssh from a testbed node with WANMPI_SSH={ssh.WRAPPER}")
    return 0


def cmd_down(args) -> int:
    state = net.State.load()
    net.teardown(state)
    print("testbed down" if state else "no testbed was up; removed any leftovers")
    return 0


def cmd_clean(args) -> int:
    removed = net.clean() + [f"file {f} of a job that no longer runs" for f in processes.stale_files()]
    removed += sim_run.clean_leftovers()
    print("\n".join(f"removed {r}" for r in removed) if removed else "nothing to clean")
    return 0


def cmd_status(args) -> int:
    state = net.State.load()
    if state is None:
        leftovers = net.existing_namespaces()
        print("testbed: down" + (f" (leftover namespaces: {len(leftovers)}; run `wanmpi clean`)"
                                 if leftovers else ""))
        return 1
    t = topo.loads(state.topology_text, state.topology_source)
    problems = net.health(state)
    print(f"testbed: {'UNHEALTHY' if problems else 'up'} ({t.source})")
    for p in problems:
        print(f"  problem: {p}")
    for c in t.clusters:
        kind = "private, behind NAT" if c.private else "public"
        print(f"cluster {c.name}: {len(c.nodes)} nodes, {c.network} ({kind}), NIC "
              f"{units.format_rate(c.nic_bps)}, port buffer {units.format_size(c.port_buffer)}")
        print("  nodes: " + " ".join(f"{n.name}={n.address}" for n in c.nodes))
        if c.relay_nodes:
            print(f"  relays (NIC {units.format_rate(c.relay_nodes[0].nic_bps)}): "
                  + " ".join(f"{r.name}={r.inside},{r.outside}" for r in c.relay_nodes))
    counters = {} if problems else emulator.counters()
    for l in t.links:
        print(f"link {l.name}: {units.format_rate(l.rate_bps)}, {units.format_duration_us(l.delay_us)} "
              f"one-way, queue {units.format_size(l.queue_bytes)}, loss {l.loss:g}")
        for d in emulator.DIRECTIONS:
            if (l.name, d) not in counters:
                continue
            c = counters[(l.name, d)]
            print(f"  {d}: {c['tx_packets']} packets, {c['tx_bytes']} bytes, drops "
                  f"{c['drop_queue']} queue / {c['drop_loss']} loss / {c['drop_down']} down")
    return 1 if problems else 0


def describe(t: Topology) -> str:
    clusters = ", ".join(f"{c.name} ({len(c.nodes)} nodes{', private' if c.private else ''}"
                         f"{f', {c.relays} relays' if c.relays else ''})" for c in t.clusters)
    links = ", ".join(f"{l.name} {units.format_rate(l.rate_bps)}/{units.format_duration_us(l.delay_us)}"
                      for l in t.links)
    return f"clusters {clusters}; WAN {links}"


def cmd_topology(args) -> int:
    t = topo.load(args.file, slurm=args.slurm)
    if args.json:
        print(json.dumps({
            "clusters": [{"name": c.name, "private": c.private, "network": c.network,
                          "nic_bps": c.nic_bps, "port_buffer": c.port_buffer,
                          "nodes": {n.name: n.address for n in c.nodes},
                          "relays": {r.name: {"inside": r.inside, "outside": r.outside, "nic_bps": r.nic_bps}
                                     for r in c.relay_nodes}} for c in t.clusters],
            "links": [{"name": l.name, "rate_bps": l.rate_bps, "delay_us": l.delay_us,
                       "queue_bytes": l.queue_bytes, "loss": l.loss} for l in t.links]}, indent=1))
    else:
        print(f"{t.source}: valid; {describe(t)}")
    return 0
