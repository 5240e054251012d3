"""A WireGuard tunnel between two clusters' routers: what admins join a private
cluster with today, set up the way they do, so that `wanmpi bench vpn` can
measure relays + wanmpi against it on the same testbed.

    public cluster pub (198.18.0.0/24)          private cluster priv (10.1.0.0/24)
    router wm-pub-r: wm-wg0 ==== UDP 51820 over the emulated WAN ==== wm-wg1 :router wm-priv-r
      route 10.1.0.0/24 dev wm-wg0                rule from 10.1.0.0/24 to 198.18.0.0/24
                                                  lookup 51820: 198.18.0.0/24 dev wm-wg1

The private nodes keep their default route through their router; the router
sends their traffic to the public cluster into the tunnel (policy routing, so
the routers' own traffic and the relays' keep the WAN path), and the public
router routes the private network into it. Nothing is translated: across the
tunnel each side sees the other's own addresses, so a plain MPI connects
both ways. The tunnel's end devices are `wm-wg<cluster index>`; their
WireGuard is wireguard-go (userspace, over TUN: Debian's kernel module may
be missing), one process per router, in the router's namespace.

Private keys are made per tunnel in mode-0600 files in the testbed's state
directory (paths.STATE_DIR/vpn) and given to `wg set ... private-key FILE`,
never on a command line. `Tunnel` removes everything it made on leaving its
block (success, error or Ctrl-C): routes, rule, processes, devices, keys;
`clean()` removes what a killed run left (`wanmpi clean`, `testbed down`).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .. import paths, shell
from ..topo import Cluster, Topology

WIREGUARD_GO = "wireguard-go"
WG = "wg"
INSTALL_HINT = "apt-get install wireguard-go wireguard-tools; `make setup` does it"
VPN_DIR = paths.STATE_DIR / "vpn"
UAPI_DIR = Path("/run/wireguard")         # where wireguard-go keeps its control socket (fixed by wireguard-go)
DEVICE_PREFIX = "wm-wg"
PORT = 51820                              # UDP, on each router's WAN address
ROUTE_TABLE = "51820"                     # the private router's table for the tunnel
RULE_PRIORITY = "1000"                    # before the main table (32766)
START_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 10.0


class VpnError(RuntimeError):
    """The tunnel cannot be set up (or the topology has no place for one); says why."""


def device(c: Cluster) -> str:
    return f"{DEVICE_PREFIX}{c.index}"


def require_tools() -> None:
    missing = [t for t in (WIREGUARD_GO, WG) if shutil.which(t) is None]
    if missing:
        raise VpnError(f"{' and '.join(missing)} not found on PATH: the WireGuard tunnel needs "
                       f"wireguard-go and wg ({INSTALL_HINT})")


def ends(t: Topology) -> tuple[Cluster, Cluster]:
    """(public, private): the clusters the tunnel joins. The topology needs one
    private cluster (behind NAT, `private = true`) and one public one."""
    private = [c for c in t.clusters if c.private and not c.nat]
    public = [c for c in t.clusters if not c.private]
    names = ", ".join(f"{c.name} ({'1:1 NAT' if c.nat else 'private' if c.private else 'public'})"
                      for c in t.clusters)
    if len(private) != 1 or len(public) != 1:
        want = "no private cluster (`private = true`)" if not private else (
            f"{len(private)} private clusters" if len(private) > 1 else
            "no public cluster" if not public else f"{len(public)} public clusters")
        raise VpnError(f"{t.source}: {want}: the WireGuard tunnel joins one private cluster to one public "
                       f"one (clusters: {names})")
    return public[0], private[0]


def _in_netns(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def _ip(netns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return shell.run(["ip", "-n", netns, *args], check=check)


class Tunnel:
    """The tunnel of a testbed that is up, for the length of a `with` block."""

    def __init__(self, t: Topology):
        self.public, self.private = ends(t)
        self.processes: dict[str, subprocess.Popen] = {}
        self.undo: list[list[str]] = []       # ip commands that reverse what was set, run last first

    def __enter__(self) -> "Tunnel":
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # ---- up -----------------------------------------------------------------
    def up(self) -> None:
        require_tools()
        VPN_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        keys = {c.name: self.make_key(c) for c in (self.public, self.private)}
        for c in (self.public, self.private):
            self.start_daemon(c)
        for here, there in ((self.public, self.private), (self.private, self.public)):
            shell.run(_in_netns(here.router_netns, [
                WG, "set", device(here), "private-key", str(keys[here.name][0]), "listen-port", str(PORT),
                "peer", keys[there.name][1], "allowed-ips", there.network,
                "endpoint", f"{there.public_address}:{PORT}"]))
            _ip(here.router_netns, "link", "set", device(here), "up")
        pub, priv = self.public, self.private
        self.apply(pub.router_netns, ["route", "add", priv.network, "dev", device(pub)],
                   ["route", "del", priv.network, "dev", device(pub)])
        self.apply(priv.router_netns, ["route", "add", pub.network, "dev", device(priv), "table", ROUTE_TABLE],
                   ["route", "flush", "table", ROUTE_TABLE])
        self.apply(priv.router_netns, ["rule", "add", "from", priv.network, "to", pub.network,
                                       "lookup", ROUTE_TABLE, "priority", RULE_PRIORITY],
                   ["rule", "del", "priority", RULE_PRIORITY])
        self.await_handshake()

    def make_key(self, c: Cluster) -> tuple[Path, str]:
        """A fresh private key in a mode-0600 file, and its public key."""
        path = VPN_DIR / f"{device(c)}.key"
        path.unlink(missing_ok=True)
        secret = shell.output([WG, "genkey"])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret)
        return path, shell.output([WG, "pubkey"], input=secret).strip()

    def start_daemon(self, c: Cluster) -> None:
        dev = device(c)
        log = open(VPN_DIR / f"{dev}.log", "w")
        with log:
            # -f: stays in the foreground, so it is ours to stop (by its pid)
            self.processes[dev] = subprocess.Popen(_in_netns(c.router_netns, [WIREGUARD_GO, "-f", dev]),
                                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                   start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (UAPI_DIR / f"{dev}.sock").exists():
            if self.processes[dev].poll() is not None:
                said = [l for l in (VPN_DIR / f"{dev}.log").read_text().splitlines() if l.strip()]
                raise VpnError(f"wireguard-go for {dev} in {c.router_netns} exited with "
                               f"{self.processes[dev].returncode}: {said[-1] if said else 'no message'}")
            if time.monotonic() > deadline:
                raise VpnError(f"wireguard-go for {dev} in {c.router_netns} made no control socket "
                               f"({UAPI_DIR / f'{dev}.sock'}) within {START_TIMEOUT_S:g} s")
            time.sleep(0.02)

    def apply(self, netns: str, args: list[str], undo: list[str]) -> None:
        _ip(netns, *args)
        self.undo.append(["ip", "-n", netns, *undo])

    def await_handshake(self) -> None:
        """Packets cross: a ping from the public router's LAN address to the
        private router's (both inside the tunnel's allowed networks)."""
        pub, priv = self.public, self.private
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        while True:
            done = shell.run(_in_netns(pub.router_netns, ["ping", "-c", "1", "-W", "1", "-I", pub.gateway,
                                                          priv.gateway]), check=False)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise VpnError(f"no packet crossed the tunnel {device(pub)} -> {device(priv)} within "
                               f"{HANDSHAKE_TIMEOUT_S:g} s (ping {priv.gateway} from {pub.gateway})")

    def transfer(self) -> dict[str, int]:
        """Bytes through the tunnel so far, as the private end counts them."""
        out = shell.output(_in_netns(self.private.router_netns, [WG, "show", device(self.private), "transfer"]))
        fields = out.split()
        return {"received": int(fields[1]), "sent": int(fields[2])} if len(fields) >= 3 else \
            {"received": 0, "sent": 0}

    # ---- down ---------------------------------------------------------------
    def down(self) -> None:
        """Everything `up` made, in reverse; best effort, each step on its own."""
        while self.undo:
            shell.run(self.undo.pop(), check=False)
        for dev, proc in self.processes.items():
            stop(proc)
            (UAPI_DIR / f"{dev}.sock").unlink(missing_ok=True)
        self.processes.clear()
        for c in (self.public, self.private):       # gone with its process; a leftover of a killed one
            _ip(c.router_netns, "link", "del", device(c), check=False)
        remove_files()


def stop(proc: subprocess.Popen, grace: float = 2.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def remove_files() -> None:
    shutil.rmtree(VPN_DIR, ignore_errors=True)


def daemon_pids() -> list[int]:
    """wireguard-go processes of testbed tunnels (device wm-wg*), wherever they are."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == WIREGUARD_GO \
                and any(a.startswith(DEVICE_PREFIX.encode()) for a in argv[1:]):
            pids.append(int(cmdline.parent.name))
    return pids


def clean() -> list[str]:
    """What a killed run left: tunnel daemons, their control sockets, the key
    files. (Devices, routes and rules live in the routers' namespaces and go
    with them.) Returns what was removed."""
    removed = []
    for pid in daemon_pids():
        try:
            os.kill(pid, signal.SIGKILL)
            removed.append(f"wireguard-go process {pid}")
        except ProcessLookupError:
            pass
    for sock in UAPI_DIR.glob(f"{DEVICE_PREFIX}*.sock"):
        sock.unlink(missing_ok=True)
        removed.append(f"WireGuard control socket {sock}")
    if VPN_DIR.exists():
        remove_files()
        removed.append(f"tunnel keys {VPN_DIR}")
    return removed
