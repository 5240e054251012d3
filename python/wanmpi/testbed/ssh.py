"""Real ssh on the testbed (`wanmpi testbed up --ssh`): an OpenSSH server in
every node and relay namespace, so that a topology of real hosts
(`wanmpi testbed hosts -o FILE`) is launched exactly as on real sites: over
ssh, with no namespace shortcut.

Everything lives in the testbed's state directory (paths.STATE_DIR/ssh):
one host key and one user key made for this testbed, the client config and
known_hosts naming every node, and `ssh`, the wrapper to give wanmpi as
WANMPI_SSH (MPICH's launcher takes one program, not a command line). Each
sshd runs inside its node's namespace with the node's hostname and the
testbed's hosts file as /etc/hosts (as ns-exec gives the launcher's
commands) and a private, empty /opt/wanmpi (a host's own disk, where `wanmpi
deploy` puts the installation), in the foreground of a process the teardown kills with the
namespace. The host's own ssh configuration and keys are never touched."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from .. import paths, shell
from ..topo import Topology

SSHD = Path("/usr/sbin/sshd")
SSH_DIR = paths.STATE_DIR / "ssh"
HOST_KEY = SSH_DIR / "host_ed25519"
USER_KEY = SSH_DIR / "id_ed25519"
AUTHORIZED_KEYS = SSH_DIR / "authorized_keys"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
CLIENT_CONFIG = SSH_DIR / "config"
WRAPPER = SSH_DIR / "ssh"
PORT = 22
# Seen over ssh, each machine has its own (empty) directory here, as a real
# host has its own disk: where `wanmpi deploy` installs (the default prefix).
HOST_LOCAL = Path("/opt/wanmpi")
START_TIMEOUT_S = 10.0


class SshError(RuntimeError):
    """The testbed's ssh servers could not be started; says which and why."""


def endpoints(topo: Topology) -> list[tuple[str, str, str]]:
    """(name, netns, address) of every machine that gets an sshd: nodes, and
    relays on their outside address (where the other site reaches them)."""
    return [(n.name, n.netns, n.address) for n in topo.nodes] + \
           [(r.name, r.netns, r.outside) for r in topo.relays]


def make_keys() -> None:
    if shutil.which("ssh-keygen") is None or not SSHD.exists():
        raise SshError("OpenSSH is not installed (apt-get install openssh-server openssh-client; "
                       "`make setup` does it)")
    SSH_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key in (HOST_KEY, USER_KEY):
        if not key.exists():
            shell.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"wanmpi testbed {key.name}",
                       "-f", str(key)])
    AUTHORIZED_KEYS.write_text(USER_KEY.with_suffix(".pub").read_text())
    AUTHORIZED_KEYS.chmod(0o600)


def server_config(name: str, address: str) -> Path:
    path = SSH_DIR / f"sshd_config-{name}"
    path.write_text("\n".join([
        f"ListenAddress {address}:{PORT}",
        f"HostKey {HOST_KEY}",
        f"AuthorizedKeysFile {AUTHORIZED_KEYS}",
        f"PidFile {SSH_DIR / f'sshd-{name}.pid'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "X11Forwarding no",
        "MaxStartups 200:30:400",      # launchers open many sessions at once
        "MaxSessions 200",
        "LogLevel ERROR",
    ]) + "\n")
    return path


def client_config(topo: Topology) -> str:
    """The ssh client's view: every machine by name, this testbed's keys only."""
    lines = []
    jump = {n.name: c.relay_nodes[0].name for c in topo.clusters
            if c.private and not c.nat and c.relay_nodes for n in c.nodes}
    for name, _netns, address in endpoints(topo):
        lines += [f"Host {name}", f"    HostName {address}"]
        if name in jump:              # a private cluster's nodes: through its relay host, as a bastion
            lines.append(f"    ProxyJump {jump[name]}")
    lines += ["Host *", "    User root", f"    IdentityFile {USER_KEY}", "    IdentitiesOnly yes",
              f"    UserKnownHostsFile {KNOWN_HOSTS}", "    GlobalKnownHostsFile /dev/null",
              "    StrictHostKeyChecking yes", "    BatchMode yes", "    ConnectTimeout 5",
              "    LogLevel ERROR", "    ForwardAgent no", "    ForwardX11 no"]
    return "\n".join(lines) + "\n"


def write_client_files(topo: Topology) -> None:
    key = HOST_KEY.with_suffix(".pub").read_text().split()[:2]
    KNOWN_HOSTS.write_text("".join(f"{name},{address} {' '.join(key)}\n"
                                   for name, _netns, address in endpoints(topo)))
    CLIENT_CONFIG.write_text(client_config(topo))
    WRAPPER.write_text(f'#!/bin/sh\n# WANMPI_SSH for this testbed: ssh with its own config and keys\n'
                       f'exec ssh -F {CLIENT_CONFIG} "$@"\n')
    WRAPPER.chmod(0o755)


def start_server(name: str, netns: str, address: str) -> subprocess.Popen:
    config = server_config(name, address)
    log = open(SSH_DIR / f"sshd-{name}.log", "w")
    # as ns-exec: the node's hostname and the testbed's hosts file, private to this sshd;
    # and a directory of its own at HOST_LOCAL, as a real host's disk (wanmpi deploy)
    script = ('hostname "$1" && mount --bind "$2" /etc/hosts && mount -t tmpfs -o mode=755 tmpfs "$3" '
              '&& shift 3 && exec "$@"')
    argv = ["ip", "netns", "exec", netns, "unshare", "--uts", "--mount", "--propagation", "private",
            "sh", "-c", script, "sshd", name, str(paths.HOSTS_FILE), str(HOST_LOCAL),
            str(SSHD), "-D", "-e", "-f", str(config)]
    with log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)


def listening(netns: str, address: str) -> bool:
    done = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"src {address}:{PORT}"],
                          capture_output=True, text=True)
    return bool(done.stdout.strip())


def start(topo: Topology) -> None:
    """An sshd in every node and relay namespace, and the client's files."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)     # sshd's privilege separation directory
    HOST_LOCAL.mkdir(parents=True, exist_ok=True)            # the mount point (left empty here)
    make_keys()
    write_client_files(topo)
    servers = {name: (start_server(name, netns, address), netns, address)
               for name, netns, address in endpoints(topo)}
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = dict(servers)
    while waiting:
        for name, (proc, netns, address) in list(waiting.items()):
            if proc.poll() is not None:
                log = (SSH_DIR / f"sshd-{name}.log").read_text().strip().splitlines()
                raise SshError(f"sshd on {name} ({address}) exited with {proc.returncode}: "
                               f"{log[-1] if log else 'no message'}")
            if listening(netns, address):
                del waiting[name]
        if waiting and time.monotonic() > deadline:
            raise SshError(f"sshd did not listen within {START_TIMEOUT_S:g} s on "
                           + ", ".join(f"{n} ({a[2]}:{PORT})" for n, a in waiting.items()))
        time.sleep(0.05)


def remove_files() -> None:
    shutil.rmtree(SSH_DIR, ignore_errors=True)

