"""Launching MPI jobs across the clusters of a topology.

A `Launcher` (one registered class per MPI implementation, launchers.py,
whose names this module re-exports) turns a `Job` into the launcher's
argument list. The remote-shell
agent is the only difference between the emulated testbed (paths.NS_EXEC_AGENT
enters a node's namespace) and real clusters (ssh).

`run_job` runs it: the launcher starts on the node of rank 0, every process of
the job carries WANMPI_JOB_ID in its environment, and on exit, timeout or
Ctrl-C every process still carrying it is killed.

Relays: when the topology has relay nodes and the job spans clusters,
`run_job` starts the job's relays first (relays.py) and preloads libwanshim
into the launcher and its daemons too (Open MPI's orted, hydra's proxies),
not only into the ranks: their own connections cross clusters, and a private
cluster is reachable only through its relays. If a relay dies while the job
runs, the job is ended with an error naming it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .. import install, paths, shell
from ..testbed import net
from ..topo import Node, Topology
from . import host_check, libwanmpi, processes, relays, remote_shell, standing_relays
from .launchers import (IntelMPI, LaunchError, Launcher, MPICH, OpenMPI, OpenMPI5,  # noqa: F401 (re-exported)
                        defaults, launcher)

EXIT_TIMEOUT = 124
EXIT_RELAY_LOST = 125
EXIT_INTERRUPTED = 130
RELAY_LOSS_GRACE_S = 10.0      # a job that lost a relay may fail by itself this long, then it is ended


# ---- jobs --------------------------------------------------------------------
@dataclass
class Job:
    topo: Topology
    program: list[str]
    ranks: list[Node]                  # node of each rank
    env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)   # passed to the launcher as is
    wanmpi: bool = True                # preload libwanmpi and libwanshim (False: the MPI library alone)
    use_relays: bool = True            # through the topology's relays, if it has any
    check_hosts: bool = True           # real hosts: ask each first (host_check.py)
    rules: str | None = None           # rules file for libwanmpi (None: the topology's, if any)
    abi: bool = False                  # the program is built against MPI-5's standard ABI: libwanmpi-abi
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def clusters(self) -> list[str]:
        """The clusters the job's ranks are in, in topology order."""
        spanned = {n.cluster for n in self.ranks}
        return [c.name for c in self.topo.clusters if c.name in spanned]

    @property
    def relayed(self) -> bool:
        """Whether connections between clusters go through relays."""
        return self.use_relays and self.topo.has_relays and len(self.clusters) > 1

    @property
    def translated(self) -> bool:
        """Whether connections between clusters go to the public addresses of
        nodes behind 1:1 NAT (libwanshim; the MPI alone knows only the private ones)."""
        return self.wanmpi and bool(libwanmpi.nat_map(self.topo)) and len(self.clusters) > 1

    def daemon_environment(self) -> dict[str, str]:
        """Environment of the launcher and its daemons (inherited by the ranks
        unless rank_environment sets the same name): with relays or 1:1 NAT,
        libwanshim relaying or translating but not pacing their connections."""
        if not self.relayed and not self.translated:
            return {}
        env = self._shim_environment()
        if self.relayed:
            env.update(relays.environment(self.topo))
        if self.translated:
            env["WANMPI_NAT_MAP"] = libwanmpi.nat_map(self.topo)
        return env

    def reach_environment(self) -> dict[str, str]:
        """Environment in which this host's ssh reaches the others before any
        relay runs: with 1:1 NAT, libwanshim translating its connections."""
        if not self.translated:
            return {}
        return {**self._shim_environment(), "WANMPI_NAT_MAP": libwanmpi.nat_map(self.topo)}

    def _shim_environment(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(libwanmpi.shim_library()),
                "WANMPI_CLUSTER_MAP": libwanmpi.cluster_map(self.topo), "WANMPI_PACING_RATE": "0"}

    @property
    def emulated(self) -> bool:
        return self.topo.emulated

    @property
    def hostfile(self) -> Path:
        return paths.STATE_DIR / f"hosts-{self.job_id}" if self.emulated \
            else processes.job_file("hosts", self.job_id)

    def rank_environment(self, mpi: str) -> dict[str, str]:
        """Environment of every rank: libwanmpi's and libwanshim's (unless
        disabled), then the user's.

        Preload order: libwanmpi, libwanshim, then the user's own preloads. The
        two define disjoint symbols (MPI_* against connect/accept/close/dup*),
        so their order between themselves changes nothing; it follows the
        layers (MPI calls above, socket calls below). What matters is that both
        come before the user's: a user's socket tracer preloaded after the
        shim sees the calls the shim makes on the application's behalf, i.e.
        what goes on the wire (once relaying redirects connects, the relay's
        address). libwanmpi finds the shim's API with dlsym(RTLD_DEFAULT), which
        does not depend on the order either."""
        relaying = relays.environment(self.topo) if self.relayed else {}
        if not self.wanmpi:
            return {**self.daemon_environment(), **self.env}
        env = {**libwanmpi.environment(self.topo, self.rules, libwanmpi.running_wan_delay_us(self.topo)), **relaying,
               "WANMPI_RANK_ADDRESSES": libwanmpi.rank_addresses([n.address for n in self.ranks]), **self.env}
        preload = [str(self.library(mpi)), str(libwanmpi.shim_library())]
        if self.env.get("LD_PRELOAD"):
            preload.append(self.env["LD_PRELOAD"])
        env["LD_PRELOAD"] = ":".join(preload)
        return env

    def library(self, mpi: str) -> Path:
        """The libwanmpi of the job under the MPI named `mpi`: that MPI's
        build, or the standard ABI's for a program built against it."""
        return libwanmpi.library("abi" if self.abi else mpi)

    def rank_program(self) -> list[str]:
        # On the testbed ranks run at idle priority so packet processing is never
        # starved (ARCHITECTURE.md, "Testbed fidelity").
        return ["chrt", "-i", "0", *self.program] if self.emulated else list(self.program)

    @property
    def agent(self) -> str:
        """The launcher's remote shell: the testbed's agent, ssh, or on real
        hosts whose daemons need an environment, the job's wrapper of ssh."""
        if self.emulated:
            return str(paths.NS_EXEC_AGENT)
        if self.daemon_environment():
            return str(self.agent_wrapper)
        return paths.REMOTE_SHELL

    @property
    def agent_wrapper(self) -> Path:
        return processes.job_file("agent", self.job_id)

    @property
    def interfaces(self) -> str:
        """What MPI may use for its traffic: every testbed node's NIC is eth0; on
        real clusters, the clusters' networks (Open MPI warns on a node about the
        networks it is not part of)."""
        return "eth0" if self.emulated else ",".join(c.network for c in self.topo.clusters)


# ---- checks -----------------------------------------------------------------
def how_to_build(launcher: Launcher) -> str:
    """The command that builds wanmpi's libraries for this MPI."""
    return f"`make install MPICC=<its mpicc> NAME={launcher.name}`" if paths.PREFIX is not None \
        else f"`make {launcher.make_target or 'lib'}`"


def check_libraries(launcher: Launcher, job: Job) -> None:
    """The job's libwanmpi and libwanshim exist, and libwanmpi was built for
    the MPI of the launcher (LaunchError naming both if not); a build for the
    standard ABI serves any launcher whose MPI implements it (cli/run.py
    checks that)."""
    for library in (job.library(launcher.name), libwanmpi.shim_library()):
        if not library.exists():
            build = "`make abi`" if job.abi else how_to_build(launcher)
            raise LaunchError(f"{library} not found: build it with {build}, or run without it (--no-wanmpi)")
    if job.abi:
        return
    problem = libwanmpi.mismatch(libwanmpi.library(launcher.name), launcher.name, launcher.command_path)
    if problem:
        raise LaunchError(problem)


# ---- running ----------------------------------------------------------------
def run_job(launcher: Launcher, job: Job, timeout: float | None = None, stdout=None) -> int:
    """Run the job to completion; return its exit status. Nothing survives it.
    stdout: where the job's standard output goes (default: ours). SIGINT or
    SIGTERM while it runs stops the job (and its relays) and then raises
    KeyboardInterrupt, so the caller's own cleanup runs too."""
    problem = launcher.missing() or launcher.cannot_start(job)
    if problem:
        raise LaunchError(problem)
    if job.wanmpi:
        check_libraries(launcher, job)
    for library in launcher.preloads(job):
        if not library.exists():
            raise LaunchError(f"{library} not found: {launcher.name} jobs without libwanmpi preload it "
                              f"(MPI_Finalize's fence, lib/src/fence); build it with {how_to_build(launcher)}")
    private = [c for c in job.clusters if job.topo.cluster(c).private and not job.topo.cluster(c).nat]
    if private and len(job.clusters) > 1 and not job.relayed:
        why = "the job runs without them (--no-relays)" if job.topo.has_relays else \
            "the topology has no relays (set relays = 1 or more in every cluster)"
        raise LaunchError(f"cluster {private[0]!r} is private: its nodes can be reached from the other "
                          f"clusters only through relays, and {why}; "
                          "or map the job inside one cluster or onto public clusters")
    if job.emulated:
        state = net.State.load()
        if state is None:
            raise LaunchError("the testbed is not up: run `wanmpi testbed up` first")
        if state.topology_text != job.topo.text:
            raise LaunchError(f"the testbed that is up was built from {state.topology_source}, "
                              f"not from {job.topo.source}")
        problems = net.health(state)
        if problems:
            raise LaunchError("the testbed is not healthy: " + "; ".join(problems))
    if not job.emulated and job.daemon_environment():
        remote_shell.write(job.agent_wrapper, job.daemon_environment(), paths.REMOTE_SHELL)
    try:
        return _start(launcher, job, timeout, stdout)
    finally:
        remote_shell.remove(job.agent_wrapper)


def _start(launcher: Launcher, job: Job, timeout: float | None, stdout) -> int:
    """The hosts checked and the relays started (both at once), then the job."""
    checking = _check_hosts(launcher, job)      # in the background, beside the relays' start
    if not job.relayed:
        _hosts_ready(checking)
        return _run(launcher, job, timeout, stdout, None)
    if job.topo.relay.standing:                 # kept running by `wanmpi relay up`
        try:
            standing_relays.require_up(job.topo)
        except standing_relays.StandingError as e:
            raise LaunchError(str(e)) from None
        _hosts_ready(checking)
        return _run(launcher, job, timeout, stdout, None)
    with relays.RelaySet(job.topo, job.job_id) as relay_set:
        try:
            relay_set.start()
        except relays.RelayError as e:
            raise LaunchError(f"the job's relays did not start: {e}") from None
        finally:
            _hosts_ready(checking)
        return _run(launcher, job, timeout, stdout, relay_set)


def _check_hosts(launcher: Launcher, job: Job) -> host_check.Pending | None:
    """On real hosts, unless turned off: every host of the ranks asked whether
    it can run the job (the program, and the libraries that will be preloaded)."""
    if job.emulated or not job.check_hosts:
        return None
    libraries = [job.library(launcher.name)] if job.wanmpi else []
    if job.wanmpi or job.daemon_environment():
        libraries.append(libwanmpi.shim_library())
    # with 1:1 NAT only the shim's translation reaches the other cluster
    return host_check.Pending(job.ranks, host_check.expected(job.program[0], libraries), job.reach_environment())


def _hosts_ready(checking: host_check.Pending | None) -> None:
    if checking is None:
        return
    try:
        checking.wait()
    except host_check.HostCheckError as e:
        raise LaunchError(f"the job cannot start: {e}") from None


def _run(launcher: Launcher, job: Job, timeout: float | None, stdout, relay_set) -> int:
    job.hostfile.write_text(launcher.hostfile_text(job))
    argv = launcher.argv(job)
    daemon_env = job.daemon_environment()
    if daemon_env:            # set inside the node: the namespace tools themselves run without the shim
        argv = ["env", *(f"{k}={v}" for k, v in daemon_env.items()), *argv]
    if job.emulated:
        argv = net.node_command(job.ranks[0], argv)
    env = {**os.environ, "WANMPI_JOB_ID": job.job_id}
    proc = subprocess.Popen(argv, env=env, stdout=stdout, start_new_session=True)
    interrupted: list[int] = []
    relay_lost_at = None

    def on_signal(signum, _frame):
        interrupted.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if interrupted:
                status = EXIT_INTERRUPTED
                break
            if deadline is not None and time.monotonic() > deadline:
                print(f"wanmpi: the job ran longer than {timeout:g} s; killing every rank",
                      flush=True)
                status = EXIT_TIMEOUT
                break
            if relay_lost_at is None and report_lost_relay(relay_set):
                relay_lost_at = time.monotonic()
            if relay_lost_at is not None and time.monotonic() > relay_lost_at + RELAY_LOSS_GRACE_S:
                print(f"wanmpi: the job did not end {RELAY_LOSS_GRACE_S:g} s after losing a relay; "
                      "killing every rank", file=sys.stderr, flush=True)
                status = EXIT_RELAY_LOST
                break
            time.sleep(0.05)
        else:
            status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
            if relay_lost_at is None:           # the job may have failed first, on its own
                report_lost_relay(relay_set)
    finally:
        processes.stop_job(proc, job.job_id)
        for s, handler in previous.items():
            signal.signal(s, handler)
        job.hostfile.unlink(missing_ok=True)
    if interrupted:
        # the job is gone; the interrupt ends the caller too (a bench, the demo),
        # whose own cleanup then runs; `wanmpi run` exits with EXIT_INTERRUPTED
        raise KeyboardInterrupt
    return status


def report_lost_relay(relay_set) -> bool:
    """Say on stderr that a relay of the job died, if one did; True if so."""
    if relay_set is None or not relay_set.dead():
        return False
    lost = relay_set.dead()[0]
    print(f"wanmpi: relay {lost.relay.name} exited (status {lost.proc.returncode}) while the job ran; "
          f"connections through it are lost: {relay_set.tail(lost)}", file=sys.stderr, flush=True)
    return True
