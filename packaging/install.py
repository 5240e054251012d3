#!/usr/bin/env python3
"""`make install` and `make uninstall` (docs/install.md).

    install.py install --prefix DIR [--mpicc MPICC [--name NAME]] --openmpi-cc CC
                       --lib-sources "..." --fence-sources "..." --lib-flags "..." --cflags "..." --fflags "..."
                       --programs "..." --fortran-programs "..."
    install.py uninstall --prefix DIR

The Makefile runs it after `make build` and passes its own lists of sources
and flags, which stay in the Makefile only. The layout of a prefix and the
manifest's format are python/wanmpi/install.py's.

Without --mpicc: the whole tree (a venv from /usr/bin/python3 with the
wanmpi package installed from a wheel, MPICH 5 from PyPI and what else
python/requirements.txt marks "prefix"; wanrelay, wanem and udpprobe;
libwanshim; examples, docs, modulefile) and libwanmpi with wanmpi's MPI
programs for each MPI found (and, for an MPICH-derived one, libwanfence): Open MPI from Debian (reusing build/, which
`make build` made with the same flags) and the venv's MPICH (built here,
with run paths relative to $ORIGIN). MPIs added before with --mpicc stay.
With --mpicc: libwanmpi and the programs for that one MPI, added to the
manifest under NAME; the rest of an existing prefix is left as it is.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
from wanmpi import install                      # noqa: E402  (the manifest's one home)
from wanmpi.job import libwanmpi                # noqa: E402  (what a libwanmpi was built for)
from wanmpi.job import standing_relays          # noqa: E402  (the files the systemd unit runs)

BASE_PYTHON = "/usr/bin/python3"
RESERVED_NAMES = ("tools", "venv")              # libexec/wanmpi/tools, lib/wanmpi/venv
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*$")


class InstallError(RuntimeError):
    """Install or uninstall cannot go on; the message says why."""


@dataclass(frozen=True)
class Build:
    """What the Makefile passes: where to install and how to build."""
    prefix: Path
    openmpi_cc: Path
    lib_sources: list[str]
    fence_sources: list[str]
    lib_flags: list[str]
    cflags: list[str]
    fflags: list[str]
    programs: list[str]
    fortran: list[str]

    @property
    def venv(self) -> Path:
        return self.prefix / install.VENV


def say(text: str) -> None:
    print(f"install: {text}", flush=True)


def run(argv: list, **kwargs) -> str:
    """Run a command; its output, or InstallError with the command and its messages."""
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=REPO, **kwargs)
    if done.returncode != 0:
        raise InstallError(f"{shlex.join(str(a) for a in argv)} failed (exit {done.returncode}):\n"
                           f"{(done.stdout + done.stderr).strip()}")
    return done.stdout


def put(src: Path, dst: Path, mode: int | None = None) -> None:
    """Copy a file into place atomically (a running wanrelay keeps its old file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.new")
    shutil.copy2(src, tmp)
    if mode is not None:
        tmp.chmod(mode)
    os.replace(tmp, dst)


def put_text(text: str, dst: Path, mode: int = 0o644) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.new")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, dst)


def replace_tree(src: Path, dst: Path, pattern: str = "*") -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for f in sorted(src.glob(pattern)):
        (shutil.copytree if f.is_dir() else shutil.copy2)(f, dst / f.name)


# ---- the tree ------------------------------------------------------------------------------
def install_base(b: Build, version: str) -> None:
    install_venv(b)
    p = b.prefix
    put_text((REPO / "packaging" / "wanmpi.sh").read_text().replace("@VERSION@", version), p / "bin" / "wanmpi",
             0o755)
    for binary in ("wanrelay", "wanem", "udpprobe"):
        put(REPO / "target" / "release" / binary, p / "bin" / binary)
    put(REPO / "build" / "lib" / "libwanshim.so", p / "lib" / "wanmpi" / "libwanshim.so")
    put(REPO / "build" / "tools" / "tcprtt", p / "libexec" / "wanmpi" / "tools" / "tcprtt")
    put(REPO / "lib" / "include" / "wanmpi.h", p / "include" / "wanmpi.h")
    replace_tree(REPO / "examples", p / "share" / "wanmpi" / "examples", "*.toml")
    for extra in sorted([*(REPO / "examples").glob("*.rules"), *(REPO / "examples").glob("*.py")]):
        put(extra, p / "share" / "wanmpi" / "examples" / extra.name)   # tuned rules, the mpi4py example
    replace_tree(REPO / "docs", p / "share" / "doc" / "wanmpi" / "docs")
    put(REPO / "README.md", p / "share" / "doc" / "wanmpi" / "README.md")
    modules = p / "share" / "modulefiles" / "wanmpi"
    if modules.exists():
        shutil.rmtree(modules)              # one version per prefix
    put_text((REPO / "packaging" / "modulefile.tcl").read_text().replace("@VERSION@", version), modules / version)
    put_text(relay_unit(p), p / "share" / "wanmpi" / "systemd" / "wanrelay@.service")
    say("bin/wanmpi, wanrelay, wanem, udpprobe, libwanshim, examples, docs, modulefile, systemd unit")


def relay_unit(prefix: Path) -> str:
    """The systemd unit of standing relays: this prefix's wanrelay on the
    configuration `wanmpi relay up` writes (instance %i: the relay's name)."""
    text = (REPO / "packaging" / "wanrelay@.service").read_text()
    for name, value in (("PREFIX", str(prefix)), ("STATE", standing_relays.STATE),
                        ("RELAY_CONFIG", standing_relays.files("%i").config)):
        text = text.replace(f"@{name}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise InstallError(f"packaging/wanrelay@.service: no value for {', '.join(sorted(set(left)))}")
    return text


def prefix_requirements() -> list[str]:
    """The lines of python/requirements.txt marked '# prefix': what an installed wanmpi needs."""
    lines = (REPO / "python" / "requirements.txt").read_text().splitlines()
    return [l.split("#")[0].strip() for l in lines if re.search(r"#\s*prefix\b", l)]


def install_venv(b: Build) -> None:
    """A venv from /usr/bin/python3 with the runtime requirements and the
    wanmpi package, installed from a wheel built from a clean copy of
    python/ (not editable: nothing in it points back at the checkout)."""
    python = b.venv / "bin" / "python"
    if not python.exists():
        run([BASE_PYTHON, "-m", "venv", "--without-pip", b.venv])
    pip = [sys.executable, "-m", "pip", "--python", python]
    requirements = prefix_requirements()
    run([*pip, "install", "-q", *requirements])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy2(REPO / "python" / "pyproject.toml", src)
        shutil.copytree(REPO / "python" / "wanmpi", src / "wanmpi",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", Path(tmp) / "dist",
             src])
        wheel = next((Path(tmp) / "dist").glob("wanmpi-*.whl"))
        run([*pip, "install", "-q", "--no-deps", "--force-reinstall", wheel])
    forget_wheel_path(b.venv)
    say(f"venv {install.VENV}: {wheel.name}, {', '.join(requirements)}")


def forget_wheel_path(venv: Path) -> None:
    """Remove direct_url.json (PEP 610: where pip took the wheel from, a
    temporary directory): only informative, and it would make every
    installation's content hash different."""
    for direct in venv.glob("lib/python3*/site-packages/wanmpi-*.dist-info/direct_url.json"):
        direct.unlink()
        record = direct.with_name("RECORD")
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(l for l in lines if not l.startswith(f"{direct.parent.name}/direct_url.json,")))


# ---- one MPI -------------------------------------------------------------------------------
def family_of(library_version: str) -> str:
    if library_version.startswith("Open MPI"):
        return "openmpi"
    if re.search(r"MPICH|MVAPICH|Intel\(R\) MPI", library_version):
        return "mpich"
    raise InstallError(f"cannot tell which MPI this is from its library version {library_version[:80]!r}: "
                       "wanmpi launches Open MPI (mpirun) and MPICH and its kin (mpiexec.hydra)")


def launcher_of(family: str, mpicc: Path) -> Path:
    if family == "openmpi":
        name = "mpirun.openmpi" if mpicc.name.endswith(".openmpi") else "mpirun"
    else:
        name = "mpiexec.hydra"
    launcher = mpicc.parent / name
    if not launcher.exists():
        raise InstallError(f"{launcher} not found: wanmpi starts {family} jobs with it, beside {mpicc}")
    return launcher


def compiler(b: Build, mpicc: Path):
    """argv(out, args) -> the command that builds `out` with this MPI. An MPI
    inside the prefix (the venv's MPICH) is found through run paths relative to
    $ORIGIN instead of the absolute ones its mpicc adds, so the tree can move."""
    if b.prefix not in mpicc.parents:
        return lambda out, args: [mpicc, *args]
    words = shlex.split(run([mpicc, "-show"]))
    rest, inner = [], []
    i = 1
    while i < len(words):
        w = words[i]
        if w == "-Wl,-rpath" and i + 1 < len(words) and words[i + 1].startswith(f"-Wl,{b.prefix}"):
            inner.append(words[i + 1][4:])
            i += 2
            continue
        if w.startswith(f"-Wl,-rpath,{b.prefix}"):
            inner.append(w[len("-Wl,-rpath,"):])
        else:
            rest.append(w)
        i += 1

    def argv(out: Path, args: list) -> list:
        paths = ":".join(f"$ORIGIN/{os.path.relpath(d, out.parent)}" for d in inner)
        return [words[0], *args, *rest, *([f"-Wl,-rpath,{paths}"] if paths else [])]
    return argv


def library_of(program: Path) -> tuple[str, str]:
    """MPI_Get_library_version as `program` (mpiversion) prints it, and the soname of its MPI library."""
    version = run([program]).strip()
    needed = re.findall(r"\[(lib(?:mpi|mpich)\.so[.\d]*)\]", run(["readelf", "-d", program]))
    if not needed:
        raise InstallError(f"{program} is not linked with an MPI library (libmpi.so)")
    return version, needed[0]


def build_programs(b: Build, cc, fc: Path | None, dest: Path) -> list[str]:
    """wanmpi's MPI programs into dest, two at a time; the names built."""
    jobs = [(dest / Path(src).stem, cc(dest / Path(src).stem, [*b.cflags, "-o", dest / Path(src).stem, src, "-lm"]))
            for src in b.programs]
    modules = tempfile.mkdtemp()
    if fc is not None:
        jobs += [(dest / Path(src).stem, [fc, *b.fflags, "-fwrapv", "-Ibench/kernels", "-J", modules,
                                          "-o", dest / Path(src).stem, src]) for src in b.fortran]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(lambda job: run(job[1]), jobs))
    finally:
        shutil.rmtree(modules)
    return [out.name for out, _ in jobs]


def install_mpi(b: Build, name: str, mpicc: Path, reuse: bool) -> install.InstalledMPI:
    """libwanmpi and wanmpi's programs for one MPI; its entry of the manifest.
    reuse: Debian's Open MPI, whose outputs `make build` left in build/."""
    if not NAME.match(name) or name in RESERVED_NAMES:
        raise InstallError(f"NAME={name!r}: use letters, digits, '.', '_' and '-' (not {' or '.join(RESERVED_NAMES)})")
    if not (mpicc.is_file() and os.access(mpicc, os.X_OK)):
        raise InstallError(f"MPICC={mpicc}: no such compiler wrapper")
    programs, libdir = b.prefix / "libexec" / "wanmpi" / name, b.prefix / "lib" / "wanmpi" / name
    for d in (programs, libdir):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    cc = compiler(b, mpicc)
    run(cc(programs / "mpiversion", ["-O2", "-o", programs / "mpiversion", "packaging/mpiversion.c"]))
    library_version, soname = library_of(programs / "mpiversion")
    family = family_of(library_version)
    launcher = launcher_of(family, mpicc)
    lib = libdir / "libwanmpi.so"
    if reuse:
        put(REPO / "build" / "lib" / "libwanmpi-openmpi.so", lib)
        built = [Path(p).stem for p in b.programs + b.fortran]
        for program in built:
            put(REPO / "build" / "openmpi" / program, programs / program)
    else:
        run(cc(lib, [*b.lib_flags, "-o", lib, *b.lib_sources, "-ldl", "-lpthread"]))
        if family == "mpich":           # MPI_Finalize's fence for jobs without libwanmpi (lib/src/fence)
            fence = install.fence_library(lib)
            run(cc(fence, [*b.lib_flags, "-o", fence, *b.fence_sources]))
        built = build_programs(b, cc, install.fortran_beside(mpicc), programs)
    built_for = check_pairing(lib, name, launcher)
    say(f"{name}: {built_for}, launched by {launcher}; libwanmpi and {len(built)} programs "
        f"({'from build/' if reuse else f'built with {mpicc}'})")
    return install.InstalledMPI(name, family, mpicc, mpicc.parent, launcher, library_version, built_for, soname,
                                lib, programs, install.checkout_commit(REPO)[0])


def check_pairing(lib: Path, name: str, launcher: Path) -> str:
    """What libwanmpi was built for, if the launcher belongs to that MPI (InstallError if not)."""
    built = libwanmpi.built_for(lib)
    if built is None:
        raise InstallError(f"{lib} does not say what it was built for (no section .wanmpi_built_for)")
    problem = libwanmpi.mismatch(lib, name, launcher)
    if problem:
        raise InstallError(problem)
    return built


# ---- the manifest --------------------------------------------------------------------------
def content_hash(prefix: Path) -> str:
    """sha256 of everything `make install` put in the prefix except the
    manifest (and Python's byte-code caches): paths, kinds, contents."""
    h = hashlib.sha256()
    files = []
    for top in install.CONTENTS:
        path = prefix / top
        if path.is_symlink() or path.is_file():
            files.append(path)
        elif path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                files += [Path(root) / n for n in names] + [Path(root) / d for d in dirs if (Path(root) / d).is_symlink()]
    for f in sorted(files):
        rel = str(f.relative_to(prefix))
        if rel == str(install.MANIFEST):
            continue
        if f.is_symlink():
            h.update(f"{rel}\0link\0{os.readlink(f)}\0".encode())
        else:
            h.update(f"{rel}\0{'x' if os.access(f, os.X_OK) else 'f'}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return f"sha256:{h.hexdigest()}"


def write_manifest(b: Build, version: str, old: install.Manifest | None, new: list[install.InstalledMPI]) -> None:
    kept = [m for m in (old.mpis if old else ()) if m.name not in {n.name for n in new} and m.libwanmpi.exists()]
    commit, dirty = install.checkout_commit(REPO)
    manifest = install.Manifest(b.prefix, version, commit, dirty, content_hash(b.prefix), tuple(kept + new))
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    put_text(json.dumps(install.manifest_json(manifest, now), indent=2) + "\n", b.prefix / install.MANIFEST)


def cmd_install(args) -> None:
    started = time.monotonic()
    b = Build(Path(args.prefix).resolve(), Path(args.openmpi_cc), args.lib_sources.split(), args.fence_sources.split(),
              args.lib_flags.split(), args.cflags.split(), args.fflags.split(), args.programs.split(), args.fortran_programs.split())
    old = install.load(b.prefix) if (b.prefix / install.MANIFEST).exists() else None
    version = install.checkout_version(REPO)
    if args.mpicc and old is not None and old.version != version:
        raise InstallError(f"{b.prefix} holds wanmpi {old.version} and this checkout is {version}: "
                           f"run `make install PREFIX={b.prefix}` first")
    if not args.mpicc or old is None:
        install_base(b, version)
    if args.mpicc:
        mpicc = Path(args.mpicc).absolute()
        if not args.name:
            raise InstallError(f"MPICC={args.mpicc} needs NAME=<label>: what `wanmpi run --mpi` will call this MPI")
        mpis = [install_mpi(b, args.name, mpicc, reuse=False)]
    else:
        mpis = []
        if b.openmpi_cc.exists():
            mpis.append(install_mpi(b, "openmpi", b.openmpi_cc, reuse=True))
        else:
            say(f"openmpi: {b.openmpi_cc} not found, not installed for it")
        mpis.append(install_mpi(b, "mpich", b.venv / "bin" / "mpicc", reuse=False))
    write_manifest(b, version, old, mpis)
    names = [m.name for m in install.load(b.prefix).mpis]
    say(f"wanmpi {version} in {b.prefix} for {', '.join(names)} ({time.monotonic() - started:.0f} s); "
        f"module use {b.prefix}/share/modulefiles")


# ---- uninstall -----------------------------------------------------------------------------
def cmd_uninstall(args) -> None:
    """Remove what `make install` put into the prefix, and the directories
    that leaves empty; only from a prefix with a manifest."""
    prefix = Path(args.prefix).resolve()
    manifest = prefix / install.MANIFEST
    if not manifest.is_file():
        raise InstallError(f"{prefix} is not a wanmpi prefix (no {install.MANIFEST}): nothing removed")
    last = str(install.MANIFEST.parent)         # share/wanmpi, with the manifest: an interrupted uninstall can go on
    for top in [t for t in install.CONTENTS if t != last] + [last]:
        path = prefix / top
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    for d in ("share/doc", "share/modulefiles", "share", "bin", "lib", "libexec", "include", "."):
        try:
            (prefix / d).rmdir()
        except OSError:
            pass
    left = sorted(str(p.relative_to(prefix)) for p in prefix.iterdir()) if prefix.exists() else []
    print(f"uninstall: removed wanmpi from {prefix}" + (f" (other files left: {', '.join(left[:5])})" if left else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="packaging/install.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("install")
    for option in ("--prefix", "--openmpi-cc", "--lib-sources", "--fence-sources", "--lib-flags", "--cflags", "--fflags", "--programs",
                   "--fortran-programs"):
        i.add_argument(option, required=True)
    i.add_argument("--mpicc", default="")
    i.add_argument("--name", default="")
    u = sub.add_parser("uninstall")
    u.add_argument("--prefix", required=True)
    args = p.parse_args(argv)
    try:
        (cmd_install if args.command == "install" else cmd_uninstall)(args)
    except (InstallError, install.ManifestError) as e:
        print(f"{args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
