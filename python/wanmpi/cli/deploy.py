"""`wanmpi deploy`: an installed prefix copied to every host of a real-sites
topology and its relay hosts, then each host checked (job/deploy.py)."""
from __future__ import annotations

from pathlib import Path

from .. import paths
from ..job import deploy
from .options import slurm_option, topology_for, topology_option


def register(commands) -> None:
    p = commands.add_parser("deploy", help="copy the installation to every host and relay host "
                            "(ssh; rsync or tar), then check each: version, MPIs, TCP settings")
    topology_option(p)
    slurm_option(p)
    p.add_argument("--prefix", metavar="DIR", type=Path,
                   help="where the installation goes on the hosts (default: the same path as here)")
    p.add_argument("--from", dest="source", metavar="PREFIX", type=Path,
                   help="the installed prefix to copy (default: the one this wanmpi runs from)")
    p.add_argument("--check", action="store_true",
                   help="copy nothing, only check (hosts that share a file system)")
    p.set_defaults(handler=cmd_deploy)


def cmd_deploy(args) -> int:
    source = args.source or paths.PREFIX
    if source is None:
        raise deploy.DeployError("this wanmpi runs from a source checkout: deploy an installed prefix "
                                 "(`make install PREFIX=DIR`, then DIR/bin/wanmpi deploy, or --from DIR)")
    reports = deploy.deploy(topology_for(args), source.resolve(), args.prefix, args.check)
    print(deploy.render(reports))
    return 0 if all(r.ok for r in reports) else 1
