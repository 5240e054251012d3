"""The remote shell of a job on real hosts whose launcher daemons need an
environment (libwanshim for relays or 1:1 NAT: Open MPI's orted and hydra's
proxies connect across clusters too). ssh does not carry the launcher's
environment to the daemons (SendEnv needs the server's AcceptEnv), so the
launcher is given a per-job wrapper as its remote shell: it runs

    $WANMPI_SSH [options] HOST 'env NAME=VALUE ... sh -c '\\''COMMAND'\\'''

i.e. the command the launcher asked for, under the daemons' environment.
Usage (what the launchers call): `python -m wanmpi.job.remote_shell ENVFILE
[ssh options] HOST COMMAND...`; the per-job script written by `write` adds
the interpreter and ENVFILE, so that launchers see one program (MPICH's
-launcher-exec takes no arguments)."""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

RELAY_SETTINGS = ("WANMPI_RELAYS", "WANMPI_RELAY_SOURCES")
# ssh's options that take a value (the rest are flags), as in testbed/ns-exec
WITH_VALUE = set("BbcDEeFIiJLlmOopQRSWw")


def split(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """[options] HOST COMMAND... -> (options, host, command words)."""
    options, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if len(a) == 2 and a[0] == "-" and a[1] in WITH_VALUE:
            options += argv[i:i + 2]
            i += 2
        elif a.startswith("-") and a != "-":
            options.append(a)
            i += 1
        else:
            break
    if i >= len(argv):
        raise ValueError("no host given")
    return options, argv[i], argv[i + 1:]


def remote_command(env: dict[str, str], words: list[str]) -> str:
    """What the host's shell runs: the launcher's command (joined with spaces,
    as ssh does) under `env`."""
    settings = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    command = " ".join(words) or "exec sh -l"
    return f"env {settings} sh -c {shlex.quote(command)}"


def write(path: Path, env: dict[str, str], ssh: str) -> Path:
    """The per-job wrapper at `path` (and its environment beside it)."""
    envfile = path.with_suffix(".env")
    envfile.write_text(json.dumps({"ssh": ssh, "env": env}))
    envfile.chmod(0o600)
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m wanmpi.job.remote_shell "
                    f"{shlex.quote(str(envfile))} \"$@\"\n")
    path.chmod(0o700)
    return path


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_suffix(".env").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("remote_shell: usage: remote_shell ENVFILE [ssh options] HOST COMMAND...", file=sys.stderr)
        return 255
    try:
        spec = json.loads(Path(argv[0]).read_text())
        options, host, words = split(argv[1:])
    except (OSError, ValueError) as e:
        print(f"remote_shell: {e}", file=sys.stderr)
        return 255
    ssh = shlex.split(spec["ssh"])
    # ssh itself is not relayed: a relay delivers with a preamble only a shim
    # understands, and sshd has none (private hosts are reached by ProxyJump).
    # It stays under the shim for 1:1 NAT, which is invisible to sshd.
    env = {k: v for k, v in os.environ.items() if k not in RELAY_SETTINGS}
    os.execvpe(ssh[0], [*ssh, *options, host, remote_command(spec["env"], words)], env)
    return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
