"""Figures from measurements, in the style of the papers (PNG, matplotlib)."""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from ..rules import format_bytes

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


def traffic(path: str, output: str | None = None, bin_ms: int = 1,
            spans: list[tuple[float, float, str]] = ()) -> str:
    """Bandwidth over time per link and direction, drops marked, queue below;
    `spans` (start ms, end ms, label) shaded on both, such as a WAN cut."""
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
    for start, end, label in spans:
        bw_ax.axvspan(start, end, color="grey", alpha=0.2, label=label)
        q_ax.axvspan(start, end, color="grey", alpha=0.2)
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


# ---- benchmark results (results.py's format) --------------------------------------------------
def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def lines_vs_delay(rows: list[dict], path: Path, title: str, value: str, ylabel: str,
                   panel: str = "kernel", line: str = "variant", reference_line: float | None = 1.0,
                   x: str = "delay_ms", xlabel: str = "one-way delay (ms)") -> str:
    """One panel per `panel` value (a kernel), `value` against the one-way
    delay (or `x`), one line per `line` value (a variant): the papers' figure
    of performance relative to a single cluster."""
    plt = _pyplot()
    panels = list(dict.fromkeys(r[panel] for r in rows))
    if not panels:
        raise PlotError(f"{path.name}: nothing to draw")
    cols = min(4, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.8 * nrows), squeeze=False, sharex=True)
    series_names = list(dict.fromkeys(r[line] for r in rows))
    for ax, name in zip(axes.flat, panels):
        for s in series_names:
            pts = sorted((r[x], r[value]) for r in rows
                         if r[panel] == name and r[line] == s and r[value] is not None and r[x] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=s)
        if reference_line is not None:
            ax.axhline(reference_line, color="k", linewidth=0.7, linestyle=":")
        ax.set_title(name.upper() if len(name) <= 3 else name, fontsize="medium")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="small", frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def improvement_bars(rows: list[dict], path: Path, title: str, value: str, ylabel: str,
                     group: str = "kernel", bar: str = "variant", facet: str = "mpi") -> str:
    """Grouped bars: per `group` (kernel), one bar per `bar` value (technique)
    showing `value` (speed-up over the plain MPI); one panel per `facet` (MPI)."""
    plt = _pyplot()
    facets = list(dict.fromkeys(r[facet] for r in rows))
    if not facets:
        raise PlotError(f"{path.name}: nothing to draw")
    fig, axes = plt.subplots(len(facets), 1, figsize=(10, 3.2 * len(facets)), squeeze=False)
    for ax, f in zip(axes[:, 0], facets):
        mine = [r for r in rows if r[facet] == f]
        groups = list(dict.fromkeys(r[group] for r in mine))
        bars = list(dict.fromkeys(r[bar] for r in mine))
        width = 0.8 / max(len(bars), 1)
        for j, b in enumerate(bars):
            keyed = {r[group]: r[value] for r in mine if r[bar] == b}
            xs = [i + (j - (len(bars) - 1) / 2) * width for i in range(len(groups))]
            ax.bar(xs, [keyed.get(g) or 0 for g in groups], width, label=b)
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_xticks(range(len(groups)), [g.upper() if len(g) <= 3 else g for g in groups])
        ax.set_ylabel(ylabel)
        ax.set_title(f, fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize="small", ncol=len(bars))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def suite(document: dict, out_dir: Path, stem: str = "suite") -> list[str]:
    """From a `wanmpi bench suite` result document: per MPI, performance
    relative to a single cluster against delay (one line per variant); and
    the speed-up of each technique over the plain MPI at the largest delay."""
    rows = [r for r in document["summary"] if r["variant"] != document["settings"]["reference"]]
    settings = document["settings"]
    written = []
    for mpi in settings["mpis"]:
        mine = [r for r in rows if r["mpi"] == mpi]
        if any(r["relative_best"] is not None for r in mine):
            written.append(lines_vs_delay(
                mine, out_dir / f"{stem}-relative-{mpi}.png",
                f"{mpi}, class {settings['class']}: performance relative to one cluster of the same size",
                "relative_best", "single cluster / time"))
    top = max(settings["delays"])
    bars = [r for r in rows if r["delay_ms"] == top and r["variant"] != "plain" and r["speedup_over_plain"]]
    if bars:
        written.append(improvement_bars(
            bars, out_dir / f"{stem}-techniques.png",
            f"Improvement by technique at {top:g} ms one-way (class {settings['class']})",
            "speedup_over_plain", "speed-up over the plain MPI"))
    return written


def pacing(summary: list[dict], out_dir: Path, stem: str = "pacing") -> list[str]:
    """From `wanmpi bench pacing` results: per congestion control, the speed-up
    of every variant over Open MPI alone against delay, one panel per kernel."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for cc in dict.fromkeys(r["cc"] for r in summary):
        rows = [r for r in summary if r["cc"] == cc]
        ref = {(r["delay_ms"], r["kernel"]): r["median_s"] for r in rows if r["variant"] == "ompi"}
        speed = [{**r, "speedup": (ref[(r["delay_ms"], r["kernel"])] / r["median_s"])
                  if (r["delay_ms"], r["kernel"]) in ref and r["median_s"] else None} for r in rows]
        if any(s["speedup"] for s in speed):
            written.append(lines_vs_delay(speed, out_dir / f"{stem}-{cc}.png",
                                          f"{cc}: speed-up over Open MPI alone (median per iteration)",
                                          "speedup", "Open MPI time / time"))
    return written


SWEEP_AXES = (("sites", "sites"), ("nodes_per_cluster", "nodes per site"), ("nic_bps", "NIC rate (Gbit/s)"),
              ("wan_bps", "WAN rate (Gbit/s)"), ("delay_ms", "one-way delay (ms)"), ("relays", "relays per site"))


def sweep(document: dict, out_dir: Path, stem: str = "sweep") -> list[str]:
    """From a `wanmpi sim --sweep` document: one figure per axis the sweep
    varied, a panel per (op, size), time / bound against the axis for ours
    and each of the MPIs' algorithms (the base point is the first row's)."""
    if document.get("bench") != "sim-sweep":
        raise PlotError(f"not a `wanmpi sim --sweep` result (bench {document.get('bench')!r})")
    rows = [r for r in document.get("summary", []) if r.get("bound_s")]
    if not rows:
        raise PlotError("the sweep has no summary rows to draw")
    keys = [k for k, _ in SWEEP_AXES]
    base = {k: rows[0].get(k) for k in keys}
    variants = [k[:-2] for k in rows[0] if k.endswith("_s") and k != "bound_s"]
    written = []
    for axis, label in SWEEP_AXES:
        mine = [r for r in rows if all(r.get(k) == base[k] for k in keys if k != axis)]
        if len({r.get(axis) for r in mine}) < 2:
            continue
        plotted = []
        for r in mine:
            scale = 1e9 if axis.endswith("_bps") else 1
            for v in variants:
                if r.get(f"{v}_s"):
                    plotted.append({"panel": f"{r['op']} {format_bytes(r['bytes'])}", "variant": v,
                                    "x": r[axis] / scale, "ratio": r[f"{v}_s"] / r["bound_s"]})
        written.append(lines_vs_delay(plotted, out_dir / f"{stem}-{axis}.png", f"time / bound against {label} "
                                      "(the others at the base)", "ratio", "time / bound", panel="panel",
                                      x="x", xlabel=label))
    if not written:
        raise PlotError("the sweep varies no axis (one point)")
    return written
