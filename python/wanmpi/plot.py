"""Figures from measurements, in the style of the papers (PNG, matplotlib)."""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

TRAFFIC_COLUMNS = ["time_ms", "link", "dir", "bytes", "packets", "drops", "queue_bytes"]


class PlotError(ValueError):
    """Input that cannot be drawn; the message names the file and the problem."""


def read_traffic(path: str) -> dict[tuple[str, str], dict[str, list[int]]]:
    """Series per (link, direction) from a wanem monitor CSV."""
    series: dict = defaultdict(lambda: defaultdict(list))
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f)
            header = next(rows, None)
            if header != TRAFFIC_COLUMNS:
                raise PlotError(f"{path}: not a traffic monitor CSV (expected the header "
                                f"{','.join(TRAFFIC_COLUMNS)}, got {','.join(header or []) or 'nothing'})")
            for line, row in enumerate(rows, start=2):
                if len(row) != len(TRAFFIC_COLUMNS):
                    raise PlotError(f"{path}: line {line}: expected {len(TRAFFIC_COLUMNS)} fields, got {len(row)}")
                try:
                    values = [int(row[0]), *map(int, row[3:])]
                except ValueError:
                    raise PlotError(f"{path}: line {line}: not a number in {row}") from None
                s = series[(row[1], row[2])]
                for name, value in zip(["time_ms", "bytes", "packets", "drops", "queue_bytes"], values):
                    s[name].append(value)
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e.strerror}") from None
    if not series:
        raise PlotError(f"{path}: no samples")
    return series


def traffic(path: str, output: str | None = None, bin_ms: int = 1) -> str:
    """Bandwidth over time per link and direction, drops marked, queue below."""
    if bin_ms < 1:
        raise PlotError(f"--bin-ms must be at least 1, got {bin_ms}")
    series = read_traffic(path)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (bw_ax, q_ax) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5),
                                      gridspec_kw={"height_ratios": [3, 1]})
    for (link, direction), s in sorted(series.items()):
        t, b, drops, q = s["time_ms"], s["bytes"], s["drops"], s["queue_bytes"]
        times = [t[i] for i in range(0, len(t), bin_ms)]
        mbit = [sum(b[i:i + bin_ms]) * 8 / (bin_ms * 1000) for i in range(0, len(b), bin_ms)]
        label = f"{link} {direction.replace('_to_', ' to ')}"
        line, = bw_ax.plot(times, mbit, linewidth=0.8, label=label)
        dropped = [t[i] for i, d in enumerate(drops) if d]
        if dropped:
            top = max(mbit) if mbit else 0
            bw_ax.plot(dropped, [top * 1.05] * len(dropped), "x", color=line.get_color(), markersize=3,
                       label=f"{label}: drops ({sum(drops)})")
        q_ax.plot(t, [v / 1000 for v in q], linewidth=0.8, color=line.get_color())
    bw_ax.set_ylabel(f"bandwidth (Mbit/s, {bin_ms} ms bins)")
    bw_ax.legend(loc="upper right", fontsize="small")
    bw_ax.grid(alpha=0.3)
    q_ax.set_ylabel("queue (KB)")
    q_ax.set_xlabel("time (ms)")
    q_ax.grid(alpha=0.3)
    fig.suptitle(f"WAN traffic: {Path(path).name}")
    fig.tight_layout()
    out = output or str(Path(path).with_suffix(".png"))
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def collectives(results, out_dir: Path) -> list[str]:
    """From `wanmpi bench coll` results: per operation, time against message
    size at the largest delay (every variant, and the lower bound), and the
    speed-up of wanmpi over each variant at the largest size against delay."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for op in dict.fromkeys(r.op for r in results):
        rows = [r for r in results if r.op == op]
        delay = max(r.delay_ms for r in rows)
        fig, (size_ax, delay_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
        for variant in dict.fromkeys(r.variant for r in rows):
            pts = sorted((r.bytes, r.median_s) for r in rows if r.variant == variant and r.delay_ms == delay)
            size_ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=variant)
        bound = sorted({(r.bytes, r.bound_s) for r in rows if r.delay_ms == delay})
        size_ax.plot([b[0] for b in bound], [b[1] for b in bound], "k--", linewidth=1, label="lower bound")
        size_ax.set_xscale("log", base=2)
        size_ax.set_yscale("log")
        size_ax.set_xlabel("message size (bytes)")
        size_ax.set_ylabel("median time (s)")
        size_ax.set_title(f"{op}, {delay:g} ms one-way")
        size_ax.grid(alpha=0.3, which="both")
        size_ax.legend(fontsize="small")
        largest = max(r.bytes for r in rows)
        ref = {r.delay_ms: r.median_s for r in rows if r.variant == "wanmpi" and r.bytes == largest}
        for variant in dict.fromkeys(r.variant for r in rows):
            if variant == "wanmpi":
                continue
            pts = sorted((r.delay_ms, r.median_s / ref[r.delay_ms]) for r in rows
                         if r.variant == variant and r.bytes == largest and r.delay_ms in ref)
            delay_ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=variant)
        delay_ax.axhline(1.0, color="k", linewidth=0.8)
        delay_ax.set_xlabel("one-way WAN delay (ms)")
        delay_ax.set_ylabel(f"time / wanmpi time at {largest // 1024} KiB")
        delay_ax.set_title("speed-up of wanmpi (higher: wanmpi faster)")
        delay_ax.grid(alpha=0.3)
        delay_ax.legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / f"coll-{op}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    return written
