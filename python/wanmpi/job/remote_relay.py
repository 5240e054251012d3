"""wanrelay on a real relay host for one job, started through the remote
shell ($WANMPI_SSH) as on real sites.

The job's pre-shared key and the relay's configuration travel on the ssh
session's stdin, never on a command line or in the environment: a small sh
script on the host writes them into a fresh mode-0700 directory (the key
mode 0600), starts wanrelay, and keeps reading stdin. When wanmpi closes it
(the job ended, failed, timed out or was interrupted) or dies (the kernel
closes the pipe, ssh sees EOF), the script stops wanrelay (SIGTERM: its
graceful shutdown) and removes the directory; if wanrelay exits on its own,
the session ends and wanmpi sees the relay die. Nothing is left on the host
either way. wanrelay's log comes back on the session and tells when its
trunks are up."""
from __future__ import annotations

import base64
import json
import re
import shlex
import subprocess
import time
from pathlib import Path

from .. import paths
from ..topo import Relay

KEY_FILE = "@WANMPI_KEY_FILE@"      # in the config; the host writes the key's real path there
STOP_WAIT_S = 8.0                   # wanrelay's own shutdown grace is 5 s
TRUNK_UP = re.compile(r'trunk up: peer relay authenticated .*?peer="?([\w.-]+)"? .*?slot=(\d+)')
RBUDP_UP = re.compile(r'RBUDP session up: .*?peer="?([\w.-]+)"?')

# A shell function for the scripts on relay hosts (here and standing_relays.py):
# `write_files KEY CONFIG` reads the two lines `credentials` sends and writes
# the key and the configuration (its key_file pointing at KEY) under umask 077.
WRITE_FILES = r'''write_files() {
    IFS= read -r key
    IFS= read -r conf
    printf '%s' "$key" > "$1"
    printf '%s' "$conf" | base64 -d | sed "s#@WANMPI_KEY_FILE@#$1#" > "$2"
}
'''

# $1: the wanrelay binary. stdin: the key (one line), the config (base64, one
# line), then nothing until the job ends.
SCRIPT = WRITE_FILES + r'''set -e
umask 077
d=$(mktemp -d "${TMPDIR:-/tmp}/wanrelay-job.XXXXXX")
watcher=
trap 'kill "$watcher" "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$d"' EXIT
trap 'exit 143' TERM HUP INT
write_files "$d/key" "$d/config.json"
exec 3<&0
"$1" --config "$d/config.json" </dev/null &
pid=$!
{ cat <&3 >/dev/null; kill "$pid" 2>/dev/null; } &
watcher=$!
set +e
wait "$pid"
status=$?
kill "$watcher" 2>/dev/null
exit $status
'''


def credentials(config: dict, key: str) -> bytes:
    """What WRITE_FILES reads: the key, then the configuration (whose key_file
    is KEY_FILE) in base64, a line each."""
    return f"{key}\n{base64.b64encode(json.dumps(config).encode()).decode()}\n".encode()


def start(relay: Relay, config: dict, key: str, log: Path) -> subprocess.Popen:
    """wanrelay on `relay.host` with `config` (whose key_file is KEY_FILE);
    its output goes to `log`. The returned process is the ssh session."""
    command = f"sh -c {shlex.quote(SCRIPT)} wanrelay-job {shlex.quote(str(paths.WANRELAY))}"
    with open(log, "w") as out:
        proc = subprocess.Popen([*shlex.split(paths.REMOTE_SHELL), relay.host, command],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        proc.stdin.write(credentials(config, key))
        proc.stdin.flush()
    except BrokenPipeError:
        pass                        # the session failed at once: its log says why
    return proc


def stop(procs: list[subprocess.Popen]) -> None:
    """Ends the sessions: stdin closed (the host stops wanrelay and cleans up),
    then killed if they do not end in time."""
    for p in procs:
        try:
            p.stdin.close()
        except (OSError, AttributeError):
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def trunks_up(log: Path, rbudp: bool) -> set[tuple[str, int]]:
    """(peer, slot) of the trunks the relay's log says are up (with rbudp:
    as many RBUDP sessions up to that peer as trunks)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return set()
    up = {(peer, int(slot)) for peer, slot in TRUNK_UP.findall(text)}
    if rbudp:
        sessions: dict[str, int] = {}
        for peer in RBUDP_UP.findall(text):
            sessions[peer] = sessions.get(peer, 0) + 1
        up = {(peer, k) for peer, k in up if k < sessions.get(peer, 0)}
    return up
