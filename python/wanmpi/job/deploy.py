"""`wanmpi deploy`: an installed prefix (`make install`, docs/install.md)
copied to every host of a real-sites topology and its relay hosts through
the remote shell, then each host checked.

For every host: its manifest is read over ssh; a host whose content hash is
this prefix's is left alone ("same version"); the others get a copy (rsync
over $WANMPI_SSH when both ends have it, else tar through ssh), refused where
the destination exists but is not a wanmpi prefix. Then the installed
`wanmpi --version` runs there (it must start: Python, the venv) and the
host's TCP settings are checked as `wanmpi doctor` checks them. With
`check_only` (a shared file system) nothing is copied. One row per host;
a host that does not answer gets its row with the error, the others go on."""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import install, paths
from ..topo import Topology
from . import doctor

COPY_TIMEOUT_S = 600
CHECK_TIMEOUT_S = 30


class DeployError(RuntimeError):
    """The installation cannot be deployed as asked; says why."""


@dataclass
class HostReport:
    host: str
    role: str                   # node of a cluster, or relay
    action: str = ""            # copied (rsync|tar), same version, checked, failed
    version: str = ""
    mpis: str = ""
    tcp: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def hosts_of(topo: Topology) -> list[tuple[str, str]]:
    """(host, role) of every node and relay host, each once, in topology order."""
    seen, out = set(), []
    for c in topo.clusters:
        for n in c.nodes:
            if n.name not in seen:
                seen.add(n.name)
                out.append((n.name, f"node of {c.name}"))
        for r in c.relay_nodes:
            if r.name not in seen:
                seen.add(r.name)
                out.append((r.name, f"relay of {c.name}"))
    return out


def remote(host: str, command: str, timeout: float = CHECK_TIMEOUT_S, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([*shlex.split(paths.REMOTE_SHELL), host, command], stdin=stdin,
                          capture_output=True, text=stdin is None, timeout=timeout)


def remote_hash(host: str, dest: Path) -> str | None:
    """The content hash of the prefix at `dest` on `host`; None if there is
    none; DeployError if `dest` is something else or the host does not answer."""
    manifest = dest / install.MANIFEST
    done = remote(host, f"if [ -f {shlex.quote(str(manifest))} ]; then cat {shlex.quote(str(manifest))}; "
                        f"elif [ -e {shlex.quote(str(dest))} ] && [ -n \"$(ls -A {shlex.quote(str(dest))})\" ]; "
                        "then echo NOT-A-PREFIX; fi")
    if done.returncode != 0:
        raise DeployError(f"no answer through {paths.REMOTE_SHELL} (exit {done.returncode}): "
                          f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    if done.stdout.strip() == "NOT-A-PREFIX":
        raise DeployError(f"{dest} exists and is not a wanmpi prefix (no {install.MANIFEST}): not overwritten")
    if not done.stdout.strip():
        return None
    try:
        return json.loads(done.stdout)["content_hash"]
    except (ValueError, KeyError, TypeError):
        raise DeployError(f"{manifest} cannot be read") from None


def copy(host: str, source: Path, dest: Path) -> str:
    """Copies the prefix; returns how (rsync or tar)."""
    has_rsync = shutil.which("rsync") is not None and remote(host, "command -v rsync").returncode == 0
    if has_rsync:
        done = subprocess.run(["rsync", "-a", "-e", paths.REMOTE_SHELL, "--rsync-path",
                               f"mkdir -p {shlex.quote(str(dest))} && rsync",
                               f"{source}/", f"{host}:{dest}/"], capture_output=True, text=True,
                              timeout=COPY_TIMEOUT_S)
        how = "rsync"
    else:
        tar = subprocess.Popen(["tar", "-C", str(source), "-cf", "-", "."], stdout=subprocess.PIPE)
        done = remote(host, f"mkdir -p {shlex.quote(str(dest))} && tar -C {shlex.quote(str(dest))} -xf -",
                      timeout=COPY_TIMEOUT_S, stdin=tar.stdout)
        tar.stdout.close()
        tar.wait()
        how = "tar"
    if done.returncode != 0:
        err = done.stderr if isinstance(done.stderr, str) else done.stderr.decode(errors="replace")
        raise DeployError(f"copy by {how} failed: {(err.strip().splitlines() or ['no message'])[-1]}")
    return how


def check(topo: Topology, host: str, dest: Path, report: HostReport) -> None:
    """The installed wanmpi's --version there, and the host's TCP settings."""
    done = remote(host, f"{shlex.quote(str(dest / 'bin' / 'wanmpi'))} --version")
    if done.returncode != 0:
        report.problems.append(f"the installed wanmpi does not start: "
                               f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    else:
        lines = done.stdout.strip().splitlines()
        report.version = lines[0].split()[1] if lines and len(lines[0].split()) > 1 else "?"
        report.mpis = ", ".join(line.split()[1].rstrip(":") for line in lines if line.startswith("mpi ")) or "none"
    target = doctor.Target(f"host {host}", None, [*shlex.split(paths.REMOTE_SHELL), host], remote_shell=True)
    try:
        settings = doctor.collect(target)
    except doctor.DoctorError as e:
        report.problems.append(str(e))
        return
    findings = doctor.examine(topo, settings, doctor.cluster_of_settings(topo, settings))
    counts = {s: sum(f.status == s for f in findings) for s in ("OK", "WARN", "FAIL")}
    report.tcp = f"{counts['OK']} ok, {counts['WARN']} warn, {counts['FAIL']} fail"


def deploy_host(topo: Topology, host: str, role: str, source_hash: str, source: Path, dest: Path,
                check_only: bool) -> HostReport:
    report = HostReport(host, role)
    try:
        there = remote_hash(host, dest)
        if there == source_hash:
            report.action = "same version"
        elif check_only:
            report.action = "checked"
            report.problems.append("no installation there" if there is None else
                                   f"another version there (content {install.short_hash(there)})")
        else:
            report.action = f"copied ({copy(host, source, dest)})"
            if remote_hash(host, dest) != source_hash:
                report.problems.append("the copy does not match this prefix")
    except (DeployError, subprocess.TimeoutExpired) as e:
        report.action = "failed"
        report.problems.append(str(e))
        return report
    check(topo, host, dest, report)
    return report


def deploy(topo: Topology, source: Path, dest: Path | None = None, check_only: bool = False) -> list[HostReport]:
    if topo.emulated:
        raise DeployError(f"{topo.source} is an emulated testbed: deploy copies to real hosts "
                          "(`wanmpi testbed hosts` writes the testbed as real hosts)")
    try:
        manifest = install.load(source)
    except install.ManifestError as e:
        raise DeployError(f"{source} is not an installed prefix: {e}") from None
    dest = dest or source
    if not dest.is_absolute():
        raise DeployError(f"--prefix {dest}: give an absolute path")
    return [deploy_host(topo, host, role, manifest.content_hash, source, dest, check_only)
            for host, role in hosts_of(topo)]


def render(reports: list[HostReport]) -> str:
    head = ("host", "role", "action", "version", "MPIs", "TCP (wanmpi doctor)")
    rows = [(r.host, r.role, r.action, r.version or "-", r.mpis or "-", r.tcp or "-") for r in reports]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(x[i].ljust(widths[i]) for i in range(len(head))).rstrip() for x in [head, *rows]]
    for r in reports:
        lines += [f"{r.host}: {p}" for p in r.problems]
    return "\n".join(lines)
