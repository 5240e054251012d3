"""The job's processes on this host: the launcher stopped with everything
that carries the job id."""
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
