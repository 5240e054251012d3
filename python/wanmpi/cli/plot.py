"""`wanmpi plot traffic|sweep`: figures drawn from measurements and
simulations (bench/plot.py)."""
from __future__ import annotations

import json
from pathlib import Path

from ..bench import plot


def register(commands) -> None:
    p = commands.add_parser("plot", help="draw figures from measurements")
    figures = p.add_subparsers(metavar="FIGURE", required=True)
    traffic = figures.add_parser("traffic", help="WAN bandwidth over time from a `wanmpi link monitor` CSV")
    traffic.add_argument("csv", metavar="FILE.csv")
    traffic.add_argument("-o", "--output", metavar="FILE.png", help="default: FILE.png beside the CSV")
    traffic.add_argument("--bin-ms", type=int, default=1, help="add up this many 1 ms bins per point")
    traffic.set_defaults(handler=cmd_plot_traffic)
    sweep = figures.add_parser("sweep", help="time / bound against each axis of a `wanmpi sim --sweep` result")
    sweep.add_argument("result", metavar="FILE.json")
    sweep.add_argument("-o", "--output-dir", metavar="DIR", help="default: beside the result")
    sweep.set_defaults(handler=cmd_plot_sweep)


def cmd_plot_traffic(args) -> int:
    out = plot.traffic(args.csv, args.output, args.bin_ms)
    print(f"wrote {out}")
    return 0


def cmd_plot_sweep(args) -> int:
    try:
        document = json.loads(Path(args.result).read_text())
    except OSError as e:
        raise plot.PlotError(f"{args.result}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise plot.PlotError(f"{args.result}: not JSON: {e}") from None
    if not isinstance(document, dict):
        raise plot.PlotError(f"{args.result}: not a result document")
    out = Path(args.output_dir) if args.output_dir else Path(args.result).parent
    out.mkdir(parents=True, exist_ok=True)
    for path in plot.sweep(document, out, Path(args.result).stem):
        print(f"wrote {path}")
    return 0
