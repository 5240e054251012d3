"""What libwanmpi and libwanshim need from a topology: the libraries to preload
for an MPI and the environment of every rank.

The variable names are defined in lib/src/common/settings.h (their one home
on the C side, with defaults and meanings); this module only fills them in
from the topology, so that a job's collectives follow the topology file.
"""
from __future__ import annotations

import functools
import re
import struct
import subprocess
from pathlib import Path

from .. import paths
from ..testbed import emulator
from ..testbed.emulator import EmulatorError
from ..topo import Topology

BUILT_FOR_SECTION = b".wanmpi_built_for"      # lib/src/coll/built_for.c
# MPIs whose launchers are interchangeable (what Launcher subclass starts them)
LAUNCHED_LIKE = {"Open MPI": "openmpi", "MPICH": "mpich", "Intel MPI": "mpich", "MVAPICH2": "mpich",
                 "MVAPICH": "mpich"}


def library(mpi: str) -> Path:
    return paths.libwanmpi(mpi)


def shim_library() -> Path:
    """libwanshim: the socket shim, one build for every MPI (docs/libwanshim.md)."""
    return paths.libwanshim()


# ---- which MPI: the library's against the launcher's ------------------------------------
def built_for(library: Path) -> str | None:
    """wanmpi_built_for of a libwanmpi file ("Open MPI 4.1.4", "MPICH 5.0.2"),
    read from its ELF section without loading it; None if it has none."""
    try:
        data = library.read_bytes()
    except OSError:
        return None
    try:
        return _elf_string(data, BUILT_FOR_SECTION)
    except (struct.error, ValueError, IndexError):          # not an ELF file we understand
        return None


def _elf_string(data: bytes, wanted: bytes) -> str | None:
    """The first string in the section named `wanted` of a 64-bit ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    entsize, count, names = struct.unpack_from(end + "HHH", data, 0x3A)

    def section(i: int) -> tuple:                           # name, ..., offset, size
        return struct.unpack_from(end + "IIQQQQ", data, shoff + i * entsize)
    strings = section(names)[4]
    for i in range(count):
        name, _, _, _, offset, size = section(i)
        start = strings + name
        if data[start:data.index(b"\0", start)] == wanted:
            return data[offset:offset + size].split(b"\0")[0].decode(errors="replace")
    return None


@functools.cache
def launcher_mpi(command: Path) -> str | None:
    """The MPI a launcher belongs to, in wanmpi_built_for's words, from its
    `--version`: "Open MPI 4.1.4" (mpirun), "MPICH 5.0.2" (hydra),
    "Intel MPI 2021.10"; None if it does not say."""
    try:
        out = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for pattern, name in ((r"\((?:Open MPI|OpenRTE)\) (\d[\w.]*)", "Open MPI"),
                          (r"Intel\(R\) MPI Library.*?Version (\d[\w.]*)", "Intel MPI"),
                          (r"HYDRA build details:\s+Version:\s+(\d[\w.]*)", "MPICH")):
        found = re.search(pattern, out)
        if found:
            return f"{name} {found.group(1)}"
    return None


def same_mpi(built: str, launched: str) -> bool:
    """Whether a libwanmpi built for `built` may run under a launcher of
    `launched`: the same kind of launcher, and the same version when both
    name the same MPI (hydra says MPICH's version, not MVAPICH's)."""
    b_name, _, b_version = built.rpartition(" ")
    l_name, _, l_version = launched.rpartition(" ")
    if LAUNCHED_LIKE.get(b_name) != LAUNCHED_LIKE.get(l_name):
        return False
    return b_name != l_name or b_version == l_version


def mismatch(library: Path, mpi: str, command: Path) -> str | None:
    """Why `library` must not be preloaded in a job launched by `command` (of
    the MPI named `mpi`), or None. Unknown on either side: no objection."""
    built, launched = built_for(library), launcher_mpi(command)
    if built is None or launched is None or same_mpi(built, launched):
        return None
    rebuild = f"make install MPICC=<its mpicc> NAME={mpi}" if paths.PREFIX is not None else "make lib"
    return (f"libwanmpi {library} was built for {built}, but MPI {mpi!r} launches with {command}, "
            f"which is {launched}: use the MPI it was built for, or build it for this one ({rebuild})")


def cluster_map(topo: Topology) -> str:
    """WANMPI_CLUSTER_MAP: every cluster's network, as libwanmpi and libwanshim read it."""
    return ";".join(f"{cl.name}={cl.network}" for cl in topo.clusters)


def wan_rates(topo: Topology) -> str:
    """WANMPI_WAN_RATES: for every pair of clusters joined by WAN links, the
    narrowest rate on their route, bits/s ("a:b=200000000;a:c=..."): what
    libwanmpi paces an all-to-all's traffic between them to."""
    pairs = []
    names = [c.name for c in topo.clusters]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            here, rate = a, None
            while here != b:
                link = topo.next_hops(here).get(b)
                if link is None:
                    break
                rate = link.rate_bps if rate is None else min(rate, link.rate_bps)
                here = link.b if link.a == here else link.a
            if here == b and rate:
                pairs.append(f"{a}:{b}={rate}")
    return ";".join(pairs)


def nat_map(topo: Topology) -> str:
    """WANMPI_NAT_MAP: the private and public address of every node behind 1:1
    NAT ("10.1.0.1=198.19.129.1,..."); libwanshim connects to the public one
    from other clusters and reports the private one on accept. Empty: none."""
    return ",".join(f"{n.address}={n.public}" for n in topo.nodes if n.public)


def rank_addresses(addresses: list[str]) -> str:
    """WANMPI_RANK_ADDRESSES: the node address of every MPI_COMM_WORLD rank,
    run-length coded ("10.1.0.1*2,10.2.0.1*2"), for WANMPI_UDP_PARAMS."""
    runs: list[list] = []
    for a in addresses:
        if runs and runs[-1][0] == a:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    return ",".join(a if n == 1 else f"{a}*{n}" for a, n in runs)


def wan_delay_us(topo: Topology) -> int:
    """WANMPI_WAN_DELAY from the topology: the largest one-way delay of its WAN
    links, microseconds (0 without links)."""
    return max((l.delay_us for l in topo.links), default=0)


def running_wan_delay_us(topo: Topology) -> int:
    """The one-way WAN delay a job on `topo` runs at: on the testbed the
    largest of the emulator's live settings (`wanmpi link set` and the
    benchmarks change them at run time), else the topology's."""
    if topo.emulated and topo.links:
        try:
            return max(values["delay_us"] for values in emulator.settings().values())
        except (OSError, EmulatorError, KeyError, ValueError):
            pass                             # no emulator running: the job will say so
    return wan_delay_us(topo)


def environment(topo: Topology, rules: str | None = None, delay_us: int | None = None) -> dict[str, str]:
    """WANMPI_* settings for every rank of a job on `topo`. `rules`: the rules
    file (absolute; None: the topology's, if it names one); `delay_us`: the
    one-way WAN delay the job runs at (None: the topology's).

    Only the collectives whose algorithm in the topology differs from the
    default get WANMPI_<COLL>: a variable set forces its algorithm over the
    rules (docs/tuning.md), so the defaults are left to the rules."""
    c = topo.collectives
    env = {
        # every rank finds its cluster by matching its addresses against these
        "WANMPI_CLUSTER_MAP": cluster_map(topo),
        # the rates the statistics report (and pacing will use)
        "WANMPI_WAN_RATE": str(min((l.rate_bps for l in topo.links), default=0) or 1),
        "WANMPI_NIC_RATE": str(min(cl.nic_bps for cl in topo.clusters)),
        "WANMPI_CHUNK": str(c.chunk_bytes),
        "WANMPI_SMALL": str(c.small_bytes),
        # libwanshim: the rate of every socket to another cluster, bytes/s ([pacing])
        "WANMPI_PACING_RATE": str(topo.pacing_rate),
        # libwanmpi: how an MPI_Alltoall(v) is paced while it runs
        "WANMPI_ALLTOALL_RATE": topo.pacing.alltoall,
        "WANMPI_MATB_DIVISOR": str(topo.pacing.divisor),
        # the rules' delay= conditions (docs/tuning.md)
        "WANMPI_WAN_DELAY": str(wan_delay_us(topo) if delay_us is None else delay_us),
    }
    latencies = [cl.lan_latency_us for cl in topo.clusters if cl.lan_latency_us is not None]
    if latencies:
        # chains or trees inside the clusters (libwanmpi's coll/tree.c): the slowest LAN
        env["WANMPI_LAN_LATENCY"] = str(max(latencies))
    if rules or c.rules:
        env["WANMPI_RULES"] = str(rules or c.rules)
    rates = wan_rates(topo)
    if rates:
        env["WANMPI_WAN_RATES"] = rates
    if nat_map(topo):
        env["WANMPI_NAT_MAP"] = nat_map(topo)
    if c.lanes is not None:
        env["WANMPI_LANES"] = str(c.lanes)
    for coll, algorithm in c.non_default_algorithms():
        env[f"WANMPI_{coll.upper()}"] = algorithm
    return env
