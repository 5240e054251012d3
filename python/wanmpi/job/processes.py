"""The job's processes on this host: the launcher stopped with everything
that carries the job id; and the files of jobs that were killed outright."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from ..testbed import net


def stop_job(proc: subprocess.Popen, job_id: str) -> None:
    """Kill the launcher's process group and every process that carries the job id."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
    net.kill_pids(job_processes(job_id), grace=2.0)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def job_processes(job_id: str) -> list[int]:
    marker = f"WANMPI_JOB_ID={job_id}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


# the per-job files `wanmpi run` keeps in /tmp on real hosts: the launcher's
# remote-shell wrapper (and its .env beside it) and the hostfile
JOB_FILE_KINDS = ("agent", "hosts")


def job_file(kind: str, job_id: str) -> Path:
    return Path(f"/tmp/wanmpi-{kind}-{job_id}")


# MPICH's mpiexec.hydra writes the node's topology to
# /tmp/hydra_hwloc_xmlfile_XXXXXX (a path it hard-codes) for its proxies and
# leaves the file behind when a job ends abnormally (an MPI_Abort, `wanmpi run
# --timeout`): 41 of them after one day's tests. Whose it was is not written
# anywhere, so they go only while no launcher runs on the host.
HYDRA_FILES = "hydra_hwloc_xmlfile_*"
LAUNCHERS = ("mpiexec", "mpiexec.hydra", "mpirun", "hydra_pmi_proxy", "orterun", "prterun")


def launcher_running() -> bool:
    """Whether any MPI launcher (or MPICH's proxy) runs on this host."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name in LAUNCHERS:
            return True
    return False


def stale_files() -> list[Path]:
    """Removes the per-job files of jobs no process of which runs any more
    (their `wanmpi run` was killed with SIGKILL), and MPICH's topology files
    while no launcher runs; returns them."""
    files: dict[str, list[Path]] = {}
    for kind in JOB_FILE_KINDS:
        for f in Path("/tmp").glob(f"wanmpi-{kind}-*"):
            files.setdefault(f.name.split("-", 2)[2].split(".")[0], []).append(f)
    removed = []
    for job_id, found in files.items():
        if not job_processes(job_id):
            for f in found:
                f.unlink(missing_ok=True)
            removed += found
    hydra = sorted(Path("/tmp").glob(HYDRA_FILES))
    if hydra and not launcher_running():
        for f in hydra:
            f.unlink(missing_ok=True)
        removed += hydra
    return removed
