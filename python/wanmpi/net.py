"""The emulated testbed: builds a `Topology` out of network namespaces.

Per cluster (see docs/testbed.md for the naming and addressing scheme):
  wm-{c}-sw   the switch: bridge br0, one port per node ({node}-port, with a tbf
              queue toward the node: NIC rate, port_buffer bytes) and one
              uplink to the router
  wm-{c}-r    the router: lan0 on the switch, one TUN device wan-{peer} per
              WAN link, driven by the wanem emulator; NAT if the cluster is
              private
  wm-{node}   one namespace per node: eth0 (tbf at the NIC rate), default
              route via the router
The WAN links are served by one `wanem` process (delay, rate, drop-tail
queue, loss) whose control socket `wanmpi link` talks to.

Every build step is undone on failure; `down` and `clean` remove every
namespace and process the testbed created.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import paths, shell
from .topo import NETNS_PREFIX, Cluster, Node, Topology, WanLink

HOST_QUEUE_BYTES = 1_500_000     # a node's own transmit queue (1000 full packets)
GLOBAL_SYSCTLS = {"net.core.netdev_max_backlog": 10000}
NS_SYSCTLS = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]


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

    def __init__(self, topo: Topology):
        if not topo.emulated:
            raise TestbedError(f"{topo.source}: lists real hosts; there is no testbed to build "
                               "(wanmpi run launches over ssh directly)")
        self.topo = topo
        self.created: list[str] = []
        self.wanem: subprocess.Popen | None = None
        self.sysctls_before: dict[str, str] = {}

    # ---- build -------------------------------------------------------------
    def up(self) -> bool:
        """Build the testbed; False if this topology is already up and healthy."""
        state = State.load()
        if state is not None:
            if state.topology_text == self.topo.text and not health(state):
                return False
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
            if isinstance(e, (shell.CommandError, OSError, TestbedError)):
                raise TestbedError(f"testbed up failed and was undone: {e}") from None
            raise
        return True

    def state(self) -> State:
        return State(self.topo.source, self.topo.text, list(self.created),
                     self.wanem.pid if self.wanem else None, self.sysctls_before)

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
        self.state().save()

    def write_hosts_file(self) -> None:
        lines = ["127.0.0.1\tlocalhost"]
        lines += [f"{n.address}\t{n.name}" for n in self.topo.nodes]
        paths.HOSTS_FILE.write_text("\n".join(lines) + "\n")

    def raise_global_sysctls(self) -> None:
        for key, value in GLOBAL_SYSCTLS.items():
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
        if c.private:
            self.add_nat(c)

    def build_node(self, c: Cluster, node: Node) -> None:
        mtu = self.topo.mtu
        ns, port = node.netns, f"{node.name}-port"
        self.add_netns(ns)
        ip(ns, "link", "add", "eth0", "mtu", str(mtu), "type", "veth",
           "peer", "name", port, "mtu", str(mtu), "netns", c.switch_netns)
        ip(c.switch_netns, "link", "set", port, "master", "br0", "up")
        ip(ns, "addr", "add", f"{node.address}/{c.prefixlen}", "dev", "eth0")
        ip(ns, "link", "set", "eth0", "up")
        ip(ns, "route", "add", "default", "via", c.gateway)
        tbf(ns, "eth0", c.nic_bps, HOST_QUEUE_BYTES, mtu)              # the node's NIC
        tbf(c.switch_netns, port, c.nic_bps, c.port_buffer, mtu)       # switch port toward it

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

    def build_wan(self) -> None:
        mtu = str(self.topo.mtu)
        for link in self.topo.links:
            for here, there in ((link.a, link.b), (link.b, link.a)):
                rt = self.topo.cluster(here).router_netns
                dev = f"wan-{there}"
                ip(rt, "tuntap", "add", "dev", dev, "mode", "tun")
                ip(rt, "addr", "add", self.topo.cluster(here).public_address,
                   "peer", self.topo.cluster(there).public_address, "dev", dev)
                ip(rt, "link", "set", dev, "mtu", mtu, "up")
                steer_receive(rt, dev)
        for c in self.topo.clusters:
            for dest_name, link in self.topo.next_hops(c.name).items():
                neighbour = link.b if link.a == c.name else link.a
                dest = self.topo.cluster(dest_name)
                dev = f"wan-{neighbour}"
                if neighbour != dest_name:
                    ip(c.router_netns, "route", "add", f"{dest.public_address}/32", "dev", dev)
                if not dest.private:
                    ip(c.router_netns, "route", "add", dest.network, "dev", dev)
        self.start_wanem()

    def start_wanem(self) -> None:
        if not paths.WANEM.is_file():
            raise TestbedError(f"the WAN emulator {paths.WANEM} is not built (run `make build`)")
        config = paths.STATE_DIR / "wanem.json"
        config.write_text(json.dumps(wanem_config(self.topo), indent=1))
        control = paths.STATE_DIR / "wanem.sock"
        log = open(paths.STATE_DIR / "wanem.log", "w")
        self.wanem = subprocess.Popen(
            [str(paths.WANEM), "--config", str(config), "--control", str(control)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.state().save()
        tune_emulator(self.wanem.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.wanem.poll() is not None:
                raise TestbedError(f"the WAN emulator exited at start (code {self.wanem.returncode}): "
                                   f"{tail(paths.STATE_DIR / 'wanem.log')}")
            try:
                wanem_request({"cmd": "show"})
                return
            except OSError:
                time.sleep(0.05)
        raise TestbedError("the WAN emulator did not open its control socket within 10 s")


def emulator_cpu() -> int | None:
    """The CPU the emulator gets to itself (the last one), None on a single CPU."""
    cpus = os.cpu_count() or 1
    return cpus - 1 if cpus > 1 else None


def steer_receive(netns: str, dev: str) -> None:
    """Process what the emulator writes into a TUN device on the other CPUs (RPS),
    so the receiving network stack does not run on the emulator's CPU."""
    cpu = emulator_cpu()
    if cpu is None:
        return
    mask = format((1 << cpu) - 1, "x")
    shell.run(in_netns(netns, ["sh", "-c", f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"]))


def tune_emulator(pid: int) -> None:
    """Give the emulator a CPU of its own at real-time priority (see ARCHITECTURE.md,
    "Testbed fidelity"): ranks run at idle priority, packets must never wait for them."""
    cpu = emulator_cpu()
    if cpu is not None:
        shell.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], check=False)
    shell.run(["chrt", "-a", "-f", "-p", "50", str(pid)], check=False)


def wanem_config(topo: Topology) -> dict:
    def direction(link: WanLink, seed: int) -> dict:
        return {"rate_bps": link.rate_bps, "delay_us": link.delay_us,
                "queue_bytes": link.queue_bytes, "loss": link.loss, "seed": seed, "up": True}
    return {"links": [
        {"name": link.name,
         "a": {"netns": f"/run/netns/{topo.cluster(link.a).router_netns}", "dev": f"wan-{link.b}"},
         "b": {"netns": f"/run/netns/{topo.cluster(link.b).router_netns}", "dev": f"wan-{link.a}"},
         "mtu": topo.mtu,
         "a_to_b": direction(link, 2 * i + 1), "b_to_a": direction(link, 2 * i + 2)}
        for i, link in enumerate(topo.links)]}


def wanem_request(request: dict, timeout: float = 5.0) -> dict:
    """One request to the running emulator's control socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(paths.STATE_DIR / "wanem.sock"))
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text().strip().splitlines()[-lines:]) or "(no output)"
    except OSError:
        return "(no log)"


def health(state: State) -> list[str]:
    """What is wrong with a running testbed (empty if nothing)."""
    problems = []
    present = set(existing_namespaces())
    missing = [n for n in state.namespaces if n not in present]
    if missing:
        problems.append(f"missing namespaces: {', '.join(missing)}")
    if state.wanem_pid is None or not _alive(state.wanem_pid):
        problems.append(f"the WAN emulator is not running (last words: "
                        f"{tail(paths.STATE_DIR / 'wanem.log')})")
    else:
        try:
            wanem_request({"cmd": "show"}, timeout=2)
        except (OSError, ValueError) as e:
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
    for pid in emulator_pids():
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
    for leftover in ("testbed.json", "testbed.tmp", "hosts", "wanem.json", "wanem.sock"):
        (paths.STATE_DIR / leftover).unlink(missing_ok=True)
    return removed


def emulator_pids() -> list[int]:
    """Running wanem processes started with this state directory's config."""
    config = str(paths.STATE_DIR / "wanem.json").encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"wanem") and config in cmdline and _alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids
