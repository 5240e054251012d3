"""Before a job on real hosts: every host of its ranks answers through the
remote shell and has what the job will run there.

The MPI launchers report a host they cannot reach late and in their own
words (Open MPI: "ORTE was unable to reliably start one or more daemons",
after its own timeout; hydra: a bare ssh line), and neither notices a host
with another build of wanmpi, which then fails deep inside the job. So
`wanmpi run` first asks every host, in parallel and in one ssh session each:

- that it answers at all (not resolving, refused, timing out or asking for
  a password are told apart by ssh's own message, which is quoted);
- that the program is an executable file there;
- with wanmpi: that the libraries the ranks preload are there and the same
  as here (an installed prefix: the content hash of its manifest and its
  version; a source checkout: the files' checksums), or else it names both
  and says to run `wanmpi deploy`.

The launch host itself is not asked (its files are the ones compared
against). Every problem of every host is reported at once."""
from __future__ import annotations

import base64
import binascii
import json
import os
import shlex
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import install, paths
from ..topo import Node

ANSWER_TIMEOUT_S = 20.0        # ssh's own connect timeout is below it
CONNECT_TIMEOUT_S = 10
PARALLEL = 32                  # ssh sessions at once
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}")
MARK = "wanmpi-host-check"     # starts every line of the answer we parse


class HostCheckError(RuntimeError):
    """One or more hosts cannot run the job; the message names each and why."""


@dataclass(frozen=True)
class Expected:
    """What every host must have: the program, and with wanmpi the libraries
    (their checksums, or the installed prefix's content hash)."""
    program: str
    libraries: tuple[Path, ...] = ()
    manifest: Path | None = None         # an installed prefix's install.json
    content_hash: str = ""
    version: str = ""

    def command(self) -> str:
        """One shell command that prints what a host has, line by line."""
        q = shlex.quote
        parts = [f'if [ -x {q(self.program)} ] && [ ! -d {q(self.program)} ]; then echo "{MARK} program ok"; '
                 f'else echo "{MARK} program missing"; fi']
        if self.manifest is not None:
            parts.append(f'echo "{MARK} manifest $(base64 -w0 2>/dev/null < {q(str(self.manifest))})"')
        for lib in self.libraries:
            parts.append(f'echo "{MARK} library $(cksum 2>/dev/null < {q(str(lib))})"')
        return f"sh -c {shlex.quote('; '.join(parts))}"      # whatever the login shell is


def expected(program: str, libraries: list[Path]) -> Expected:
    """What this host has (the reference) for a job of `program` preloading
    `libraries` (none: the MPI alone)."""
    if not libraries:
        return Expected(program)
    if paths.PREFIX is not None:
        manifest = install.load(paths.PREFIX)
        return Expected(program, tuple(libraries), paths.PREFIX / install.MANIFEST,
                        manifest.content_hash, manifest.version)
    return Expected(program, tuple(libraries))


def checksum(path: Path) -> str:
    done = subprocess.run(["cksum"], stdin=path.open("rb"), capture_output=True, text=True)
    return done.stdout.strip()


def is_local(node: Node) -> bool:
    """Whether the node is this machine (its address is one of ours)."""
    try:
        address = socket.getaddrinfo(node.address, None, socket.AF_INET)[0][4][0]
        with socket.socket() as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False


def _ssh_problem(done: subprocess.CompletedProcess) -> str:
    lines = [l for l in done.stderr.strip().splitlines() if l.strip()]
    said = lines[-1] if lines else "no message"
    if "Permission denied" in said:
        return f"ssh was refused the login ({said}): set up keys for password-less ssh"
    return f"does not answer through {paths.REMOTE_SHELL} (exit {done.returncode}): {said}"


def problems_of(host: str, want: Expected, reference: dict[Path, str], env: dict[str, str]) -> list[str]:
    """What is wrong with one host for the job (empty: nothing), asked through
    the remote shell run with `env` added to this process's environment."""
    try:
        done = subprocess.run([paths.REMOTE_SHELL, *SSH_OPTIONS, host, want.command()],
                              env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=ANSWER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [f"did not answer through {paths.REMOTE_SHELL} within {ANSWER_TIMEOUT_S:g} s"]
    except OSError as e:
        return [f"the remote shell {paths.REMOTE_SHELL!r} cannot be run: {e.strerror}"]
    answer = [line.split(" ", 2)[1:] + [""] for line in done.stdout.splitlines() if line.startswith(MARK + " ")]
    if done.returncode != 0 or not answer:
        return [_ssh_problem(done)]
    said = {kind: rest.strip() for kind, rest, *_ in answer if kind != "library"}
    sums = [rest.strip() for kind, rest, *_ in answer if kind == "library"]   # in the order asked
    out = []
    if said.get("program") != "ok":
        out.append(f"program {want.program} is not an executable file there "
                   "(every host needs it at the same path)")
    if want.manifest is not None:
        return out + _prefix_problems(want, said.get("manifest", ""))
    for lib, there in zip(want.libraries, sums):
        if not there:
            out.append(f"{lib} is not there (every host needs wanmpi at the same path)")
        elif there != reference[lib]:
            out.append(f"{lib} differs from this host's (another build): rebuild or copy it")
    return out


def _prefix_problems(want: Expected, manifest_text: str) -> list[str]:
    if not manifest_text.strip():
        return [f"has no wanmpi in {paths.PREFIX}: run `wanmpi deploy -t TOPOLOGY` (or install it there)"]
    try:
        there = json.loads(base64.b64decode(manifest_text, validate=True))
        content, version = there["content_hash"], there.get("version", "?")
    except (ValueError, KeyError, TypeError, binascii.Error):
        return [f"{want.manifest} there cannot be read"]
    if content != want.content_hash:
        return [f"has wanmpi {version} (content {install.short_hash(content)}) in {paths.PREFIX}, this host "
                f"{want.version} (content {install.short_hash(want.content_hash)}): run `wanmpi deploy -t TOPOLOGY`"]
    return []


def check(nodes: list[Node], want: Expected, env: dict[str, str] | None = None) -> None:
    """Ask every distinct remote host of `nodes` (the remote shell run with
    `env` added); HostCheckError naming each host that cannot run the job."""
    hosts = []
    for n in nodes:
        if n.name not in hosts and not is_local(n):
            hosts.append(n.name)
    if not hosts:
        return
    reference = {lib: checksum(lib) for lib in want.libraries} if want.manifest is None else {}
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(hosts))) as pool:
        found = list(pool.map(lambda h: (h, problems_of(h, want, reference, env or {})), hosts))
    bad = [f"host {h}: {p}" for h, problems in found for p in problems]
    if bad:
        raise HostCheckError("; ".join(bad))


class Pending:
    """A check running in the background (beside the relays' start-up):
    wait() returns when it is done and raises its HostCheckError, if any."""

    def __init__(self, nodes: list[Node], want: Expected, env: dict[str, str] | None = None):
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(nodes, want, env), daemon=True)
        self._thread.start()

    def _run(self, nodes, want, env) -> None:
        try:
            check(nodes, want, env)
        except Exception as e:          # handed to wait(), in the caller's thread
            self._error = e

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
