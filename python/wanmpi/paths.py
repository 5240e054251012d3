"""Where wanmpi finds its own files and keeps its state. One home for paths."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TOPOLOGY = REPO / "examples" / "two-clusters.toml"
VENV = REPO / ".venv"
BUILD = REPO / "build"

# Testbed state (lives as long as the namespaces do: /run is a tmpfs).
STATE_DIR = Path(os.environ.get("WANMPI_STATE_DIR", "/run/wanmpi"))
STATE_FILE = STATE_DIR / "testbed.json"
HOSTS_FILE = STATE_DIR / "hosts"

NS_EXEC_AGENT = Path(__file__).resolve().parent / "testbed" / "ns-exec"

# The remote shell MPI launchers use on real clusters: an ssh program (a path
# or a name on PATH; a wrapper script if it needs options beyond ~/.ssh/config).
REMOTE_SHELL = os.environ.get("WANMPI_SSH", "ssh")

# The WAN emulator binary (cargo workspace at the repository root).
WANEM = Path(os.environ.get("WANMPI_WANEM", REPO / "target" / "release" / "wanem"))
# The relay daemon, run on the testbed's relay nodes for a job (same workspace).
WANRELAY = Path(os.environ.get("WANMPI_WANRELAY", REPO / "target" / "release" / "wanrelay"))
# The UDP loss and capacity probe used by `wanmpi bench emulator` (same workspace).
UDPPROBE = REPO / "target" / "release" / "udpprobe"

# MPI installations: Open MPI from Debian, MPICH 5 from PyPI in the project venv.
# On real clusters, point these at the installations the nodes share.
OPENMPI_BIN = Path(os.environ.get("WANMPI_OPENMPI_BIN", "/usr/bin"))
MPICH_BIN = Path(os.environ.get("WANMPI_MPICH_BIN", VENV / "bin"))

# libwanmpi, one build per MPI (`make lib`): libwanmpi-openmpi.so, libwanmpi-mpich.so.
# On real clusters the nodes must see it at the same path (a shared file system).
LIBWANMPI_DIR = Path(os.environ.get("WANMPI_LIB_DIR", BUILD / "lib"))
