"""`wanmpi tune`: measure the collectives' crossovers on the testbed and write
a rules file (bench/tune.py measures, bench/crossovers.py decides; docs/tuning.md)."""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from ..bench import tune
from ..job import launch
from .options import CliError, count, delays_ms, installed_mpis, names, positive, topology_for, topology_option


def tune_sizes(text: str) -> str:
    """--sizes '8,4K,1M': sizes as collbench reads them (K, M, G: powers of 1024), passed on as written."""
    items = [item.strip() for item in text.split(",")]
    for item in items:
        if not re.fullmatch(r"(\d+)([KMG]?)", item) or re.fullmatch(r"0+[KMG]?", item):
            raise CliError(f"--sizes: {item!r} is not a size such as 8, 4K or 1M (bytes; K, M, G: powers of 1024)")
    return ",".join(items)


def register(commands) -> None:
    p = commands.add_parser("tune", help="measure where wanmpi's collectives beat the MPI's own and write a "
                            "rules file (docs/tuning.md)")
    topology_option(p)
    p.add_argument("--mpis", type=installed_mpis, default=",".join(tune.MPIS),
                   help=f"comma-separated subset of: {', '.join(launch.Launcher.registry)} "
                        f"(default: {','.join(tune.MPIS)})")
    p.add_argument("--delays", type=delays_ms, default=tune.DEFAULT_DELAYS,
                   help=f"one-way WAN delays in ms (default: {tune.DEFAULT_DELAYS})")
    p.add_argument("--sizes", type=tune_sizes, default=tune.DEFAULT_SIZES,
                   help=f"message sizes, K/M/G powers of 1024 (default: {tune.DEFAULT_SIZES})")
    p.add_argument("--ops", type=names("--ops", tune.OPS, unique=True), default=",".join(tune.OPS),
                   help=f"collectives (default: {','.join(tune.OPS)})")
    p.add_argument("--rounds", type=count("--rounds", 1), default=2,
                   help="rounds of the three jobs; the best median counts (default: 2)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the rules file to write (default: ./<topology file's stem>.rules)")
    p.add_argument("--timeout", type=positive("--timeout"), default=900, help="per job, seconds (default: 900)")
    p.add_argument("--json", metavar="FILE", help="also write the measurements in the bench result format")
    p.set_defaults(handler=cmd_tune)


def cmd_tune(args) -> int:
    t = topology_for(args)
    out = args.output or f"{Path(t.source).stem}.rules"
    return tune.run(t, args.mpis, args.delays, args.ops, args.sizes, args.rounds, out, args.json, args.timeout,
                    shlex.join(["wanmpi", *sys.argv[1:]]))
