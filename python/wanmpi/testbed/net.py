"""The emulated testbed: builds a `Topology` out of network namespaces.

Per cluster (see docs/testbed.md for the naming and addressing scheme):
  wm-{c}-sw   the switch: bridge br0, one port per node ({node}-port, with a tbf
              queue toward the node: NIC rate, port_buffer bytes) and one
              uplink to the router
  wm-{c}-r    the router: lan0 on the switch, one TUN device wan-{peer} per
              WAN link, driven by the wanem emulator; NAT if the cluster is
              private
  wm-{node}   one namespace per node: eth0 (tbf at the NIC rate), default
              route via the router; TCP buffer limits sized from the
              bandwidth-delay product of its cluster's longest WAN path
  wm-{c}-relay{k}  a relay node: in0 on the cluster's switch, out0 on the
              router's relay network (bridge dmz0, public even when the
              cluster is private), both at the relay NIC rate; default route
              out through the router. wanrelay runs here for a job
              (job/relays.py), never on the nodes.
The WAN links are served by one `wanem` process (delay, rate, drop-tail
queue, loss) whose control socket `wanmpi link` talks to.

Every build step is undone on failure; `down` and `clean` remove every
namespace and process the testbed created.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import paths, shell, tcptune
from ..topo import NETNS_PREFIX, Cluster, Node, Relay, Topology
from . import emulator, ssh, vpn

HOST_QUEUE_BYTES = 1_500_000     # a node's own transmit queue (1000 full packets)
GLOBAL_SYSCTLS = {"net.core.netdev_max_backlog": 10000}
NS_SYSCTLS = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
# Every connection starts from the same state: no ssthresh or cwnd cached from an
# earlier connection between the same nodes (an earlier, lossy run would slow the next).
NODE_SYSCTLS = ["net.ipv4.tcp_no_metrics_save=1"]


class TestbedError(RuntimeError):
    """The testbed could not be built, inspected or removed."""


def ip(netns: str, *args: str) -> None:
    shell.run(["ip", "-n", netns, *args])


def tc(netns: str, *args: str) -> None:
    shell.run(["tc", "-n", netns, *args])


def in_netns(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def node_command(node: Node, argv: list[str]) -> list[str]:
    """argv run inside node's namespace with its hostname and the testbed hosts file."""
    return in_netns(node.netns, [
        "unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c",
        'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"',
        "wanmpi", node.name, str(paths.HOSTS_FILE), *argv])


def tbf(netns: str, dev: str, rate_bps: int, limit: int, mtu: int) -> None:
    burst = max(2 * mtu, rate_bps // 8 // 1000)          # about 1 ms at line rate
    tc(netns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_bps}bit",
       "burst", str(burst), "limit", str(max(limit, burst)))


def existing_namespaces() -> list[str]:
    out = shell.output(["ip", "netns", "list"])
    return [line.split()[0] for line in out.splitlines()
            if line.strip() and line.split()[0].startswith(NETNS_PREFIX)]


def namespace_pids(netns: str) -> list[int]:
    done = shell.run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def kill_pids(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is still alive after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _alive(p)]
            time.sleep(0.02)
        if not alive:
            return
        pids = alive


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@dataclass
class State:
    """What a running testbed is made of, kept in paths.STATE_FILE."""
    topology_source: str
    topology_text: str
    namespaces: list[str]
    wanem_pid: int | None
    sysctls_before: dict[str, str]
    ssh: bool = False                  # an sshd in every node (testbed up --ssh)

    def save(self) -> None:
        paths.STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = paths.STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=1))
        tmp.replace(paths.STATE_FILE)

    @classmethod
    def load(cls) -> "State | None":
        try:
            return cls(**json.loads(paths.STATE_FILE.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None


class Net:
    """Builds, inspects and removes the emulated testbed of one topology."""

    def __init__(self, topo: Topology, ssh: bool = False):
        if not topo.emulated:
            raise TestbedError(f"{topo.source}: lists real hosts; there is no testbed to build "
                               "(wanmpi run launches over ssh directly)")
        self.topo = topo
        self.created: list[str] = []
        self.wanem: subprocess.Popen | None = None
        self.sysctls_before: dict[str, str] = {}
        self.ssh = ssh

    # ---- build -------------------------------------------------------------
    def up(self) -> bool:
        """Build the testbed; False if this topology is already up and healthy."""
        state = State.load()
        if state is not None:
            if state.topology_text == self.topo.text and not health(state):
                if state.ssh or not self.ssh:
                    return False
                ssh.start(self.topo)     # up without ssh: add the servers
                state.ssh = True
                state.save()
                return True
            if state.topology_text != self.topo.text:
                raise TestbedError(f"a testbed from {state.topology_source} is up; "
                                   "run `wanmpi testbed down` first")
            teardown(state)          # same topology but broken: rebuild it
        leftovers = existing_namespaces()
        if leftovers:
            raise TestbedError(f"leftover namespaces from an earlier run ({', '.join(leftovers[:4])}"
                               f"{', ...' if len(leftovers) > 4 else ''}): run `wanmpi clean`")
        try:
            self.build()
        except BaseException as e:
            teardown(self.state())
            if isinstance(e, (shell.CommandError, OSError, TestbedError, emulator.EmulatorError,
                              ssh.SshError)):
                raise TestbedError(f"testbed up failed and was undone: {e}") from None
            raise
        return True

    def state(self) -> State:
        return State(self.topo.source, self.topo.text, list(self.created),
                     self.wanem.pid if self.wanem else None, self.sysctls_before, self.ssh)

    def add_netns(self, name: str) -> None:
        shell.run(["ip", "netns", "add", name])
        self.created.append(name)
        self.state().save()              # recorded at once: a crash leaves a removable trace
        ip(name, "link", "set", "lo", "up")
        shell.run(in_netns(name, ["sysctl", "-q", "-w", *NS_SYSCTLS]))

    def build(self) -> None:
        paths.STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.write_hosts_file()
        self.raise_global_sysctls()
        for cluster in self.topo.clusters:
            self.build_cluster(cluster)
        self.build_wan()
        if self.ssh:
            ssh.start(self.topo)
        self.state().save()

    def write_hosts_file(self) -> None:
        lines = ["127.0.0.1\tlocalhost"]
        lines += [f"{n.address}\t{n.name}" for n in self.topo.nodes]
        lines += [f"{r.inside}\t{r.name}" for r in self.topo.relays]
        paths.HOSTS_FILE.write_text("\n".join(lines) + "\n")

    def global_sysctls(self) -> dict[str, int]:
        """Host-wide settings the testbed needs at least: the backlog, and the
        SO_RCVBUF/SO_SNDBUF bounds (read-only inside namespaces) at the nodes' buffer limit."""
        limit = tcptune.buffer_limit(self.topo)
        return {**GLOBAL_SYSCTLS, **{key: limit for key in tcptune.CORE_BUFFER_SYSCTLS}}

    def raise_global_sysctls(self) -> None:
        for key, value in self.global_sysctls().items():
            path = Path("/proc/sys") / key.replace(".", "/")
            before = path.read_text().strip()
            if int(before) < value:
                self.sysctls_before[key] = before
                path.write_text(str(value))

    def build_cluster(self, c: Cluster) -> None:
        mtu = str(self.topo.mtu)
        sw, rt = c.switch_netns, c.router_netns
        self.add_netns(sw)
        ip(sw, "link", "add", "br0", "mtu", mtu, "type", "bridge", "forward_delay", "0")
        ip(sw, "link", "set", "br0", "up")
        self.add_netns(rt)
        ip(rt, "link", "add", "lan0", "mtu", mtu, "type", "veth",
           "peer", "name", "uplink", "mtu", mtu, "netns", sw)
        ip(sw, "link", "set", "uplink", "master", "br0", "up")
        ip(rt, "addr", "add", f"{c.gateway}/{c.prefixlen}", "dev", "lan0")
        ip(rt, "link", "set", "lan0", "up")
        shell.run(in_netns(rt, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
        for node in c.nodes:
            self.build_node(c, node)
        if c.relay_nodes:
            ip(rt, "link", "add", "dmz0", "mtu", mtu, "type", "bridge", "forward_delay", "0")
            ip(rt, "addr", "add", f"{c.relay_gateway}/24", "dev", "dmz0")
            ip(rt, "link", "set", "dmz0", "up")
        for relay in c.relay_nodes:
            self.build_relay(c, relay)
        if c.nat:
            self.add_one_to_one_nat(c)
        elif c.private:
            self.add_nat(c)

    def plug(self, ns: str, dev: str, address: str, into: str, bridge: str, port: str, rate_bps: int,
             port_buffer: int) -> None:
        """An interface `dev` of namespace ns with `address` (CIDR), wired by a
        veth pair to `port` on a bridge of namespace `into`; the interface
        shaped at rate_bps like a NIC, the port toward it with port_buffer
        bytes of queue like a switch port."""
        mtu = self.topo.mtu
        ip(ns, "link", "add", dev, "mtu", str(mtu), "type", "veth",
           "peer", "name", port, "mtu", str(mtu), "netns", into)
        ip(into, "link", "set", port, "master", bridge, "up")
        ip(ns, "addr", "add", address, "dev", dev)
        ip(ns, "link", "set", dev, "up")
        tbf(ns, dev, rate_bps, HOST_QUEUE_BYTES, mtu)
        tbf(into, port, rate_bps, port_buffer, mtu)

    def build_node(self, c: Cluster, node: Node) -> None:
        self.add_netns(node.netns)
        self.plug(node.netns, "eth0", f"{node.address}/{c.prefixlen}", c.switch_netns, "br0",
                  f"{node.name}-port", c.nic_bps, c.port_buffer)
        ip(node.netns, "route", "add", "default", "via", c.gateway)
        shell.run(in_netns(node.netns, ["sysctl", "-q", "-w", *node_tcp_sysctls(self.topo, c)]))

    def build_relay(self, c: Cluster, relay: Relay) -> None:
        """A relay node: like a node on the inside, plus an outside interface on
        the router's relay network, both at the relay NIC rate."""
        ns, port = relay.netns, f"relay-{relay.index}"
        self.add_netns(ns)
        self.plug(ns, "in0", f"{relay.inside}/{c.prefixlen}", c.switch_netns, "br0", port,
                  relay.nic_bps, c.port_buffer)
        self.plug(ns, "out0", f"{relay.outside}/24", c.router_netns, "dmz0", port,
                  relay.nic_bps, c.port_buffer)
        ip(ns, "route", "add", "default", "via", c.relay_gateway)
        shell.run(in_netns(ns, ["sysctl", "-q", "-w", *node_tcp_sysctls(self.topo, c)]))

    def add_nat(self, c: Cluster) -> None:
        """Private cluster: nodes reach out through the router's public address;
        nothing from the WAN gets in unless it answers a connection from inside."""
        rules = [
            ["-t", "nat", "-A", "POSTROUTING", "-s", c.network, "-o", "wan+", "-j", "MASQUERADE"],
            ["-A", "FORWARD", "-i", "wan+", "-o", "lan0", "-m", "conntrack",
             "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
            ["-A", "FORWARD", "-i", "wan+", "-o", "lan0", "-j", "DROP"],
        ]
        for rule in rules:
            shell.run(in_netns(c.router_netns, ["iptables", "-w", *rule]))

    def add_one_to_one_nat(self, c: Cluster) -> None:
        """1:1 NAT, as in cloud regions: every node's private address has a
        public one of its own (Node.public) on the router; connections in and
        out are translated, nothing else is filtered."""
        for n in c.nodes:
            for rule in (["-t", "nat", "-A", "PREROUTING", "-i", "wan+", "-d", n.public, "-j", "DNAT",
                          "--to-destination", n.address],
                         ["-t", "nat", "-A", "POSTROUTING", "-s", n.address, "-o", "wan+", "-j", "SNAT",
                          "--to-source", n.public]):
                shell.run(in_netns(c.router_netns, ["iptables", "-w", *rule]))

    def build_wan(self) -> None:
        mtu = str(self.topo.mtu)
        for link in self.topo.links:
            for here, there in ((link.a, link.b), (link.b, link.a)):
                rt = self.topo.cluster(here).router_netns
                dev = emulator.tun_device(there)
                ip(rt, "tuntap", "add", "dev", dev, "mode", "tun")
                ip(rt, "addr", "add", self.topo.cluster(here).public_address,
                   "peer", self.topo.cluster(there).public_address, "dev", dev)
                ip(rt, "link", "set", dev, "mtu", mtu, "up")
                steer_receive(rt, dev)
        for c in self.topo.clusters:
            for dest_name, link in self.topo.next_hops(c.name).items():
                neighbour = link.b if link.a == c.name else link.a
                dest = self.topo.cluster(dest_name)
                dev = emulator.tun_device(neighbour)
                if neighbour != dest_name:
                    ip(c.router_netns, "route", "add", f"{dest.public_address}/32", "dev", dev)
                if not dest.private:
                    ip(c.router_netns, "route", "add", dest.network, "dev", dev)
                if dest.nat:
                    ip(c.router_netns, "route", "add", dest.nat_network, "dev", dev)
                if dest.relay_nodes:
                    ip(c.router_netns, "route", "add", dest.relay_network, "dev", dev)
        self.start_wanem()

    def start_wanem(self) -> None:
        self.wanem = emulator.start(self.topo)
        self.state().save()


def node_tcp_sysctls(topo: Topology, c: Cluster) -> list[str]:
    """key=value settings of a node of cluster c: tcp_rmem/tcp_wmem max raised to
    2 x the largest bandwidth-delay product from c (tcptune.py), never lowered
    below the value a new namespace inherits from the host (the kernel default)."""
    limit = tcptune.buffer_limit(topo, c.name)
    settings = list(NODE_SYSCTLS)
    for key in tcptune.TCP_BUFFER_SYSCTLS:
        inherited = (Path("/proc/sys") / key.replace(".", "/")).read_text()
        raised = tcptune.raised_triple(inherited, limit)
        if raised is not None:
            settings.append(f"{key}={raised}")
    return settings


def restart_emulator(state: State, topo: Topology, mtus: dict[str, int] | None = None) -> None:
    """Stop the running emulator and start it again from the topology's settings,
    with `mtus` (link name -> MTU) set on those links' TUN devices first (the
    topology's MTU elsewhere). wanem sizes its packet buffers when it attaches,
    so a larger MTU needs a restart. Counters start from zero."""
    if state.wanem_pid and _alive(state.wanem_pid):
        kill_pids([state.wanem_pid])
    state.wanem_pid = None
    state.save()
    for link in topo.links:
        mtu = str((mtus or {}).get(link.name, topo.mtu))
        for here, there in ((link.a, link.b), (link.b, link.a)):
            ip(topo.cluster(here).router_netns, "link", "set", emulator.tun_device(there), "mtu", mtu)
    state.wanem_pid = emulator.start(topo, mtus).pid
    state.save()


def steer_receive(netns: str, dev: str) -> None:
    """Process what the emulator writes into a TUN device on the other CPUs (RPS),
    so the receiving network stack does not run on the emulator's CPU."""
    cpu = emulator.cpu()
    if cpu is None:
        return
    mask = format((1 << cpu) - 1, "x")
    shell.run(in_netns(netns, ["sh", "-c", f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"]))


def health(state: State) -> list[str]:
    """What is wrong with a running testbed (empty if nothing)."""
    problems = []
    present = set(existing_namespaces())
    missing = [n for n in state.namespaces if n not in present]
    if missing:
        problems.append(f"missing namespaces: {', '.join(missing)}")
    if state.wanem_pid is None or not _alive(state.wanem_pid):
        problems.append(f"the WAN emulator is not running (last words: {emulator.log_tail()})")
    else:
        try:
            emulator.request({"cmd": "show"}, timeout=2)
        except (OSError, emulator.EmulatorError) as e:
            problems.append(f"the WAN emulator does not answer on its control socket: {e}")
    return problems


# ---- remove -----------------------------------------------------------------
def teardown(state: State | None) -> None:
    """Remove what `state` lists, then every other wm-* leftover."""
    if state is not None and state.wanem_pid and _alive(state.wanem_pid):
        kill_pids([state.wanem_pid])
    clean()


def clean() -> list[str]:
    """Remove every testbed namespace and the processes inside them, and any
    emulator left running. Returns what was removed."""
    removed = []
    for pid in emulator.pids():
        kill_pids([pid])
        removed.append(f"wanem process {pid}")
    namespaces = existing_namespaces()
    pids = [p for ns in namespaces for p in namespace_pids(ns)]
    if pids:
        kill_pids(pids)
        removed.append(f"{len(pids)} process(es) in testbed namespaces")
    for ns in namespaces:
        shell.run(["ip", "netns", "delete", ns], check=False)
        removed.append(f"namespace {ns}")
    state = State.load()
    if state is not None:
        for key, value in state.sysctls_before.items():
            (Path("/proc/sys") / key.replace(".", "/")).write_text(value)
    for leftover in (paths.STATE_FILE, paths.STATE_FILE.with_suffix(".tmp"), paths.HOSTS_FILE,
                     emulator.CONFIG, emulator.CONTROL):
        leftover.unlink(missing_ok=True)
    ssh.remove_files()
    removed += vpn.clean()                                  # a WireGuard tunnel's (bench vpn) leftovers
    for job_dir in Path("/tmp").glob("wanrelay-job.*"):    # a relay host's key directory, if its
        shutil.rmtree(job_dir, ignore_errors=True)           # script was killed with the testbed
        removed.append(f"relay key directory {job_dir}")
    return removed
