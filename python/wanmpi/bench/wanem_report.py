"""What `wanmpi bench emulator` concludes from its measurements and prints:
the RTT's excess split into its causes, the headroom over the default load,
the measurements taken while the emulator fell behind, and the table, each
against its target.
"""
from __future__ import annotations

from .. import units
from ..testbed.probe import TCP_IP_HEADERS
from .wanem_parts import CAPACITY_LOSS, Capacity, Load, RttRow

RTT_TARGET_MS = 0.2                  # issue 3: idle RTT within 0.2 ms of 2 x delay
BBR_TARGET = 0.95                    # issue 3: one BBR flow >= 95 % of the rate, 1 BDP queue
HEADROOM_TARGET = 2.0


# ---- summaries -----------------------------------------------------------------------------------
def rtt_summary(rows: list[RttRow]) -> list[dict]:
    """Per delay, the excess over 2 x delay and how it splits: the LAN paths
    (node - router), the ping and the two network stacks (a ping of the router's
    own address), and what is left for the TUN path and wanem, of which the
    timer's share is wanem's own count (2 releases x their mean lateness)."""
    by = {(r.delay_ms, r.path.split()[0]): r for r in rows}
    own = by.get((0, "own"))
    out = []
    for (delay, kind), r in sorted(by.items()):
        if kind != "router" or delay == 0:
            continue
        node = by.get((delay, "node"))
        item = {"delay_ms": delay, "router_excess_ms": r.excess_ms,
                "node_excess_ms": node.excess_ms if node else None,
                "lan_paths_ms": node.excess_ms - r.excess_ms if node else None,
                "stack_ms": own.median_ms if own else None,
                "emulator_ms": r.excess_ms - own.median_ms if own else None,
                "timer_ms": 2 * r.emulator.mean_late_us / 1000}
        if r.excess_ms <= RTT_TARGET_MS:
            item["verdict"] = "ok"                  # even counting both network stacks
        elif item["emulator_ms"] is not None and item["emulator_ms"] <= RTT_TARGET_MS:
            item["verdict"] = "ok without the stacks"
        else:
            item["verdict"] = "MISSED"
        out.append(item)
    return out


def headroom(capacity: list[Capacity], load: Load | None, rate_bps: int) -> dict | None:
    c = next((c for c in capacity if c.mtu == 1500), capacity[0] if capacity else None)
    if c is None or load is None:
        return None
    h = {"mtu": c.mtu, "rate": c.gbit_per_s * 1e9 / rate_bps,
         "packets": c.pps / load.pps if load.pps else None,
         "cpu": 1 / load.emulator.wanem_cpu if load.emulator.wanem_cpu > 0 else None}
    known = [v for k, v in h.items() if k in ("rate", "packets", "cpu") and v]
    h["least"] = min(known) if known else None
    h["meets_target"] = bool(known) and h["least"] >= HEADROOM_TARGET
    return h


def flagged(report: dict) -> list[str]:
    """Measurements taken while the emulator fell behind."""
    out = []
    for r in report["rtt"]:
        if r["emulator"]["behind"]:
            out.append(f"rtt {r['delay_ms']} ms {r['path']}")
    for r in report["tcp"]:
        if r["emulator"]["behind"]:
            out.append(f"tcp {units.format_rate(r['rate_bps'])} {r['cc']} x{r['flows']}")
    for r in report["loss"]:
        if r["emulator"]["behind"]:
            out.append(f"loss {r['configured']:.2%}")
    if report["load"] and report["load"]["emulator"]["behind"]:
        out.append("load")
    for c in report["capacity"]:
        for s in c["steps"]:
            if s["emulator"]["behind"]:
                out.append(f"capacity MTU {c['mtu']} at {s['offered_pps']:,.0f} packets/s")
    return out


# ---- the table ----------------------------------------------------------------------------------------
def late(e: dict) -> str:
    mark = " BEHIND" if e["behind"] else ""
    return f"{e['late_200us']}/{e['late_1ms']} of {e['released']}{mark}"


def print_report(r: dict) -> None:
    """The whole report: the link's settings, then each part that ran, then headroom and lateness."""
    c = r["configured"]
    print(f"wanem on link {r['link']} ({r['topology']}): {units.format_rate(c['rate_bps'])}, "
          f"{units.format_duration_us(c['delay_us'])} one-way, queue {units.format_size(c['queue_bytes'])}, "
          f"loss {c['loss']:g}, MTU {c['mtu']}{'  [quick]' if r['quick'] else ''}")
    print(f"{r['date']}; machine load average {r['loadavg']['before']:.1f} before, "
          f"{r['loadavg']['after']:.1f} after (other work shares the CPUs: see the idle shares)")
    print("late = releases > 0.2 ms / > 1 ms late of all released (both directions); "
          "BEHIND: the emulator fell behind")
    if r["rtt"]:
        print_rtt(r["rtt"], r["rtt_summary"])
    if r["tcp"]:
        print_tcp(r["tcp"])
    if r["loss"]:
        print_loss(r["loss"])
    if r["load"]:
        print_load(r["load"])
    if r["capacity"]:
        print_capacity(r["capacity"])
    if r["headroom"]:
        print_headroom(r["headroom"])
    if r["behind"]:
        print("\nthe emulator fell behind during: " + "; ".join(r["behind"]))
    else:
        print("\nthe emulator kept up during every measurement")


def print_rtt(rows: list[dict], summary: list[dict]) -> None:
    print("\nidle RTT (median) vs 2 x one-way delay")
    print(f"  {'delay':>6} {'path':<24} {'expected':>9} {'median':>9} {'min':>8} {'max':>8} "
          f"{'excess':>8}  {'late':<18}")
    for x in rows:
        print(f"  {x['delay_ms']:>3} ms {x['path']:<24} {x['expected_ms']:>6.2f} ms {x['median_ms']:>6.3f} ms "
              f"{x['min_ms']:>8.3f} {x['max_ms']:>8.3f} {x['excess_ms']:>+8.3f}  {late(x['emulator'])}")
    print(f"  excess split (ms): {'delay':>5} {'node':>7} {'router':>7} {'LAN':>6} {'stack':>6} "
          f"{'wanem':>6} {'timer':>6}  target: router (or wanem) <= {RTT_TARGET_MS} ms")
    for s in summary:
        f = lambda v: f"{v:>6.3f}" if v is not None else f"{'-':>6}"
        print(f"  {'':>18} {s['delay_ms']:>5} {f(s['node_excess_ms']):>7} {f(s['router_excess_ms']):>7} "
              f"{f(s['lan_paths_ms'])} {f(s['stack_ms'])} {f(s['emulator_ms'])} {f(s['timer_ms'])}  "
              f"{s['verdict']}")
    zero = {x["path"].split()[0]: x["median_ms"] for x in rows if x["delay_ms"] == 0}
    if "router" in zero and "own" in zero:
        print(f"  at 0 ms the TUN path and wanem add {zero['router'] - zero['own']:.3f} ms to the stacks' "
              f"{zero['own']:.3f} ms")
    print("  node = a node to a node, router = WAN address to WAN address, LAN = node - router (veths, "
          "bridges, router hops), stack = ping of the router's own address (no link), wanem = router - "
          "stack (TUN devices + wanem), timer = 2 x wanem's mean release lateness (its own count)")


def print_tcp(rows: list[dict]) -> None:
    print("\nTCP goodput vs configured rate (router to router, after warm-up)")
    print(f"  {'rate':>8} {'queue':>8} {'cc':<6} {'flows':>5} {'goodput':>12} {'of rate':>8} "
          f"{'of bound':>8} {'drops':>6} {'wanem CPU':>9}  {'late':<18}")
    for x in rows:
        print(f"  {units.format_rate(x['rate_bps']):>8} {units.format_size(x['queue_bytes']):>8} {x['cc']:<6} "
              f"{x['flows']:>5} {x['goodput_bps'] / 1e6:>7.1f} Mbit {x['of_rate']:>8.1%} {x['of_bound']:>8.1%} "
              f"{x['emulator']['drop_queue']:>6} {x['emulator']['wanem_cpu']:>9.0%}  {late(x['emulator'])}")
    print(f"  bound = rate x (MTU - {TCP_IP_HEADERS}) / MTU; target: bbr, 1 flow >= {BBR_TARGET:.0%} of the rate")


def print_loss(rows: list[dict]) -> None:
    print("\nrandom loss: configured vs what wanem dropped (its counters) and what a UDP probe lost "
          "end to end (95 % Wilson intervals)")
    for x in rows:
        lo, hi = x["emulator_ci95"]
        inside = "inside" if lo <= x["configured"] <= hi else "OUTSIDE"
        print(f"  {x['configured']:.2%} configured: wanem dropped {x['emulator_dropped']} of "
              f"{x['emulator_arrivals']} = {x['emulator_measured']:.3%} [{lo:.3%}, {hi:.3%}] ({inside}); "
              f"end to end {x['lost']} of {x['sent']} = {x['measured']:.3%} "
              f"[{x['ci95'][0]:.3%}, {x['ci95'][1]:.3%}], lost elsewhere {x['lost_elsewhere']} "
              f"({x['lost_before_emulator']} before wanem, {x['lost_at_receiver']} at the receiver); "
              f"late {late(x['emulator'])}")


def print_load(x: dict) -> None:
    e = x["emulator"]
    print(f"\ndefault load: {x['flows']} TCP flows {x['path']}: {x['goodput_bps'] / 1e6:.1f} Mbit/s, "
          f"{x['pps']:,.0f} packets/s through wanem, wanem CPU {e['wanem_cpu']:.1%} of a core "
          f"(its core in irq/softirq {e['wanem_core_irq']:.0%}), machine idle {e['cpu_idle']:.0%}, "
          f"late {late(e)}")


def print_capacity(capacity: list[dict]) -> None:
    print("\ncapacity: rate limit lifted; UDP from router to router (udpprobe, sendmmsg + GSO)")
    print(f"  {'MTU':>5} {'offered/s':>10} {'sent/s':>10} {'delivered/s':>11} {'Gbit/s':>7} {'loss':>7} "
          f"{'ring':>7} {'wanem':>6} {'recv':>7} {'wanem CPU':>9} {'irq':>4} {'sender':>6}  {'late':<18}")
    for cap in capacity:
        for s in cap["steps"]:
            print(f"  {cap['mtu']:>5} {s['offered_pps']:>10,.0f} {s['sent_pps']:>10,.0f} "
                  f"{s['delivered_pps']:>11,.0f} {s['delivered_pps'] * cap['mtu'] * 8 / 1e9:>7.2f} "
                  f"{s['loss']:>7.2%} {s['lost_before_emulator']:>7} {s['lost_in_emulator']:>6} "
                  f"{s['lost_at_receiver']:>7} {s['emulator']['wanem_cpu']:>9.0%} "
                  f"{s['emulator']['wanem_core_irq']:>4.0%} {s['sender_cpu']:>6.0%}  "
                  f"{late(s['emulator'])}")
    print("  ring = lost before wanem (TUN ring full), wanem = its own drops, recv = UDP receive errors; "
          "irq = share of wanem's core in interrupts/softirqs; sender = udpprobe's CPU")
    for cap in capacity:
        print(f"  MTU {cap['mtu']}: {cap['pps']:,.0f} packets/s = {cap['gbit_per_s']:.2f} Gbit/s with < "
              f"{CAPACITY_LOSS:.0%} loss end to end (wanem CPU {cap['wanem_cpu']:.0%}); "
              f"< {CAPACITY_LOSS:.0%} lost at wanem up to {cap['emulator_pps']:,.0f} packets/s; "
              f"limit: {cap['limited_by']}")


def print_headroom(h: dict) -> None:
    fmt = lambda v: f"{v:.1f}x" if v else "-"
    print(f"\nheadroom (MTU {h['mtu']}): rate {fmt(h['rate'])} (capacity / WAN rate), packets "
          f"{fmt(h['packets'])} (capacity / default load), CPU {fmt(h['cpu'])} (1 / wanem's CPU share "
          f"under the default load): {'meets' if h['meets_target'] else 'MISSES'} the "
          f"{HEADROOM_TARGET:g}x target")
