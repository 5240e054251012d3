"""The host's list of congestion controls that namespaces may choose.

`net.ipv4.tcp_allowed_congestion_control` is one list for the whole host
(ARCHITECTURE.md, "Testbed fidelity"): a node's namespace can set cubic only
if the host allows it, and by default it does not. A benchmark that compares
congestion controls allows the ones it needs for as long as it runs.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def allowed() -> list[str]:
    return ALLOWED.read_text().split()


@contextmanager
def allowing(names: list[str]):
    """Add the missing `names` to the allowed list; put the list back on exit."""
    before = ALLOWED.read_text().strip()
    try:
        missing = [name for name in names if name not in before.split()]
        if missing:
            ALLOWED.write_text(" ".join([*before.split(), *missing]))
        yield before.split()
    finally:
        if ALLOWED.read_text().strip() != before:
            ALLOWED.write_text(before)
