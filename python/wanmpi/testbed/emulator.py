"""The WAN emulator (wanem, crates/wanem) as the testbed runs it: its config,
its process, and its control socket (protocol in docs/wanem.md)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from .. import paths, shell
from ..topo import Topology, WanLink

CONFIG = paths.STATE_DIR / "wanem.json"
CONTROL = paths.STATE_DIR / "wanem.sock"
LOG = paths.STATE_DIR / "wanem.log"
DIRECTIONS = ("a_to_b", "b_to_a")


class EmulatorError(RuntimeError):
    """The emulator could not be started or refused a request; the message says why."""


def config(topo: Topology, mtus: dict[str, int] | None = None) -> dict:
    """wanem's config for the topology: one link per WAN link, a TUN device
    `wan-<peer>` in each of the two routers, a distinct loss seed per direction.
    `mtus` gives some links another MTU than the topology's (`bench emulator`
    measures MTU 9000 on a 1500 testbed)."""
    def direction(link: WanLink, mtu: int, seed: int) -> dict:
        return {"rate_bps": link.rate_bps, "delay_us": link.delay_us,
                "queue_bytes": max(link.queue_bytes, mtu), "loss": link.loss, "seed": seed, "up": True}
    mtus = mtus or {}
    return {"links": [
        {"name": link.name,
         "a": {"netns": f"/run/netns/{topo.cluster(link.a).router_netns}", "dev": tun_device(link.b)},
         "b": {"netns": f"/run/netns/{topo.cluster(link.b).router_netns}", "dev": tun_device(link.a)},
         "mtu": mtus.get(link.name, topo.mtu),
         "a_to_b": direction(link, mtus.get(link.name, topo.mtu), 2 * i + 1),
         "b_to_a": direction(link, mtus.get(link.name, topo.mtu), 2 * i + 2)}
        for i, link in enumerate(topo.links)]}


def tun_device(peer: str) -> str:
    """The TUN device toward cluster `peer` in a router's namespace."""
    return f"wan-{peer}"


def start(topo: Topology, mtus: dict[str, int] | None = None) -> subprocess.Popen:
    """Start wanem on the topology's TUN devices and wait until it forwards."""
    if not paths.WANEM.is_file():
        raise EmulatorError(f"the WAN emulator {paths.WANEM} is not built (run `make build`)")
    CONFIG.write_text(json.dumps(config(topo, mtus), indent=1))
    with open(LOG, "w") as log:
        proc = subprocess.Popen([str(paths.WANEM), "--config", str(CONFIG), "--control", str(CONTROL)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    tune(proc.pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EmulatorError(f"the WAN emulator exited at start (code {proc.returncode}): {log_tail()}")
        try:
            request({"cmd": "show"})
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise EmulatorError("the WAN emulator did not open its control socket within 10 s")


def cpu() -> int | None:
    """The CPU the emulator gets to itself (the last one), None on a single CPU."""
    cpus = os.cpu_count() or 1
    return cpus - 1 if cpus > 1 else None


def tune(pid: int) -> None:
    """A CPU of its own at real-time priority (ARCHITECTURE.md, "Testbed fidelity"):
    ranks run at idle priority, and packets must never wait for them."""
    if cpu() is not None:
        shell.run(["taskset", "-a", "-p", "-c", str(cpu()), str(pid)], check=False)
    shell.run(["chrt", "-a", "-f", "-p", "50", str(pid)], check=False)


def request(req: dict, timeout: float = 5.0) -> dict:
    """One request to the running emulator; OSError if it does not answer,
    EmulatorError if it refuses the request."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(CONTROL))
        s.sendall(json.dumps(req).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    try:
        reply = json.loads(data)
    except json.JSONDecodeError:
        raise EmulatorError(f"the WAN emulator answered {data[:200]!r}") from None
    if not reply.get("ok", False):
        raise EmulatorError(f"the WAN emulator refused: {reply.get('error', reply)}")
    return reply


def counters() -> dict[tuple[str, str], dict]:
    """Live counters of every (link, direction)."""
    reply = request({"cmd": "show"})
    return {(l["name"], d): l[d]["counters"] for l in reply["links"] for d in DIRECTIONS}


def wait_idle(link: str, quiet_s: float = 0.2, timeout_s: float = 10.0) -> bool:
    """Wait until neither direction of `link` has had a packet in for
    `quiet_s` and nothing is queued (what an earlier flow left, its closing
    segments and retransmissions, no longer delays a probe); False if it
    was still busy after `timeout_s`."""
    def traffic() -> tuple:
        c = counters()
        return tuple((c[(link, d)]["rx_packets"], c[(link, d)]["queue_bytes"]) for d in DIRECTIONS)

    deadline = time.monotonic() + timeout_s
    last, since = traffic(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(quiet_s / 4)
        now = traffic()
        if now != last:
            last, since = now, time.monotonic()
        elif all(queued == 0 for _, queued in now) and time.monotonic() - since >= quiet_s:
            return True
    return False


SETTINGS = ("rate_bps", "delay_us", "queue_bytes", "loss", "seed", "up")


def settings() -> dict[tuple[str, str], dict]:
    """Live settings of every (link, direction), in the form `set` takes."""
    reply = request({"cmd": "show"})
    return {(l["name"], d): {k: l[d][k] for k in SETTINGS} for l in reply["links"] for d in DIRECTIONS}


def apply(saved: dict[tuple[str, str], dict]) -> None:
    """Put back settings returned by `settings()`."""
    for (link, direction), values in saved.items():
        request({"cmd": "set", "link": link, "dir": direction, **values})


def log_tail(lines: int = 3) -> str:
    try:
        return " | ".join(LOG.read_text().strip().splitlines()[-lines:]) or "(no output)"
    except OSError:
        return "(no log)"


def pids() -> list[int]:
    """Running wanem processes started with this state directory's config."""
    marker = str(CONFIG).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"wanem") and marker in cmdline and ") Z" not in stat:
            found.append(int(proc.name))
    return found
