"""`wanmpi doctor`: a node's TCP settings against the topology (job/doctor.py)."""
from __future__ import annotations

from ..job import doctor
from .options import slurm_option, topology_for


def register(commands) -> None:
    p = commands.add_parser("doctor", help="check a node's TCP settings against the topology: what to change and why")
    p.add_argument("topology_file", nargs="?", metavar="TOPOLOGY",
                   help="topology file (default: as for --topology of other commands)")
    p.add_argument("--node", metavar="NAME", help="check this node of the topology (a testbed node's "
                   "namespace, or a real host through the remote shell) instead of this machine")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    slurm_option(p)
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args) -> int:
    args.topology = args.topology_file
    return doctor.run(topology_for(args), args.node, args.json)
