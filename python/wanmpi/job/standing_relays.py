"""Relays kept running on real relay hosts (`wanmpi relay up|down|status`),
for sites whose admins run them as a service; with `[relay] standing = true`
in the topology, `wanmpi run` uses them instead of starting relays per job.

On each relay host, in STATE: NAME.key (mode 0600), NAME.json (its
configuration), NAME.pid and NAME.log, NAME being the relay's name in the
topology (`files(NAME)`). `up` writes key and configuration through the ssh
session's stdin (never on a command line), starts wanrelay detached and waits
until every trunk is up; `status` says for each relay whether it runs and
which trunks are up (its metrics, read on the host); `down` stops it
(SIGTERM: its graceful shutdown) and removes the files. The install's systemd
unit (share/wanmpi/systemd/wanrelay@.service) runs the same configuration:
make install writes `files("%i").config` into it."""
from __future__ import annotations

import secrets
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..topo import RELAY_METRICS_PORT, Relay, Topology
from . import relays, remote_relay

STATE = "/var/lib/wanmpi/relay"
START_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class RelayFiles:
    """Where a standing relay's files are on its host."""
    key: str
    config: str
    pid: str
    log: str


def files(name: str) -> RelayFiles:
    """The files of relay `name` (the systemd unit: files("%i"))."""
    return RelayFiles(*(f"{STATE}/{name}.{kind}" for kind in ("key", "json", "pid", "log")))


# The scripts run on the relay host as `sh -c SCRIPT wanrelay-standing
# WANRELAY STATE KEY CONFIG PID LOG [METRICS_PORT]` ($1 .. $7; `_script`).
UP = remote_relay.WRITE_FILES + r'''set -e
umask 077
mkdir -p "$2"
if [ -f "$5" ] && kill -0 "$(cat "$5")" 2>/dev/null; then cat >/dev/null; echo "already running"; exit 0; fi
write_files "$3" "$4"
setsid "$1" --config "$4" >"$6" 2>&1 </dev/null &
echo $! > "$5"
echo started
'''
STATUS = r'''if [ -f "$5" ] && kill -0 "$(cat "$5")" 2>/dev/null; then echo running
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$7/metrics', timeout=2).read().decode())" 2>/dev/null || true
else echo stopped; tail -n 3 "$6" 2>/dev/null || true; fi
'''
DOWN = r'''pid=$(cat "$5" 2>/dev/null) || pid=
if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
    kill -9 "$pid" 2>/dev/null || true
    echo stopped
else echo "not running"; fi
rm -f "$3" "$4" "$5" "$6"
'''


class StandingError(RuntimeError):
    """The standing relays cannot be started, stopped or used; says which and why."""


@dataclass
class RelayState:
    relay: Relay
    running: bool
    trunks: set[tuple[str, int]]
    detail: str = ""


def _script(relay: Relay, script: str, *args: str, stdin: bytes | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess:
    f = files(relay.name)
    command = shlex.join(["sh", "-c", script, "wanrelay-standing", str(paths.WANRELAY), STATE, f.key, f.config,
                          f.pid, f.log, *args])
    try:
        done = subprocess.run([*shlex.split(paths.REMOTE_SHELL), relay.host, command], input=stdin,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StandingError(f"relay host {relay.host}: no answer within {timeout:g} s") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise StandingError(f"relay host {relay.host}: {err[-1] if err else f'exit {done.returncode}'}")
    return done


def _real_relays(topo: Topology) -> list[Relay]:
    found = [r for r in topo.relays if not r.emulated]
    if not found:
        raise StandingError(f"{topo.source}: no relay hosts (a real cluster names them: "
                            "relays = [{ host = ..., inside = ..., outside = ... }])")
    return found


def status(topo: Topology) -> list[RelayState]:
    states = []
    for r in _real_relays(topo):
        out = _script(r, STATUS, str(RELAY_METRICS_PORT)).stdout.decode(errors="replace")
        first, _, rest = out.partition("\n")
        up = {(peer, int(k)) for peer, k, v in relays.TRUNK_UP.findall(rest) if v == "1"}
        states.append(RelayState(r, first.strip() == "running", up, rest.strip() if first != "running" else ""))
    return states


def missing(topo: Topology, states: list[RelayState]) -> list[str]:
    """What is not as it should be: relays not running, trunks not up."""
    out = []
    for s in states:
        if not s.running:
            out.append(f"relay {s.relay.name} ({s.relay.host}) is not running"
                       + (f": {s.detail.splitlines()[-1]}" if s.detail else ""))
            continue
        for peer, k in sorted(relays.expected_trunks(topo, s.relay) - s.trunks):
            out.append(f"relay {s.relay.name}: trunk {k} to {peer} is not up")
    return out


def up(topo: Topology, timeout: float = START_TIMEOUT_S) -> list[RelayState]:
    key = secrets.token_hex(32)
    for r in _real_relays(topo):
        _script(r, UP, stdin=remote_relay.credentials(relays.config(topo, r, Path(remote_relay.KEY_FILE)), key))
    deadline = time.monotonic() + timeout
    while True:
        states = status(topo)
        problems = missing(topo, states)
        if not problems:
            return states
        if time.monotonic() > deadline:
            raise StandingError(f"the relays are not all up after {timeout:g} s: " + "; ".join(problems[:4]))
        time.sleep(0.5)


def down(topo: Topology) -> list[tuple[Relay, str]]:
    return [(r, _script(r, DOWN).stdout.decode().strip()) for r in _real_relays(topo)]


def require_up(topo: Topology) -> None:
    """For a job on standing relays: every relay runs and every trunk is up."""
    problems = missing(topo, status(topo))
    if problems:
        raise StandingError("the standing relays are not ready (`wanmpi relay up -t TOPOLOGY` starts them): "
                            + "; ".join(problems[:4]))


def render(topo: Topology, states: list[RelayState]) -> str:
    lines = []
    for s in states:
        expected = relays.expected_trunks(topo, s.relay)
        lines.append(f"{s.relay.name:<16} {s.relay.host:<20} {'running' if s.running else 'stopped':<8} "
                     f"trunks up {len(s.trunks & expected)}/{len(expected)}")
    return "\n".join(lines)
