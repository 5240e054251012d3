"""`wanmpi relay up|down|status`: relays kept running on real relay hosts
(job/standing_relays.py), for topologies with `[relay] standing = true`."""
from __future__ import annotations

from ..job import standing_relays
from .options import slurm_option, topology_for, topology_option


def register(commands) -> None:
    relay = commands.add_parser("relay", help="start, stop or inspect relays kept running on the relay "
                                "hosts of real sites ([relay] standing = true)")
    actions = relay.add_subparsers(metavar="ACTION", required=True)
    for action, handler, text in (("up", cmd_up, "start wanrelay on every relay host over ssh, wait for the trunks"),
                                  ("down", cmd_down, "stop them and remove their key, configuration and log"),
                                  ("status", cmd_status, "whether each relay runs and which trunks are up")):
        p = actions.add_parser(action, help=text)
        topology_option(p)
        slurm_option(p)
        p.set_defaults(handler=handler)


def cmd_up(args) -> int:
    t = topology_for(args)
    print(standing_relays.render(t, standing_relays.up(t)))
    return 0


def cmd_down(args) -> int:
    for relay, what in standing_relays.down(topology_for(args)):
        print(f"{relay.name:<16} {relay.host:<20} {what}")
    return 0


def cmd_status(args) -> int:
    t = topology_for(args)
    states = standing_relays.status(t)
    print(standing_relays.render(t, states))
    problems = standing_relays.missing(t, states)
    for p in problems:
        print(f"problem: {p}")
    return 1 if problems else 0
