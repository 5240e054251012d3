"""The hosts of a real cluster, written the ways HPC users write them.

- a host list in Slurm's syntax: ``"node[01-16]"``, ``"gpu[1-3,7],login1"``,
  ``"rack[1-2]-n[01-02]"`` (several brackets multiply), zero padding kept;
- a list whose items are ``"node01"``, ``"node01:4"`` (4 slots: ranks the
  host takes before the next one gets any) or tables
  ``{ host = "node01", address = "10.0.1.5", public = "3.8.1.2", slots = 4 }``
  (``address``: the host's address on the cluster's network when ``host`` is
  a name; ``public``: the address other clusters reach it at through 1:1 NAT);
- a hostfile: Open MPI's (``node01 slots=4``) or MPICH's (``node01:4``);
- a Slurm allocation: ``SLURM_JOB_NODELIST`` in the same syntax, each node
  resolved and given to the cluster whose network holds its address.

Errors are `HostError`s whose message names what is wrong; the topology
reader adds the file and the key.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from pathlib import Path

MAX_HOSTS = 65536                 # per expression: a typo like node[1-1000000] is not a cluster
MAX_SLOTS = 4096
HOST_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
SLURM_NODELIST = "SLURM_JOB_NODELIST"


class HostError(ValueError):
    """A host list, hostfile or allocation that cannot be read; says why."""


@dataclass(frozen=True)
class Host:
    name: str                     # what the remote shell connects to
    address: str                  # on the cluster's network (the name if not given)
    slots: int = 1
    public: str | None = None     # 1:1 NAT: the address other clusters use


# ---- Slurm host list expressions ---------------------------------------------
def _split_top(expr: str) -> list[str]:
    """Splits at the commas outside brackets; checks the brackets pair up."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostError(f"{expr!r}: brackets inside brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostError(f"{expr!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth:
        raise HostError(f"{expr!r}: '[' without ']'")
    return parts + [expr[start:]]


def _range_values(expr: str, inside: str) -> list[str]:
    values: list[str] = []
    for item in inside.split(","):
        lo, dash, hi = item.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise HostError(f"{expr!r}: [{inside}] must list numbers or ranges such as 01-16")
        if not dash:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostError(f"{expr!r}: range {item.strip()} goes backwards")
        if int(hi) - int(lo) >= MAX_HOSTS:
            raise HostError(f"{expr!r}: range {item.strip()} has more than {MAX_HOSTS} hosts")
        width = len(lo) if lo.startswith("0") else 0
        values += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return values


def _expand_one(expr: str, part: str) -> list[str]:
    names = [""]
    for text, inside in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", part):
        choices = _range_values(expr, inside) if inside else [""]
        names = [n + text + c for n in names for c in choices]
        if len(names) > MAX_HOSTS:
            raise HostError(f"{expr!r}: more than {MAX_HOSTS} hosts")
    return names


def expand(expr: str) -> list[str]:
    """The host names of a Slurm-style host list, in order."""
    if not isinstance(expr, str) or not expr.strip():
        raise HostError("expected a host list such as 'node[01-16]'")
    names: list[str] = []
    for part in _split_top(expr.strip()):
        part = part.strip()
        if not part:
            raise HostError(f"{expr!r}: an empty item between commas")
        for name in _expand_one(expr, part):
            if not HOST_NAME.match(name):
                raise HostError(f"{expr!r}: {name!r} is not a host name or address")
            names.append(name)
    return names


# ---- list items and tables -----------------------------------------------------
def _slots(value, where: str) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
        raise HostError(f"{where}: slots must be an integer from 1 to {MAX_SLOTS}, got {value!r}")
    return value


def _ipv4(value, where: str, key: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except (ValueError, TypeError):
        raise HostError(f"{where}: {key} {value!r} is not an IPv4 address") from None


def _from_text(item: str) -> list[Host]:
    names, colon, slots = item.rpartition(":") if ":" in item else (item, "", "")
    count = _slots(slots, repr(item)) if colon else 1
    return [Host(n, n, count) for n in expand(names)]


def _from_table(item: dict, where: str) -> Host:
    unknown = set(item) - {"host", "address", "public", "slots"}
    if unknown:
        raise HostError(f"{where}: unknown key {sorted(unknown)[0]!r} (keys: host, address, public, slots)")
    name = item.get("host")
    if not isinstance(name, str) or not HOST_NAME.match(name):
        raise HostError(f"{where}: host must be a host name or address, got {name!r}")
    address = _ipv4(item["address"], where, "address") if "address" in item else name
    public = _ipv4(item["public"], where, "public") if "public" in item else None
    return Host(name, address, _slots(item.get("slots", 1), where), public)


def from_value(value) -> list[Host]:
    """The hosts of a topology's ``hosts = ...``: a host list or a list of items."""
    if isinstance(value, str):
        return _from_text(value)
    if not isinstance(value, list) or not value:
        raise HostError("expected a host list such as 'node[01-16]' or a non-empty list of hosts")
    hosts: list[Host] = []
    for i, item in enumerate(value):
        if isinstance(item, str) and item:
            hosts += _from_text(item)
        elif isinstance(item, dict):
            hosts.append(_from_table(item, f"item {i}"))
        else:
            raise HostError(f"item {i}: expected 'host', 'host:slots' or a table, got {item!r}")
    return hosts


# ---- hostfiles -------------------------------------------------------------------
def _hostfile_line(line: str, where: str) -> Host:
    words = line.split()
    name, colon, count = words[0].partition(":")
    slots = _slots(count, where) if colon else 1
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if key in ("slots", "max_slots", "max-slots") and eq:
            if key == "slots":
                slots = _slots(value, where)
            else:
                _slots(value, where)
        else:
            raise HostError(f"{where}: unknown {word!r} (Open MPI: 'host slots=N', MPICH: 'host:N')")
    if not HOST_NAME.match(name):
        raise HostError(f"{where}: {name!r} is not a host name or address")
    return Host(name, name, slots)


def read_hostfile(path: Path) -> list[Host]:
    """The hosts of an Open MPI or MPICH hostfile, in order ('#' comments)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise HostError(f"cannot read hostfile {path}: {e.strerror}") from None
    hosts = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            hosts.append(_hostfile_line(line, f"{path}:{number}"))
    if not hosts:
        raise HostError(f"hostfile {path} lists no host")
    return hosts


# ---- Slurm allocations ------------------------------------------------------------
def resolve(name: str) -> str:
    """The IPv4 address of a host name (itself if it is one)."""
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        raise HostError(f"host {name!r} does not resolve to an IPv4 address") from None


def slurm_hosts(environ: dict[str, str], network: str) -> list[Host]:
    """The nodes of the Slurm allocation whose address is in `network`."""
    nodelist = environ.get(SLURM_NODELIST, "").strip()
    if not nodelist:
        raise HostError(f"{SLURM_NODELIST} is not set: not inside a Slurm allocation (salloc/sbatch)")
    net = ipaddress.ip_network(network, strict=False)
    hosts, seen = [], []
    for name in expand(nodelist):
        address = resolve(name)
        seen.append(f"{name}={address}")
        if ipaddress.ip_address(address) in net:
            hosts.append(Host(name, address))
    if not hosts:
        shown = ", ".join(seen[:8]) + (", ..." if len(seen) > 8 else "")
        raise HostError(f"no node of the allocation ({shown}) is in {network}")
    return hosts
