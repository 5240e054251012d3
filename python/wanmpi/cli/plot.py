"""`wanmpi plot traffic`: figures drawn from measurements (bench/plot.py)."""
from __future__ import annotations

from ..bench import plot


def register(commands) -> None:
    p = commands.add_parser("plot", help="draw figures from measurements")
    figures = p.add_subparsers(metavar="FIGURE", required=True)
    traffic = figures.add_parser("traffic", help="WAN bandwidth over time from a `wanmpi link monitor` CSV")
    traffic.add_argument("csv", metavar="FILE.csv")
    traffic.add_argument("-o", "--output", metavar="FILE.png", help="default: FILE.png beside the CSV")
    traffic.add_argument("--bin-ms", type=int, default=1, help="add up this many 1 ms bins per point")
    traffic.set_defaults(handler=cmd_plot_traffic)


def cmd_plot_traffic(args) -> int:
    out = plot.traffic(args.csv, args.output, args.bin_ms)
    print(f"wrote {out}")
    return 0
