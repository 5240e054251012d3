"""Build MPICH 4.0.2's collective tests for one MPI, with `wanmpi mpicc --mpi
MPI` (the compiler wrapper of the MPI `wanmpi run --mpi MPI` launches), one
file at a time (this machine has two cores). MPICH's configure is not run:
include/ beside this file holds the two config headers it would write
(dtpoolsconf.h is copied where configure puts it).

    python3 bench/mpich_coll/build.py --mpi openmpi|mpich [--only REGEX] [--workdir DIR]

Programs go to WORKDIR/build/MPI/, compiler output to WORKDIR/build/MPI/log/.
A program that does not build is reported and left out of the runs: with
Open MPI 4.1, those that call MPI-4 functions (persistent collectives
MPI_*_init, large counts MPI_*_c).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import suite

CFLAGS = ["-O2", "-w"]     # -w: the suite's own warnings are not ours to read
MTEST = ("util/mtest.c", "util/mtest_common.c", "util/mtest_single.c", "util/dtypes.c")
DTPOOLS = ("dtpools/src/dtpools.c", "dtpools/src/dtpools_attr.c", "dtpools/src/dtpools_custom.c",
           "dtpools/src/dtpools_desc.c", "dtpools/src/dtpools_init_verify.c", "dtpools/src/dtpools_misc.c")
# Open MPI 4.1's mpi.h turns the MPI-1 names removed in MPI-3.0 into a
# compile error; the MPI-2 names take the same C arguments in every MPI.
REMOVED_NAMES = {"MPI_Type_hvector": "MPI_Type_create_hvector",
                 "MPI_Type_hindexed": "MPI_Type_create_hindexed"}


class Compiler:
    """`wanmpi mpicc --mpi MPI` with the suite's include directories."""

    def __init__(self, workdir: suite.Workdir, mpi: str):
        self.mpi = mpi
        self.logs = workdir.programs(mpi) / "log"
        self.logs.mkdir(parents=True, exist_ok=True)
        t = workdir.tests
        self.flags = CFLAGS + [f"-I{suite.HERE / 'include'}", f"-I{t / 'include'}",
                               f"-I{t / 'dtpools' / 'include'}", f"-I{t / 'dtpools'}"]
        self.wanmpi = suite.wanmpi_command()

    def __call__(self, log_name: str, args: list[str]) -> bool:
        """Compile; the compiler's output goes to log/LOG_NAME.log."""
        command = [self.wanmpi, "mpicc", "--mpi", self.mpi, *self.flags, *args]
        done = subprocess.run(command, capture_output=True, text=True)
        (self.logs / f"{log_name}.log").write_text(" ".join(command) + "\n" + done.stdout + done.stderr)
        return done.returncode == 0

    def first_error(self, log_name: str) -> str:
        lines = (self.logs / f"{log_name}.log").read_text().splitlines()
        errors = [line for line in lines if "error" in line or "undefined reference" in line]
        return (errors or lines[-1:] or ["?"])[0].strip()


def without_removed_names(source: Path, into: Path) -> Path:
    """A copy of `source` that calls the MPI-2 names (REMOVED_NAMES)."""
    text, total = source.read_text(), 0
    for old, new in REMOVED_NAMES.items():
        text, n = re.subn(rf"\b{old}\(", f"{new}(", text)
        total += n
    if total == 0:
        raise SystemExit(f"{source}: none of {', '.join(REMOVED_NAMES)} found: the source is not 4.0.2's")
    into.mkdir(parents=True, exist_ok=True)
    (into / source.name).write_text(text)
    return into / source.name


def build_libraries(workdir: suite.Workdir, cc: Compiler) -> None:
    """libmtest.a and libdtpools.a, MPICH's test harness."""
    out = workdir.programs(cc.mpi)
    # dtpools_internal.h includes "../dtpoolsconf.h": where configure writes it
    shutil.copy(suite.HERE / "include" / "dtpoolsconf.h", workdir.tests / "dtpools")
    objects = out / "obj"
    objects.mkdir(exist_ok=True)
    for library, sources in (("libmtest.a", MTEST), ("libdtpools.a", DTPOOLS)):
        built = []
        for relative in sources:
            source = workdir.tests / relative
            if source.name == "dtpools_custom.c":
                source = without_removed_names(source, out / "patched")
            target = objects / f"{source.stem}.o"
            if not cc(source.stem, ["-c", str(source), "-o", str(target)]):
                raise SystemExit(f"{source}: the test harness does not build with {cc.mpi}: "
                                 f"{cc.first_error(source.stem)} (log: {cc.logs / source.stem}.log)")
            built.append(str(target))
        (out / library).unlink(missing_ok=True)
        subprocess.run(["ar", "rcs", str(out / library), *built], check=True)


def build_programs(workdir: suite.Workdir, cc: Compiler, only: str) -> list[suite.Program]:
    """Every program matching `only`; the ones that failed."""
    out = workdir.programs(cc.mpi)
    libraries = [str(out / "libmtest.a"), str(out / "libdtpools.a"), "-lm"]
    failed = []
    for program in suite.programs(workdir):
        if only and not re.search(only, program.name):
            continue
        target = out / program.name
        target.unlink(missing_ok=True)
        ok = cc(program.name, [*program.cppflags, str(workdir.coll / program.source), "-o", str(target), *libraries])
        print(f"{program.name}: {'built' if ok else 'FAILED: ' + cc.first_error(program.name)}", flush=True)
        if not ok:
            failed.append(program)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", choices=suite.MPIS, required=True)
    parser.add_argument("--only", metavar="REGEX", default="", help="only the programs whose name matches")
    suite.add_workdir_option(parser)
    args = parser.parse_args()
    workdir = suite.Workdir(args.workdir)
    if not (workdir.coll / "Makefile.am").exists():
        print(f"build: no test sources in {workdir.tests}: run fetch.py first", file=sys.stderr)
        return 1
    cc = Compiler(workdir, args.mpi)
    build_libraries(workdir, cc)
    failed = build_programs(workdir, cc, args.only)
    print(f"{args.mpi}: {len(failed)} program(s) did not build"
          + (f": {' '.join(p.name for p in failed)}" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
