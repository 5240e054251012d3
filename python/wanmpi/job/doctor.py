"""`wanmpi doctor`: a node's TCP settings checked against the topology.

Each check gives a `Finding`: OK, WARN or FAIL, what was found, why it
matters for MPI over a long fat WAN, and the exact command that fixes it.
The settings are collected in one round trip (a small sh script) from this
machine, a testbed node's namespace or a real host through the remote shell,
into a `NodeSettings`; `examine` only looks at that, so tests can fabricate it.
"""
from __future__ import annotations

import ipaddress
import json
import math
import sys
from dataclasses import asdict, dataclass, field

from .. import paths, shell, tcptune, units
from ..topo import Node, Topology

OK, WARN, FAIL = "OK", "WARN", "FAIL"
EXIT_FAIL = 1
MSS = 1448                       # bytes of payload per segment at MTU 1500 with timestamps
INITIAL_WINDOW = 10              # segments (RFC 6928, Linux default)
MIN_RTO_MS = 200                 # Linux TCP_RTO_MIN
GOOD_CONGESTION_CONTROL = ("bbr", "cubic")

SYSCTLS = (
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
    "net.ipv4.tcp_window_scaling", "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control", "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_mtu_probing",
    "net.core.default_qdisc",
)
# Global: a namespace sees the host's value read-only (or not at all), so they are
# changed on the host (Linux 6.x; net.core.default_qdisc is absent inside namespaces).
HOST_WIDE = {"net.core.rmem_max", "net.core.wmem_max", "net.core.default_qdisc",
             "net.ipv4.tcp_allowed_congestion_control"}

# Prints "sysctl KEY VALUE", "link ...", "addr ..." and "qdisc ..." lines.
COLLECT_SCRIPT = "; ".join([
    "PATH=$PATH:/sbin:/usr/sbin",
    f"for k in {' '.join(SYSCTLS)}",
    "do f=/proc/sys/$(echo $k | tr . /)",
    "if [ -r $f ]; then printf 'sysctl %s %s\\n' $k \"$(tr '\\t' ' ' < $f)\"; fi",
    "done",
    "ip -o link show | sed 's/^/link /'",
    "ip -o -4 addr show | sed 's/^/addr /'",
    "tc qdisc show 2>/dev/null | sed 's/^/qdisc /'",
    "true",
])


class DoctorError(RuntimeError):
    """The node could not be found or read."""


@dataclass(frozen=True)
class Interface:
    name: str
    mtu: int
    qdiscs: tuple[str, ...] = ()         # kinds of every qdisc on it (root first)
    addresses: tuple[str, ...] = ()      # IPv4 addresses with prefix, e.g. 198.18.0.1/24


@dataclass(frozen=True)
class NodeSettings:
    """What `examine` looks at: sysctls (absent if unreadable) and interfaces."""
    sysctls: dict[str, str]
    interfaces: tuple[Interface, ...] = ()

    def interfaces_in(self, network: str) -> list[Interface]:
        net = ipaddress.ip_network(network)
        return [i for i in self.interfaces
                if any(ipaddress.ip_interface(a).ip in net for a in i.addresses)]


@dataclass(frozen=True)
class Finding:
    check: str              # what was checked, usually the sysctl
    status: str             # OK, WARN or FAIL
    found: str              # what the node has
    why: str = ""           # why it matters
    fix: list[str] = field(default_factory=list)     # commands that fix it


@dataclass(frozen=True)
class Target:
    """Where the settings come from and how fixes are run there."""
    label: str
    cluster: str | None          # the node's cluster, if known
    prefix: list[str] = field(default_factory=list)   # runs argv there (empty: here)
    remote_shell: bool = False   # prefix is ssh-like: takes one command line, not argv
    fix_prefix: str = ""         # prefixed to per-namespace fix commands

    def argv(self, script: str) -> list[str]:
        return [*self.prefix, script] if self.remote_shell else [*self.prefix, "sh", "-c", script]


# ---- collecting ---------------------------------------------------------------
def parse_collected(text: str) -> NodeSettings:
    """NodeSettings from COLLECT_SCRIPT's output; unreadable lines are skipped."""
    sysctls: dict[str, str] = {}
    links: dict[str, int] = {}
    addresses: dict[str, list[str]] = {}
    qdiscs: dict[str, list[str]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        words = rest.split()
        try:
            if kind == "sysctl" and words:
                sysctls[words[0]] = " ".join(words[1:])
            elif kind == "link" and len(words) > 2:
                name = words[1].rstrip(":").split("@")[0]
                links[name] = int(words[words.index("mtu") + 1])
            elif kind == "addr" and len(words) > 3 and words[2] == "inet":
                addresses.setdefault(words[1], []).append(words[3])
            elif kind == "qdisc" and "dev" in words:          # "qdisc KIND HANDLE: dev IF ..."
                dev = words[words.index("dev") + 1]
                qdiscs.setdefault(dev, []).append(words[1] if words[0] == "qdisc" else words[0])
        except (ValueError, IndexError):
            continue
    return NodeSettings(sysctls, tuple(Interface(n, mtu, tuple(qdiscs.get(n, ())), tuple(addresses.get(n, ())))
                                       for n, mtu in links.items()))


def collect(target: Target) -> NodeSettings:
    """Run COLLECT_SCRIPT where the target is."""
    try:
        return parse_collected(shell.output(target.argv(COLLECT_SCRIPT), timeout=30))
    except shell.CommandError as e:
        raise DoctorError(f"cannot read the settings of {target.label}: {e}") from None


def target_for(topo: Topology, node_name: str | None) -> Target:
    """This machine (None), or a node of the topology: a testbed namespace or a real host."""
    if node_name is None:
        return Target("this machine", None)
    try:
        node: Node = topo.node(node_name)
    except KeyError:
        names = ", ".join(n.name for n in topo.nodes[:8])
        raise DoctorError(f"--node: no node {node_name!r} in {topo.source} (nodes: {names}"
                         f"{', ...' if len(topo.nodes) > 8 else ''})") from None
    if node.emulated:
        return Target(f"testbed node {node.name} (namespace {node.netns})", node.cluster,
                      ["ip", "netns", "exec", node.netns], fix_prefix=f"ip netns exec {node.netns} ")
    return Target(f"host {node.name}", node.cluster, [paths.REMOTE_SHELL, node.name], remote_shell=True)


def cluster_of_settings(topo: Topology, settings: NodeSettings) -> str | None:
    for c in topo.clusters:
        if settings.interfaces_in(c.network):
            return c.name
    return None


# ---- checks ---------------------------------------------------------------------
def examine(topo: Topology, settings: NodeSettings, cluster: str | None = None,
            fix_prefix: str = "") -> list[Finding]:
    """Every check of a node of `cluster` (None: unknown; the largest path of any cluster)."""
    path = tcptune.largest_path(topo, cluster)
    findings: list[Finding] = []
    if path is not None:
        findings += check_buffers(settings, path, fix_prefix)
    findings.append(check_window_scaling(settings, fix_prefix))
    findings.append(check_congestion_control(settings, path, fix_prefix))
    findings.append(check_slow_start_after_idle(settings, path, fix_prefix))
    findings.append(check_no_metrics_save(settings, fix_prefix))
    findings.append(check_mtu_probing(settings, fix_prefix))
    findings += check_interfaces(topo, settings, cluster)
    return findings


def sysctl_fix(key: str, value: str | int, fix_prefix: str) -> str:
    prefix = "" if key in HOST_WIDE else fix_prefix
    value = f'"{value}"' if " " in str(value) else value
    return f"{prefix}sysctl -w {key}={value}"


def missing(key: str) -> Finding:
    return Finding(key, WARN, "cannot be read", "the kernel does not have it or it is hidden here; "
                   "the check is skipped")


def path_text(path: tcptune.WanPath) -> str:
    return (f"path {path.name}: {units.format_rate(path.rate_bps)} (slowest link or NIC) x RTT "
            f"{units.format_duration_us(path.rtt_us)} = BDP {units.format_size(path.bdp_bytes)}")


def check_buffers(s: NodeSettings, path: tcptune.WanPath, fix_prefix: str) -> list[Finding]:
    bdp = path.bdp_bytes
    need = tcptune.BUFFER_BDP_FACTOR * bdp
    findings = []
    for key, side in (("net.ipv4.tcp_rmem", "receive"), ("net.ipv4.tcp_wmem", "send")):
        value = s.sysctls.get(key)
        triple = tcptune.parse_triple(value) if value is not None else None
        if triple is None:
            findings.append(missing(key) if value is None else
                            Finding(key, WARN, f"{value!r} is not 'min default max'"))
            continue
        fix = [sysctl_fix(key, f"{triple[0]} {triple[1]} {need}", fix_prefix)]
        found = f"max {triple[2]} B; {path_text(path)}"
        if triple[2] >= need:
            findings.append(Finding(key, OK, found + f", max >= {tcptune.BUFFER_BDP_FACTOR} x BDP"))
        else:
            findings.append(Finding(
                key, FAIL if triple[2] < bdp else WARN, found,
                f"TCP's {side} buffer grows (autotuning) up to this max; one connection can keep at "
                f"most that much data in flight, so it cannot fill the path unless the max is above the "
                f"BDP. Ask for {tcptune.BUFFER_BDP_FACTOR} x BDP = {need} B: part of a receive buffer goes "
                "to packet overhead, and a send buffer also holds what waits for retransmission", fix))
    for key in tcptune.CORE_BUFFER_SYSCTLS:
        value = s.sysctls.get(key)
        if value is None or not value.isdigit():
            findings.append(missing(key))
            continue
        found = f"{value} B; {tcptune.BUFFER_BDP_FACTOR} x BDP = {need} B"
        if int(value) >= need:
            findings.append(Finding(key, OK, found))
        else:
            findings.append(Finding(
                key, WARN, found,
                "caps SO_RCVBUF/SO_SNDBUF set by a program; a socket with a fixed size gets no "
                "autotuning. Open MPI's TCP BTL sets none by default (btl_tcp_sndbuf/rcvbuf = 0), "
                "but a program or MPI that does cannot fill the path. Host-wide: one value for "
                "every network namespace", [sysctl_fix(key, need, fix_prefix)]))
    return findings


def check_window_scaling(s: NodeSettings, fix_prefix: str) -> Finding:
    key = "net.ipv4.tcp_window_scaling"
    value = s.sysctls.get(key)
    if value is None:
        return missing(key)
    if value == "1":
        return Finding(key, OK, "1")
    return Finding(key, FAIL, value, "without window scaling the window is at most 64 KB: "
                   "one connection moves at most 64 KB per round trip", [sysctl_fix(key, 1, fix_prefix)])


def check_congestion_control(s: NodeSettings, path: tcptune.WanPath | None, fix_prefix: str) -> Finding:
    key = "net.ipv4.tcp_congestion_control"
    value = s.sysctls.get(key)
    if value is None:
        return missing(key)
    available = s.sysctls.get("net.ipv4.tcp_available_congestion_control", "").split()
    allowed = s.sysctls.get("net.ipv4.tcp_allowed_congestion_control", "").split()
    found = f"{value} (available: {' '.join(available) or '?'}; allowed: {' '.join(allowed) or '?'})"
    if value in GOOD_CONGESTION_CONTROL:
        why = ("bbr paces itself to the measured bottleneck rate and does not back off on random loss"
               if value == "bbr" else
               "cubic regrows its window in time independent of the RTT, fast on long paths "
               "(the Linux default); bbr copes better with random loss")
        return Finding(key, OK, found, why)
    choice = "bbr" if "bbr" in available else "cubic"
    fix = [] if choice in available else [f"modprobe tcp_{choice}"]
    if fix_prefix and choice not in allowed:
        # a namespace may only pick an algorithm the host allows
        fix.append(sysctl_fix("net.ipv4.tcp_allowed_congestion_control", " ".join([*allowed, choice]), ""))
    fix.append(sysctl_fix(key, choice, fix_prefix))
    why = f"{value} is not one wanmpi is measured with (bbr, cubic)"
    if value == "reno":
        why = "reno halves its window on every loss and regrows it by one segment per round trip"
        if path is not None and path.bdp_bytes > 0:
            rtts = path.bdp_bytes / MSS / 2
            why += (f": after one loss on {path.name} it needs about {rtts:.0f} round trips "
                    f"({rtts * path.rtt_us / 1e6:.1f} s) to regain the path's rate")
    return Finding(key, WARN, found, why + f". Recommended: {choice}", fix)


def check_slow_start_after_idle(s: NodeSettings, path: tcptune.WanPath | None, fix_prefix: str) -> Finding:
    key = "net.ipv4.tcp_slow_start_after_idle"
    value = s.sysctls.get(key)
    if value is None:
        return missing(key)
    if value == "0":
        return Finding(key, OK, "0", "a connection keeps its window across compute phases")
    why = ("MPI traffic comes in bursts between compute phases. With 1, a connection idle for longer "
           f"than its RTO (at least {MIN_RTO_MS} ms) shrinks its window, halving it per RTO of "
           f"idleness down to the initial {INITIAL_WINDOW} segments, and every burst starts in slow start")
    if path is not None and path.bdp_bytes > INITIAL_WINDOW * MSS:
        rounds = math.ceil(math.log2(path.bdp_bytes / (INITIAL_WINDOW * MSS)))
        why += (f": on {path.name} that is about {rounds} round trips "
                f"({rounds * path.rtt_us / 1000:.0f} ms) before it reaches the path's rate again")
    return Finding(key, WARN, value, why, [sysctl_fix(key, 0, fix_prefix)])


def check_no_metrics_save(s: NodeSettings, fix_prefix: str) -> Finding:
    key = "net.ipv4.tcp_no_metrics_save"
    value = s.sysctls.get(key)
    if value is None:
        return missing(key)
    if value == "1":
        return Finding(key, OK, "1", "every connection starts fresh")
    return Finding(key, WARN, value,
                   "with 0 Linux remembers ssthresh and RTT per destination when a connection closes, and "
                   "the next connection to that host starts from them: after a lossy job the next one "
                   "leaves slow start early with a small window and takes many round trips to reach the "
                   "path's rate, so results depend on what ran before",
                   [sysctl_fix(key, 1, fix_prefix), f"{fix_prefix}ip tcp_metrics flush all"])


def check_mtu_probing(s: NodeSettings, fix_prefix: str) -> Finding:
    key = "net.ipv4.tcp_mtu_probing"
    value = s.sysctls.get(key)
    if value is None:
        return missing(key)
    if value in ("1", "2"):
        return Finding(key, OK, value, "TCP lowers its segment size if large packets vanish")
    return Finding(key, WARN, value,
                   "if a router on the WAN path drops packets above its MTU and the ICMP 'fragmentation "
                   "needed' replies are filtered (a path-MTU black hole), connections hang after the "
                   "handshake; 1 makes TCP probe smaller segments once it sees one",
                   [sysctl_fix(key, 1, fix_prefix)])


def check_interfaces(topo: Topology, s: NodeSettings, cluster: str | None) -> list[Finding]:
    networks = [topo.cluster(cluster).network] if cluster else [c.network for c in topo.clusters]
    chosen = [i for n in networks for i in s.interfaces_in(n)]
    if not chosen:
        return [Finding("interfaces", WARN, f"no interface with an address in {', '.join(networks)}",
                        "is this a node of the topology? MTU and qdisc were not checked")]
    findings = []
    for i in chosen:
        if i.mtu == topo.mtu:
            findings.append(Finding(f"mtu {i.name}", OK, f"{i.mtu}, as the topology says ([testbed] mtu)"))
        else:
            findings.append(Finding(
                f"mtu {i.name}", WARN, f"{i.mtu}; the topology says {topo.mtu} ([testbed] mtu)",
                "every interface on the path should have the same MTU: a larger one than the WAN carries "
                "needs path-MTU discovery to work (or tcp_mtu_probing), a smaller one wastes capacity",
                [f"ip link set dev {i.name} mtu {topo.mtu}"]))
        if "fq" in i.qdiscs:
            findings.append(Finding(f"qdisc {i.name}", OK, "fq: pacing by the qdisc"))
        else:
            kinds = ", ".join(i.qdiscs) or "unknown"
            findings.append(Finding(
                f"qdisc {i.name}", OK, f"{kinds} (no fq)",
                "fine: SO_MAX_PACING_RATE (wanmpi's pacing) and bbr fall back to TCP's internal pacing "
                "(Linux 4.13 and later) at a little more CPU; with fq as the root qdisc the qdisc paces "
                f"instead (tc qdisc replace dev {i.name} root fq)"))
    return findings


# ---- the command --------------------------------------------------------------------
def render(target: Target, topo: Topology, findings: list[Finding], cluster: str | None) -> str:
    path = tcptune.largest_path(topo, cluster)
    lines = [f"wanmpi doctor: {target.label}, cluster {cluster or '(unknown)'}; topology {topo.source}"]
    if path is not None:
        lines.append(f"  largest WAN {path_text(path)}; buffer limits should be at least "
                     f"{tcptune.BUFFER_BDP_FACTOR} x BDP = {units.format_size(tcptune.BUFFER_BDP_FACTOR * path.bdp_bytes)}")
    for f in findings:
        lines.append(f"{f.status:<5} {f.check}: {f.found}")
        if f.why and f.status != OK:
            lines.append(f"      why: {f.why}")
        elif f.why:
            lines.append(f"      {f.why}")
        for command in f.fix:
            lines.append(f"      fix: {command}")
    counts = {s: sum(f.status == s for f in findings) for s in (OK, WARN, FAIL)}
    lines.append(f"{counts[OK]} OK, {counts[WARN]} WARN, {counts[FAIL]} FAIL")
    if counts[WARN] or counts[FAIL]:
        lines.append("(sysctl -w lasts until reboot; to keep a setting put 'KEY = VALUE' lines in "
                     "/etc/sysctl.d/90-wanmpi.conf)")
    return "\n".join(lines)


def run(topo: Topology, node_name: str | None = None, as_json: bool = False) -> int:
    """Check a node (None: this machine); print the findings; EXIT_FAIL if any FAIL."""
    target = target_for(topo, node_name)
    settings = collect(target)
    cluster = target.cluster or cluster_of_settings(topo, settings)
    findings = examine(topo, settings, cluster, target.fix_prefix)
    if as_json:
        print(json.dumps({"target": target.label, "cluster": cluster, "topology": topo.source,
                          "findings": [asdict(f) for f in findings]}, indent=1))
    else:
        print(render(target, topo, findings, cluster))
    sys.stdout.flush()
    return EXIT_FAIL if any(f.status == FAIL for f in findings) else 0
