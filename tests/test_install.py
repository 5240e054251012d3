"""`make install` (docs/install.md): a self-contained prefix that keeps working
when moved or copied, runs real MPI jobs on the testbed with the source
checkout hidden, records what it holds in its manifest, refuses a libwanmpi
built for another MPI than the launcher's, loads as a module, adds a site's
MPI beside the others, ships a systemd unit that runs a standing relay, and
`make uninstall` removes it and nothing else.

The prefix is installed once for the module (the time it took is printed);
the copies the tests move, change or remove are hard-linked copies of it
(cp -al: nothing here writes into an installed file, it replaces files)."""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import MPIS, REPO, wanmpi
from conftest import installed as installed_mpi
from wanmpi import install, topo
from wanmpi.job import launch, libwanmpi, relays, remote_relay, standing_relays

VERSION = install.checkout_version(REPO)
OPENMPI = libwanmpi.launcher_mpi(Path("/usr/bin/mpirun.openmpi"))       # "Open MPI 4.1.4", from the launcher
MPICH = libwanmpi.launcher_mpi(REPO / ".venv" / "bin" / "mpiexec.hydra")   # "MPICH 5.0.2"
CLEAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MODULE_SYSTEMS = {       # what a shell sources to get `module`
    "environment-modules": Path("/usr/share/modules/init/bash"),     # Debian's package (APT_PACKAGES)
    "lmod": REPO / "build" / "lmod" / "lmod" / "init" / "bash",      # Debian's, unpacked: tests/programs/lmod.sh
}


def make(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", *args], capture_output=True, text=True,
                          timeout=timeout)


def run(argv: list, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """argv, output captured; on timeout wanmpi gets SIGTERM (it then stops its
    job on every node) before it is killed."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd="/", env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        finally:
            proc.kill()
            proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def hidden(argv: list, hide: tuple = (), keep: tuple = (), timeout: float = 300) -> subprocess.CompletedProcess:
    """argv in a mount namespace of its own (gone with its last process) in
    which the source checkout and the directories `hide` are empty, but for
    the directories `keep` (bound back where they were: tools of the tests
    that build/ holds)."""
    q = shlex.quote
    with tempfile.TemporaryDirectory() as staging:
        saved = [(q(f"{staging}/{i}"), q(str(k))) for i, k in enumerate(keep)]
        mounts = "".join(f"mkdir {s} && mount --bind {k} {s} && " for s, k in saved)
        mounts += "".join(f"mount -t tmpfs none {q(str(d))} && " for d in (REPO, *hide))
        mounts += "".join(f"mkdir -p {k} && mount --bind {s} {k} && " for s, k in saved)
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mounts}cd / && exec "$@"',
                    "sh", *argv], timeout=timeout)


def linked_copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
    return dst


def installer():
    """packaging/install.py as a module (its content hash)."""
    spec = importlib.util.spec_from_file_location("wanmpi_installer", REPO / "packaging" / "install.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def prefix(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("install")
    started = time.monotonic()
    done = make("install", f"PREFIX={root / 'wanmpi'}")
    took = time.monotonic() - started
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nmake install (with the checks of make build) took {took:.1f} s", flush=True)
    assert done.returncode == 0, done.stdout + done.stderr
    yield root / "wanmpi"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def moved(prefix, tmp_path_factory):
    """A copy of the prefix, then moved: the tests run it with the original hidden."""
    root = tmp_path_factory.mktemp("moved")
    copy = linked_copy(prefix, root / "copy")
    copy.rename(root / "elsewhere")
    yield root / "elsewhere"
    shutil.rmtree(root, ignore_errors=True)


def version_lines(root: Path, mode: str, mpis: list[str]) -> list[str]:
    commit, dirty = install.checkout_commit(REPO)
    return [f"wanmpi {VERSION}", f"commit {commit}{' (with uncommitted changes)' if dirty else ''}",
            f"{mode} {root}", *mpis]


def installed_mpis(root: Path) -> list[str]:
    return [f"mpi openmpi: {OPENMPI}, /usr/bin/mpirun.openmpi",
            f"mpi mpich: {MPICH}, {root}/lib/wanmpi/venv/bin/mpiexec.hydra"]


# ---- what the prefix holds ---------------------------------------------------------------------
def test_version_from_the_prefix_and_from_the_checkout(prefix):
    done = run([prefix / "bin" / "wanmpi", "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == version_lines(prefix, "prefix", installed_mpis(prefix))
    checkout = wanmpi("--version")
    assert checkout.returncode == 0, checkout.stderr
    assert checkout.stdout.splitlines() == version_lines(REPO, "checkout", [])


def test_manifest_records_the_installation_and_each_mpi(prefix):
    doc = json.loads((prefix / "share" / "wanmpi" / "install.json").read_text())
    commit, dirty = install.checkout_commit(REPO)
    assert (doc["format"], doc["version"], doc["commit"], doc["dirty"]) == (install.FORMAT, VERSION, commit, dirty)
    assert doc["content_hash"] == installer().content_hash(prefix)
    assert [m["name"] for m in doc["mpis"]] == ["openmpi", "mpich"]
    expected = {
        "openmpi": ("openmpi", "/usr/bin/mpicc.openmpi", "/usr/bin", "/usr/bin/mpirun.openmpi", OPENMPI, "libmpi.so.40"),
        "mpich": ("mpich", "lib/wanmpi/venv/bin/mpicc", "lib/wanmpi/venv/bin", "lib/wanmpi/venv/bin/mpiexec.hydra",
                  MPICH, "libmpi.so.12"),
    }
    for m in doc["mpis"]:
        name = m["name"]
        assert (m["family"], m["mpicc"], m["bin_dir"], m["launcher"], m["built_for"], m["soname"]) == expected[name]
        assert (m["libwanmpi"], m["programs"]) == (f"lib/wanmpi/{name}/libwanmpi.so", f"libexec/wanmpi/{name}")
        assert libwanmpi.built_for(prefix / m["libwanmpi"]) == m["built_for"]
        reported = run([prefix / m["programs"] / "mpiversion"])
        assert reported.returncode == 0 and m["library_version"] == reported.stdout.strip()
    assert doc["mpis"][0]["library_version"].startswith(f"Open MPI v{OPENMPI.split()[-1]}, ")
    assert doc["mpis"][1]["library_version"].startswith(f"MPICH Version:      {MPICH.split()[-1]}\n")


def test_tree_is_complete(prefix):
    c = ["where", "ring", "collcheck", "pingpong", "collbench", "patterns", "wanflow", "steps", "overlap", "newcomm", "bt", "cg",
         "ep", "mg", "sp", "mpiversion"]
    assert sorted(os.listdir(prefix / "libexec" / "wanmpi" / "openmpi")) == sorted(c + ["cg_f90", "ep_f90"])
    assert sorted(os.listdir(prefix / "libexec" / "wanmpi" / "mpich")) == sorted(c)   # PyPI's MPICH has no Fortran
    assert os.listdir(prefix / "libexec" / "wanmpi" / "tools") == ["tcprtt"]
    for binary in ("wanmpi", "wanrelay", "wanem", "udpprobe"):
        assert os.access(prefix / "bin" / binary, os.X_OK), binary
    assert sorted(os.listdir(prefix / "share" / "wanmpi" / "examples")) == sorted(os.listdir(REPO / "examples"))
    assert (prefix / "share" / "doc" / "wanmpi" / "docs" / "install.md").read_text() == \
        (REPO / "docs" / "install.md").read_text()
    assert os.listdir(prefix / "share" / "modulefiles" / "wanmpi") == [VERSION]
    # MPICH's programs find the venv's libmpi relative to themselves, not at an absolute path
    dynamic = subprocess.run(["readelf", "-d", prefix / "libexec" / "wanmpi" / "mpich" / "where"],
                             capture_output=True, text=True).stdout
    assert "Library runpath: [$ORIGIN/../../../lib/wanmpi/venv/lib]" in dynamic


def test_python_package_is_installed_not_editable(prefix):
    site = glob.glob(str(prefix / "lib" / "wanmpi" / "venv" / "lib" / "python3*" / "site-packages"))
    assert len(site) == 1
    assert (Path(site[0]) / "wanmpi" / "paths.py").is_file()
    assert not glob.glob(f"{site[0]}/__editable__*") and not glob.glob(f"{site[0]}/*.pth")
    info = Path(site[0]) / f"wanmpi-{VERSION}.dist-info"
    assert sorted(os.listdir(info)) == ["INSTALLER", "METADATA", "RECORD", "REQUESTED", "WHEEL", "entry_points.txt",
                                        "top_level.txt"]          # no direct_url.json: not where the wheel was
    assert "direct_url.json" not in (info / "RECORD").read_text()
    assert os.access(Path(site[0]) / "wanmpi" / "testbed" / "ns-exec", os.X_OK)


# ---- moved, copied, without the checkout ------------------------------------------------------------
def test_paths_come_from_the_prefix(prefix, moved):
    code = ("from wanmpi import paths; print(paths.REPO, paths.BUILD, paths.DEFAULT_TOPOLOGY, paths.WANEM, "
            "paths.WANRELAY, paths.UDPPROBE, paths.OPENMPI_BIN, paths.MPICH_BIN, paths.libwanmpi('openmpi'), "
            "paths.libwanmpi('mpich'), paths.libwanshim(), paths.program('mpich', 'where'), paths.tool('tcprtt'), "
            "paths.NS_EXEC_AGENT, sep='\\n')")
    done = hidden([moved / "lib" / "wanmpi" / "venv" / "bin" / "python", "-I", "-c", code], hide=(prefix,))
    assert done.returncode == 0, done.stderr
    site = glob.glob(str(moved / "lib" / "wanmpi" / "venv" / "lib" / "python3*" / "site-packages"))[0]
    m = str(moved)
    assert done.stdout.splitlines() == [
        "None", "None", f"{m}/share/wanmpi/examples/two-clusters.toml", f"{m}/bin/wanem", f"{m}/bin/wanrelay",
        f"{m}/bin/udpprobe", "/usr/bin", f"{m}/lib/wanmpi/venv/bin", f"{m}/lib/wanmpi/openmpi/libwanmpi.so",
        f"{m}/lib/wanmpi/mpich/libwanmpi.so", f"{m}/lib/wanmpi/libwanshim.so", f"{m}/libexec/wanmpi/mpich/where",
        f"{m}/libexec/wanmpi/tools/tcprtt", f"{site}/wanmpi/testbed/ns-exec"]


def test_moved_prefix_runs_from_anywhere(prefix, moved, tmp_path):
    expected = version_lines(moved, "prefix", installed_mpis(moved))
    direct = hidden([moved / "bin" / "wanmpi", "--version"], hide=(prefix,))
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout.splitlines() == expected
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "wanmpi").symlink_to(moved / "bin" / "wanmpi")      # a link to it elsewhere on PATH
    on_path = hidden(["env", f"PATH={tmp_path}/bin:{CLEAN_PATH}", "wanmpi", "--version"], hide=(prefix,))
    assert on_path.returncode == 0, on_path.stderr
    assert on_path.stdout.splitlines() == expected


@pytest.mark.parametrize("mpi", MPIS)
def test_job_runs_from_the_moved_prefix_without_the_checkout(prefix, moved, two_clusters, tmp_path, mpi):
    topology = moved / "share" / "wanmpi" / "examples" / "two-clusters.toml"
    done = hidden([moved / "bin" / "wanmpi", "run", "-t", topology, "--mpi", mpi, "--timeout", "120", "-n", "4",
                   "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                   moved / "libexec" / "wanmpi" / mpi / "where", "--bytes", "100000"], hide=(prefix,), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"rank \d+ of 4 on (\S+)", done.stdout) == ["a0", "a2", "b0", "b2"]
    assert "allreduce ok" in done.stdout
    # the prefix's libwanmpi was preloaded in every rank: it alone writes these
    assert sorted(os.listdir(tmp_path)) == [f"stats-{r}.json" for r in range(4)]


@pytest.mark.parametrize("system", MODULE_SYSTEMS)
@pytest.mark.parametrize("tree", ["prefix", "site"])
def test_modulefile_loads_and_unloads(prefix, moved, tmp_path, tree, system):
    """With environment-modules and with Lmod, from the prefix's own modules
    tree or a site's that links to the modulefile, in a shell that has only
    the module system's own init script."""
    init = MODULE_SYSTEMS[system].resolve()
    assert init.is_file(), f"{init} is missing: run `make build`"
    modules = moved / "share" / "modulefiles"
    if tree == "site":
        (tmp_path / "modules" / "wanmpi").mkdir(parents=True)
        (tmp_path / "modules" / "wanmpi" / VERSION).symlink_to(modules / "wanmpi" / VERSION)
        modules = tmp_path / "modules"
    script = (f"source {init} && module use {modules} && module load wanmpi && wanmpi --version && "
              'echo "WANMPI_PREFIX=$WANMPI_PREFIX PATH=$PATH" && module unload wanmpi && '
              'echo "unloaded: WANMPI_PREFIX=${WANMPI_PREFIX-(unset)} PATH=$PATH" && '
              '{ command -v wanmpi || echo "wanmpi is off PATH"; }')
    done = hidden(["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "bash", "--noprofile", "--norc", "-c", script],
                  hide=(prefix,), keep=(init.parents[2],) if REPO in init.parents else ())
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [*version_lines(moved, "prefix", installed_mpis(moved)),
                                        f"WANMPI_PREFIX={moved} PATH={moved}/bin:{CLEAN_PATH}",
                                        f"unloaded: WANMPI_PREFIX=(unset) PATH={CLEAN_PATH}", "wanmpi is off PATH"]


# ---- the systemd unit of standing relays ---------------------------------------------------------
STANDING_SITES = """
[relay]
standing = true

[[cluster]]
name = "a"
network = "127.0.1.0/24"
hosts = ["127.0.1.1"]
relays = [{ host = "gw-a1", inside = "127.0.1.250", outside = "127.0.3.1" }]

[[cluster]]
name = "b"
network = "127.0.2.0/24"
hosts = ["127.0.2.1"]
relays = [{ host = "gw-b1", inside = "127.0.2.250", outside = "127.0.3.2" }]
"""


def relay_unit(prefix: Path, tmp_path: Path, instance: str) -> Path:
    """The installed unit as systemd would load it for one instance."""
    unit = tmp_path / f"wanrelay@{instance}.service"
    shutil.copy(prefix / "share" / "wanmpi" / "systemd" / "wanrelay@.service", unit)
    return unit


def test_systemd_unit_verifies(prefix, tmp_path):
    """systemd-analyze verify: the unit's syntax, every setting, and that
    ExecStart names an executable (systemd need not be running)."""
    done = run(["systemd-analyze", "verify", relay_unit(prefix, tmp_path, "gw-a1")], timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    about_it = [line for line in (done.stdout + done.stderr).splitlines() if "wanrelay" in line]
    assert about_it == [], done.stdout + done.stderr


def test_systemd_unit_runs_wanrelay_on_the_files_of_a_standing_relay(prefix, tmp_path):
    """ExecStart is this prefix's wanrelay on the configuration `wanmpi relay
    up` writes; run as it is (in a mount namespace whose /var/lib is empty and
    a network namespace of its own), on the key and configuration written as
    `up` writes them, wanrelay listens on the relay's addresses and stops on
    the unit's KillSignal within its TimeoutStopSec."""
    t = topo.loads(STANDING_SITES, "standing.toml")
    relay = t.relays[0]
    files = standing_relays.files(relay.name)
    unit = relay_unit(prefix, tmp_path, relay.name).read_text()
    settings = dict(line.split("=", 1) for line in unit.splitlines() if re.match(r"[A-Z]\w*=", line))
    argv = shlex.split(settings["ExecStart"].replace("%i", relay.name))
    assert argv == [str(prefix / "bin" / "wanrelay"), "--config", files.config]
    assert settings["ReadOnlyPaths"] == standing_relays.STATE
    script = remote_relay.WRITE_FILES + ('ip link set lo up && mount -t tmpfs none /var/lib && umask 077 && '
                                         'mkdir -p "$1" && write_files "$2" "$3" && shift 3 && exec "$@" </dev/null')
    log = tmp_path / "wanrelay.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", script, "sh",
                                 standing_relays.STATE, files.key, files.config, *argv],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
    try:
        proc.stdin.write(remote_relay.credentials(relays.config(t, relay, Path(remote_relay.KEY_FILE)),
                                                  secrets.token_hex(32)))
        proc.stdin.close()
        wanted = {relay.inside_endpoint, relay.outside_endpoint, f"127.0.0.1:{topo.RELAY_METRICS_PORT}"}
        listening: set[str] = set()
        deadline = time.monotonic() + 15
        while not wanted <= listening and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            ss = subprocess.run(["nsenter", "-t", str(proc.pid), "-n", "ss", "-Hltn"], capture_output=True,
                                text=True)
            listening = {line.split()[3] for line in ss.stdout.splitlines()}
        assert wanted <= listening, f"listening on {sorted(listening)}; wanrelay said:\n{log.read_text()}"
        assert os.readlink(f"/proc/{proc.pid}/exe") == argv[0]
        proc.send_signal(signal.Signals[settings["KillSignal"]])
        assert proc.wait(timeout=float(settings["TimeoutStopSec"])) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- which MPI ------------------------------------------------------------------------------------
def test_libwanmpi_built_for_another_mpi_is_refused(prefix, tmp_path):
    copy = linked_copy(prefix, tmp_path / "wanmpi")
    lib = copy / "lib" / "wanmpi" / "openmpi" / "libwanmpi.so"
    shutil.copy(copy / "lib" / "wanmpi" / "mpich" / "libwanmpi.so", tmp_path / "swapped.so")
    os.replace(tmp_path / "swapped.so", lib)                  # a new file: the original prefix keeps its own
    done = run([copy / "bin" / "wanmpi", "run", "--mpi", "openmpi", "-n", "2",
                copy / "libexec" / "wanmpi" / "openmpi" / "where"])
    assert done.returncode == 2
    assert done.stderr == (f"wanmpi: error: libwanmpi {lib} was built for {MPICH}, but MPI 'openmpi' launches with "
                           f"/usr/bin/mpirun.openmpi, which is {OPENMPI}: use the MPI it was built for, or build it "
                           "for this one (make install MPICC=<its mpicc> NAME=openmpi)\n")


def test_checkout_refuses_a_libwanmpi_built_for_another_mpi(tmp_path):
    shutil.copy(REPO / "build" / "lib" / "libwanmpi-openmpi.so", tmp_path / "libwanmpi-mpich.so")
    shutil.copy(REPO / "build" / "lib" / "libwanshim.so", tmp_path / "libwanshim.so")
    done = wanmpi("run", "--mpi", "mpich", "-n", "2", str(REPO / "build" / "mpich" / "where"),
                  env={"WANMPI_LIB_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"wanmpi: error: libwanmpi {tmp_path}/libwanmpi-mpich.so was built for {OPENMPI}, but MPI "
                           f"'mpich' launches with {REPO}/.venv/bin/mpiexec.hydra, which is {MPICH}: use the MPI it "
                           "was built for, or build it for this one (make lib)\n")


def test_same_mpi_compares_kind_and_version():
    assert libwanmpi.same_mpi("Open MPI 4.1.4", "Open MPI 4.1.4")
    assert not libwanmpi.same_mpi("Open MPI 4.1.4", "Open MPI 5.0.3")
    assert not libwanmpi.same_mpi("MPICH 5.0.2", "Open MPI 4.1.4")
    assert libwanmpi.same_mpi("MVAPICH2 2.3.7", "MPICH 3.2.1")        # hydra reports its own version
    assert not libwanmpi.same_mpi("MPICH 4.1", "MPICH 5.0.2")


def test_open_mpi_5_in_a_prefix_is_launched_by_prrte():
    """An MPI of the manifest takes Open MPI 5's launcher (PRRTE) by its
    library version, not only by its family."""
    def installed(family, version):
        return install.InstalledMPI("site", family, Path("cc"), Path("bin"), Path("bin/mpirun"), version, "",
                                    "libmpi.so.40", Path("lib.so"), Path("programs"), None)
    assert installed("openmpi", "Open MPI v5.0.11, package: Open MPI root@host Distribution").prrte
    assert not installed("openmpi", "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4").prrte
    assert not installed("mpich", "MPICH Version:      5.0.2").prrte
    assert installed("mpich", "Intel(R) MPI Library 2021.18.1 for Linux* OS").intel
    assert not installed("mpich", "MPICH Version:      5.0.2").intel


def test_site_mpi_is_added_beside_the_others(prefix, two_clusters, tmp_path):
    site = linked_copy(prefix, tmp_path / "wanmpi")
    before = json.loads((site / "share" / "wanmpi" / "install.json").read_text())
    no_name = make("install", f"PREFIX={site}", "MPICC=/usr/bin/mpicc.openmpi")
    assert no_name.returncode != 0
    assert "install: error: MPICC=/usr/bin/mpicc.openmpi needs NAME=<label>" in no_name.stderr
    added = make("install", f"PREFIX={site}", "MPICC=/usr/bin/mpicc.openmpi", "NAME=site-ompi")
    assert added.returncode == 0, added.stdout + added.stderr
    after = json.loads((site / "share" / "wanmpi" / "install.json").read_text())
    assert after["mpis"][:2] == before["mpis"]                 # the others stay as they were
    assert after["content_hash"] != before["content_hash"]
    entry = after["mpis"][2]
    assert {k: entry[k] for k in ("name", "family", "mpicc", "launcher", "libwanmpi", "programs", "built_for")} == {
        "name": "site-ompi", "family": "openmpi", "mpicc": "/usr/bin/mpicc.openmpi",
        "launcher": "/usr/bin/mpirun.openmpi", "libwanmpi": "lib/wanmpi/site-ompi/libwanmpi.so",
        "programs": "libexec/wanmpi/site-ompi", "built_for": OPENMPI}
    assert sorted(os.listdir(site / "libexec" / "wanmpi" / "site-ompi")) == \
        sorted(os.listdir(prefix / "libexec" / "wanmpi" / "openmpi"))
    done = hidden([site / "bin" / "wanmpi", "run", "--mpi", "site-ompi", "--timeout", "120", "-n", "4",
                   "--map", "interleave", site / "libexec" / "wanmpi" / "site-ompi" / "where"], hide=(prefix,),
                  timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"rank \d+ of 4 on (\S+)", done.stdout) == ["a0", "b0", "a1", "b1"]


@pytest.mark.parametrize("mpi", [installed_mpi("openmpi5"), installed_mpi("intelmpi")])
def test_open_mpi_5_and_intel_mpi_are_added_to_a_prefix_and_launched_as_themselves(prefix, two_clusters, tmp_path,
                                                                                  mpi):
    """`make install MPICC=<the venv's mpicc> NAME=...`: the prefix's launcher
    for it is the one of its library version (PRRTE, Intel's settings), and
    a job runs from the prefix."""
    site = linked_copy(prefix, tmp_path / "wanmpi")
    mpicc = launch.launcher(mpi).mpicc
    added = make("install", f"PREFIX={site}", f"MPICC={mpicc}", f"NAME=site-{mpi}")
    assert added.returncode == 0, added.stdout + added.stderr
    entry = json.loads((site / "share" / "wanmpi" / "install.json").read_text())["mpis"][-1]
    assert entry["name"] == f"site-{mpi}" and entry["mpicc"] == str(mpicc)
    done = hidden([site / "bin" / "wanmpi", "run", "--mpi", f"site-{mpi}", "--timeout", "120", "-n", "4",
                   "--map", "interleave", "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                   site / "libexec" / "wanmpi" / f"site-{mpi}" / "where", "--library", "1"], hide=(prefix,),
                  keep=(mpicc.parent.parent,), timeout=240)          # the MPI's venv: the site's MPI
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.findall(r"rank \d+ of 4 on (\S+)", done.stdout) == ["a0", "b0", "a1", "b1"]
    assert done.stdout.startswith({"openmpi5": "library: Open MPI v5.0",
                                   "intelmpi": "library: Intel(R) MPI Library 2021"}[mpi]), done.stdout
    assert sorted(p.name for p in tmp_path.glob("stats-*.json")) == [f"stats-{r}.json" for r in range(4)]


def test_site_mpi_needs_a_prefix_of_the_same_version(prefix, tmp_path):
    copy = linked_copy(prefix, tmp_path / "wanmpi")
    manifest = copy / "share" / "wanmpi" / "install.json"
    doc = json.loads(manifest.read_text())
    manifest.unlink()                                         # a new file: the original keeps its own
    manifest.write_text(json.dumps({**doc, "version": "0.0.1"}))
    done = make("install", f"PREFIX={copy}", "MPICC=/usr/bin/mpicc.openmpi", "NAME=old")
    assert done.returncode != 0
    assert (f"install: error: {copy} holds wanmpi 0.0.1 and this checkout is {VERSION}: "
            f"run `make install PREFIX={copy}` first") in done.stderr
    assert not (copy / "lib" / "wanmpi" / "old").exists()


# ---- uninstall --------------------------------------------------------------------------------------
def test_uninstall_removes_the_prefix(prefix, tmp_path):
    copy = linked_copy(prefix, tmp_path / "wanmpi")
    done = make("uninstall", f"PREFIX={copy}", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not copy.exists()
    assert (prefix / "bin" / "wanmpi").exists()


def test_uninstall_leaves_what_it_did_not_install(prefix, tmp_path):
    copy = linked_copy(prefix, tmp_path / "wanmpi")
    (copy / "bin" / "mine").write_text("someone else's\n")
    (copy / "share" / "doc" / "other").mkdir()
    done = make("uninstall", f"PREFIX={copy}", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    left = sorted(str(p.relative_to(copy)) for p in copy.rglob("*"))
    assert left == ["bin", "bin/mine", "share", "share/doc", "share/doc/other"]


def test_uninstall_refuses_a_directory_that_is_not_a_prefix(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "wanmpi").write_text("not ours\n")
    done = make("uninstall", f"PREFIX={tmp_path}", timeout=120)
    assert done.returncode != 0
    assert f"uninstall: error: {tmp_path} is not a wanmpi prefix (no share/wanmpi/install.json): nothing removed" \
        in done.stderr
    assert (tmp_path / "bin" / "wanmpi").read_text() == "not ours\n"


# ---- last: installing again ---------------------------------------------------------------------------
def test_installing_again_gives_the_same_tree(prefix):
    """make install is idempotent and its content hash reproducible (copies
    made before keep their files: everything is replaced, not rewritten)."""
    before = json.loads((prefix / "share" / "wanmpi" / "install.json").read_text())
    done = make("install", f"PREFIX={prefix}")
    assert done.returncode == 0, done.stdout + done.stderr
    after = json.loads((prefix / "share" / "wanmpi" / "install.json").read_text())
    assert {**after, "installed": None} == {**before, "installed": None}
    assert installer().content_hash(prefix) == before["content_hash"]
