"""`wanmpi mpicc` and `wanmpi mpif90`: compile a program with the compiler
wrapper of the MPI that `wanmpi run --mpi NAME` launches (docs/install.md,
"Which MPI"), so nobody hunts for the paths of the MPI wanmpi installed or
found, and the program is built for the MPI it will run under.

    wanmpi mpicc [--mpi NAME] ARGS...     ARGS go to the wrapper as they are
    wanmpi mpif90 [--mpi NAME] ARGS...
    wanmpi mpicc --abi ARGS...            against MPI-5's standard ABI (mpicc_abi): the
                                          program runs under every MPI that implements it

The compiler's arguments start with dashes (-O2, -o), which argparse would
take for wanmpi's own: main() hands these two commands their argv whole, and
only a leading --mpi NAME (or --mpi=NAME) is wanmpi's."""
from __future__ import annotations

import subprocess

from ..job import launch
from .options import CliError, mpi_name

COMMANDS = {"mpicc": "C", "mpif90": "Fortran"}


def register(commands) -> None:
    """Entries for `wanmpi --help` and `wanmpi mpicc --help`; main() runs them."""
    for name, language in COMMANDS.items():
        p = commands.add_parser(name, help=f"compile a {language} MPI program with the wrapper of an MPI "
                                f"wanmpi runs", usage=f"wanmpi {name} [--mpi MPI | --abi] ARGS...")
        p.add_argument("--mpi", default="openmpi", help="the MPI the program will run under (default: openmpi)")
        p.add_argument("ARGS", help="the wrapper's arguments, as for the MPI's own " + name)


def split(argv: list[str]) -> tuple[str, list[str]]:
    """(MPI name, the wrapper's arguments) of `wanmpi mpicc|mpif90 ...` (argv without the command)."""
    if argv[:1] == ["--mpi"]:
        if len(argv) < 2:
            raise CliError("--mpi needs the name of an MPI")
        return mpi_name(argv[1]), argv[2:]
    if argv[:1] and argv[0].startswith("--mpi="):
        return mpi_name(argv[0][len("--mpi="):]), argv[1:]
    return "openmpi", argv


def wrapper(command: str, mpi: launch.Launcher):
    """The compiler wrapper `command` (mpicc or mpif90) of this MPI, or CliError."""
    path = mpi.mpicc if command == "mpicc" else mpi.fortran()
    if path is None or not path.exists():
        what = "C compiler wrapper" if command == "mpicc" else "Fortran compiler wrapper (mpifort, mpif90)"
        raise CliError(f"{mpi.name}: no {what} found{f' at {path}' if path else f' beside {mpi.mpicc}'}"
                       f" ({launch.how_to_build(mpi) if command == 'mpicc' else 'make build builds one for MPICH'})")
    return path


def abi_wrapper(command: str):
    """mpicc_abi, of the first registered MPI that has one beside its mpicc (MPICH 5)."""
    if command != "mpicc":
        raise CliError(f"--abi: MPI-5's standard ABI is C only here (no MPI_Fint); build Fortran programs "
                       f"with wanmpi {command} --mpi NAME")
    for name in launch.Launcher.registry:
        path = launch.launcher(name).mpicc.with_name("mpicc_abi")
        if path.exists():
            return path
    raise CliError("--abi: no MPI here has mpicc_abi (MPICH 5's wheel has one: make setup)")


def main(command: str, argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(f"usage: wanmpi {command} [--mpi MPI | --abi] ARGS...\n\n{__doc__.split(chr(10) + chr(10))[0]}\n\n"
              f"MPIs: {', '.join(launch.Launcher.registry)} (default: openmpi)")
        return 0
    if argv[:1] == ["--abi"]:
        path = abi_wrapper(command)
        if not argv[1:]:
            raise CliError(f"nothing to compile: give the wrapper's arguments, e.g. wanmpi {command} --abi "
                           "-O2 -o app app.c")
        return subprocess.run([str(path), *argv[1:]]).returncode
    name, args = split(argv)
    if not args:
        raise CliError(f"nothing to compile: give the wrapper's arguments, e.g. wanmpi {command} --mpi {name} "
                       f"-O2 -o app app.{'c' if command == 'mpicc' else 'f90'}")
    return subprocess.run([str(wrapper(command, launch.launcher(name))), *args]).returncode
