"""Fetch MPICH 4.0.2's test sources: Debian 12's source package mpich
4.0.2-3, downloaded by apt-get from the Debian mirror the machine's own apt
configuration names, with a sources list and package lists of its own in the
work directory (the machine's apt configuration and lists stay as they were).
apt checks the .dsc and the tarball against the signed Sources index; we
check the tarball again against the .dsc and against the SHA-256 pinned in
suite.py, then unpack test/mpi alone.

    python3 bench/mpich_coll/fetch.py [--workdir DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import suite

APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEBIAN_SUITE = "bookworm"
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


class FetchError(Exception):
    pass


def debian_mirror() -> tuple[str, str]:
    """(URI, keyring) of the first Debian archive (a URI ending in /debian) in
    the machine's apt sources, deb822 or one-line format."""
    files = [APT_SOURCES[0]] + sorted(APT_SOURCES[1].glob("*.list")) + sorted(APT_SOURCES[1].glob("*.sources"))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            for uri in fields.get("URIs", "").split():
                if uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/"), fields.get("Signed-By", DEFAULT_KEYRING)
        for m in re.finditer(r"^deb(?:-src)?\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M):
            if m.group(1).rstrip("/").endswith("/debian"):
                return m.group(1).rstrip("/"), DEFAULT_KEYRING
    raise FetchError(f"no Debian archive (a URI ending in /debian) in {APT_SOURCES[0]} or {APT_SOURCES[1]}/")


def apt_options(state: Path, uri: str, keyring: str) -> list[str]:
    """apt-get options that point its sources and lists into `state`."""
    (state / "lists" / "partial").mkdir(parents=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True)
    (state / "sources.list.d").mkdir()
    (state / "sources.list").write_text(f"deb-src [signed-by={keyring}] {uri} {DEBIAN_SUITE} main\n")
    return ["-o", f"Dir::Etc::SourceList={state / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={state / 'sources.list.d'}",
            "-o", f"Dir::State::Lists={state / 'lists'}",
            "-o", f"Dir::Cache={state / 'cache'}",
            "-o", "APT::Sandbox::User=root"]


def download(into: Path) -> None:
    """The .dsc and tarballs of mpich DEBIAN_VERSION into `into`."""
    uri, keyring = debian_mirror()
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="apt-", dir=into) as state:
        options = apt_options(Path(state), uri, keyring)
        for args in (["update"], ["source", "--download-only", f"mpich={suite.DEBIAN_VERSION}"]):
            print("apt-get", " ".join(args), flush=True)
            done = subprocess.run(["apt-get", "-q", *options, *args], cwd=into, capture_output=True, text=True)
            if done.returncode != 0:
                raise FetchError(f"apt-get {' '.join(args)} failed (status {done.returncode}):\n"
                                 f"{done.stdout}{done.stderr}")


def dsc_sha256(dsc: Path, name: str) -> str:
    """The SHA-256 the .dsc gives for file `name`."""
    m = re.search(r"^Checksums-Sha256:\n((?: .*\n)+)", dsc.read_text(), re.M)
    for line in (m.group(1).splitlines() if m else []):
        digest, _size, file = line.split()
        if file == name:
            return digest
    raise FetchError(f"{dsc}: no Checksums-Sha256 line for {name}")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(downloads: Path) -> Path:
    """The tarball, once its SHA-256 matches the .dsc and the pinned value."""
    dsc = downloads / f"mpich_{suite.DEBIAN_VERSION}.dsc"
    tarball = downloads / suite.ORIG_TARBALL
    actual = file_sha256(tarball)
    if actual != dsc_sha256(dsc, suite.ORIG_TARBALL):
        raise FetchError(f"{tarball}: SHA-256 {actual} differs from the one in {dsc}")
    if actual != suite.ORIG_SHA256:
        raise FetchError(f"{tarball}: SHA-256 {actual}, expected {suite.ORIG_SHA256} (suite.ORIG_SHA256)")
    return tarball


def unpack_tests(tarball: Path, into: Path) -> None:
    """test/mpi of the tarball (MPICH's own tree is not needed)."""
    prefix = suite.TEST_TREE + "/"
    with tarfile.open(tarball) as tar:
        members = [m for m in tar if m.name.startswith(prefix)]
        if hasattr(tarfile, "data_filter"):     # Python 3.11.4 on; Debian 12 has 3.11.2
            tar.extractall(into, members=members, filter="data")
        else:
            tar.extractall(into, members=[m for m in members if m.isfile() or m.isdir()])


def fetch(workdir: suite.Workdir) -> None:
    downloads = workdir.downloads
    tarball = downloads / suite.ORIG_TARBALL
    if not (tarball.exists() and file_sha256(tarball) == suite.ORIG_SHA256):
        download(downloads)
    verify(downloads)
    print(f"{tarball}: SHA-256 matches the .dsc and {suite.ORIG_SHA256[:16]}...")
    if not (workdir.coll / "testlist.in").exists():
        if workdir.tests.exists():
            shutil.rmtree(workdir.tests)      # a half-unpacked tree
        unpack_tests(tarball, downloads)
    print(f"test sources: {workdir.tests}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    suite.add_workdir_option(parser)
    args = parser.parse_args()
    try:
        fetch(suite.Workdir(args.workdir))
    except FetchError as e:
        print(f"fetch: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
