"""Which SimGrid library a simulation runs on (`wanmpi sim --simgrid`).

"system": Debian's libsimgrid 3.32. "patched": the same release rebuilt by
`make simgrid` with lib/smpi/simgrid-activities.patch, in which ending a
detached message no longer walks a list of every detached message in flight
(83 % of the simulator's time at 256 ranks; the same simulated times, docs/scale.md
"The simulator's list of detached messages"). "auto" (the default): the
patched one once it is built, else Debian's.

Only the library differs: Debian's smpirun starts Debian's smpimain, which
needs libsimgrid.so.3.32 by its soname; preloaded, the patched one is that
library for smpimain and for every rank's copy of the program.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import paths
from ..bench.cases import BenchError

CHOICES = ("auto", "system", "patched")
SONAME = "libsimgrid.so.3.32"


def patched_path() -> Path | None:
    """Where `make simgrid` puts the patched library (None outside a checkout)."""
    return None if paths.REPO is None else paths.REPO / "build" / "simgrid" / SONAME


def choose(choice: str) -> Path | None:
    """The library to preload for `choice`, or None for Debian's."""
    if choice not in CHOICES:
        raise BenchError(f"--simgrid: {choice!r}: one of {', '.join(CHOICES)}")
    if choice == "system":
        return None
    lib = patched_path()
    if lib is not None and lib.is_file():
        return checked(lib)
    if choice == "patched":
        raise BenchError(f"--simgrid patched: {lib or 'build/simgrid/' + SONAME} is not built "
                         "(`make simgrid` builds it, about 6 minutes on 2 cores)")
    return None


def smpimain() -> Path:
    """The simulator's program that smpirun starts (its path is in the script)."""
    smpirun = shutil.which("smpirun")
    found = re.search(r'"(/[^"]*/smpimain)"', Path(smpirun).read_text()) if smpirun else None
    if not found:
        raise BenchError("smpirun not found, or it names no smpimain: install SimGrid (`make apt`)")
    return Path(found.group(1))


def loaded_by_smpimain(lib: Path | None) -> str:
    """The libsimgrid smpimain loads with `lib` preloaded (the dynamic
    loader's list, nothing run)."""
    env = {**os.environ, "LD_TRACE_LOADED_OBJECTS": "1", **({"LD_PRELOAD": str(lib)} if lib else {})}
    out = subprocess.run([str(smpimain())], env=env, capture_output=True, text=True, timeout=60).stdout
    found = re.search(rf"^\s*(?:{re.escape(SONAME)} => )?(\S*{re.escape(SONAME)})\s", out, re.M)
    return found.group(1) if found else ""


def checked(lib: Path) -> Path:
    """`lib`, once the dynamic loader is seen to give it to smpimain (a
    library it cannot preload it would skip with a warning, and Debian's
    would run)."""
    loaded = loaded_by_smpimain(lib)
    if not loaded or Path(loaded).resolve() != lib.resolve():
        raise BenchError(f"{lib}: smpimain would not run on it (the loader gives it {loaded or 'no libsimgrid'}); "
                         "`make simgrid` builds it again")
    return lib


def smpirun_wrapper(lib: Path | None) -> list[str]:
    """smpirun's options that run smpimain on `lib` (none for Debian's)."""
    if lib is None:
        return []
    if any(c.isspace() or c == ":" for c in str(lib)):
        raise BenchError(f"{lib}: the patched SimGrid library's path has a blank or a colon, "
                         "which LD_PRELOAD cannot carry; build the checkout elsewhere")
    return ["-wrapper", f"env LD_PRELOAD={lib}"]


def describe(lib: Path | None) -> str:
    """For the result document's settings: the library and the patches
    lib/smpi/build-simgrid.sh lists beside it."""
    if lib is None:
        return "Debian's libsimgrid 3.32"
    listed = lib.with_name(lib.name + ".patches")
    patches = listed.read_text().split() if listed.is_file() else []
    return f"{lib} (3.32 with {', '.join('lib/smpi/' + p for p in patches) or 'patches not listed'})"
