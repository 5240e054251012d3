"""libwanshim relaying on loopback (no namespaces, no testbed): connects to
another cluster go through a relay of this cluster chosen by destination host,
the application sees what a direct connect would show (result, errno,
SO_ERROR, getpeername), connections delivered by a relay report their
original source, and everything else is left alone.

The relay is FakeRelay below: near and far relay in one Python object (no
trunk, no multiplexing). It accepts the shim's connection on a relay address
of cluster a, reads the connect preamble, connects to the destination from an
address of cluster b (the far relay's), writes the delivery preamble, answers
the shim and copies bytes both ways, half-close included. Clusters are
loopback ranges: a = 127.0.0.0/24 (the programs run here, from 127.0.0.1),
b = 127.0.1.0/24. The C side is tests/programs/relaycheck.c."""
from __future__ import annotations

import ipaddress
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from test_shim import shimcheck
from wanmpi import paths
from wanmpi.job import libwanmpi

RELAYCHECK = paths.BUILD / "tests" / "relaycheck"
MAP = "a=127.0.0.0/24;b=127.0.1.0/24"
SOURCE = "127.0.0.1"                    # the programs bind(SOURCE:0) before connecting, as the MPIs do
RELAY_IPS = ("127.0.0.11", "127.0.0.12")    # cluster a's relays (inside addresses)
FAR_SOURCE = "127.0.1.200"              # cluster b's relay connects to destinations from here

M64 = (1 << 64) - 1


# ---- the wire format and the selection hash, from docs/wanproto.md -------------------------
def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & M64
    return h


def mix64(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def score(key: int, host: str) -> int:
    return mix64(fnv1a64(ipaddress.ip_address(host).packed) ^ mix64(key))


def select(nrelay: int, host: str) -> int:
    scores = [score(k, host) for k in range(nrelay)]
    return scores.index(max(scores))       # ties: the first


def encode(kind: int, dst: tuple[str, int], src: tuple[str, int]) -> bytes:
    out = bytearray(b"WSHP" + bytes([1, kind, 0, 0]))
    ends = [dst, src]
    out += bytes(4 if ipaddress.ip_address(ip).version == 4 else 6 for ip, _ in ends)
    out += struct.pack("!HH", dst[1], src[1]) + b"\0\0"
    for ip, _ in ends:
        out += ipaddress.ip_address(ip).packed.ljust(16, b"\0")
    return bytes(out)


def decode(data: bytes, kind: int | tuple) -> tuple[tuple[str, int], tuple[str, int]]:
    assert data[:5] == b"WSHP\x01" and data[5] in ((kind,) if isinstance(kind, int) else kind), data
    ends = []
    for i in range(2):
        family, port = data[8 + i], struct.unpack("!H", data[10 + 2 * i:12 + 2 * i])[0]
        raw = data[16 + 16 * i:32 + 16 * i]
        ends.append((str(ipaddress.ip_address(raw[:4] if family == 4 else raw)), port))
    return ends[0], ends[1]


def recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


# ---- the fake relay ------------------------------------------------------------------------
class FakeRelay:
    """`refuse`: reply with this reason code instead of connecting; `reply`:
    these bytes instead of any reply; `silent`: never reply; `reply_delay`:
    seconds between the far connect and the reply (a WAN round trip)."""

    def __init__(self, ips=RELAY_IPS[:1], refuse: int | None = None, reply: bytes | None = None,
                 silent: bool = False, reply_delay: float = 0.0):
        self.refuse, self.reply, self.silent, self.reply_delay = refuse, reply, silent, reply_delay
        self.seen: list[dict] = []
        self.stopping = threading.Event()
        self.listeners, self.acceptors = [], []
        for ip in ips:
            s = socket.create_server((ip, 0), backlog=64)
            self.listeners.append(s)
            t = threading.Thread(target=self._accept, args=(len(self.listeners) - 1, s), daemon=True)
            t.start()
            self.acceptors.append(t)
        self.endpoints = ",".join(f"{ip}:{port}" for ip, port in (s.getsockname() for s in self.listeners))


    def close(self) -> None:
        # shutdown() wakes an accept() blocked in another thread; close() alone
        # would leave it waiting on a descriptor number that the next relay's
        # listener may reuse, and that thread would serve the next test's
        # connections (seen: a relayed connect missing from `seen`)
        self.stopping.set()
        for s in self.listeners:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for t in self.acceptors:
            t.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self, index: int, listener: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(index, conn, peer), daemon=True).start()

    def _serve(self, index: int, conn: socket.socket, peer) -> None:
        with conn:
            try:
                head = recv_exactly(conn, 48)
                dst, src = decode(head, (1, 3, 4))
                # kinds 3 and 4: a blast request follows (rate u64, payload u16, 6 reserved bytes)
                blast = struct.unpack("!QH6x", recv_exactly(conn, 16)) if head[5] in (3, 4) else None
            except (ConnectionError, AssertionError, struct.error):
                return
            self.seen.append({"relay": index, "destination": dst, "source": src, "peer": peer, "blast": blast,
                              "kind": head[5]})
            if src[0] != peer[0]:
                conn.sendall(b"WR\x01\x05")          # SourceMismatch
                return
            if head[5] == 4:                        # an open connection's update: just the reply
                conn.sendall(b"WR\x01\x00")
                return
            if self.silent:
                self.stopping.wait(30)
                return
            if self.refuse is not None:
                conn.sendall(b"WR\x01" + bytes([self.refuse]))
                return
            if self.reply is not None:
                conn.sendall(self.reply)
                return
            out = socket.socket()
            out.bind((FAR_SOURCE, 0))
            try:
                out.connect(dst)
            except OSError:
                out.close()
                conn.sendall(b"WR\x01\x01")          # Refused
                return
            with out:
                out.sendall(encode(2, dst, src))
                time.sleep(self.reply_delay)
                conn.sendall(b"WR\x01\x00")
                copy = threading.Thread(target=self._copy, args=(out, conn), daemon=True)
                copy.start()
                self._copy(conn, out)
                copy.join()

    @staticmethod
    def _copy(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


# ---- running relaycheck ---------------------------------------------------------------------
def relaycheck(*args: str, relays: str | None = None, cluster: str = "a", env: dict | None = None,
               preload: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    assert RELAYCHECK.exists(), f"{RELAYCHECK} is not built: run `make programs`"
    assert libwanmpi.shim_library().exists(), "libwanshim.so is not built: run `make lib`"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WANMPI_") and k != "LD_PRELOAD"}
    # the programs accept what they connected: through the relay, from the far relay's address
    environment.update({"WANMPI_CLUSTER_MAP": MAP, "WANMPI_CLUSTER": cluster, "WANMPI_RELAY_SOURCES": FAR_SOURCE})
    if relays is not None:
        environment["WANMPI_RELAYS"] = relays
    if preload:
        environment["LD_PRELOAD"] = str(libwanmpi.shim_library())
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    done = subprocess.run([str(RELAYCHECK), *args], capture_output=True, text=True, timeout=timeout,
                          env=environment)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def lines(stdout: str) -> dict[str, str]:
    """'key tag rest' -> {'key tag': 'rest'} (the last one wins)."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split(" ", 2)
        out[" ".join(parts[:2])] = parts[2] if len(parts) > 2 else ""
    return out


def fields(stdout: str) -> dict[str, str]:
    """'key rest' -> {'key': 'rest'}: the output of `relaycheck connect`."""
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in stdout.splitlines() if " " in line}


# ---- the hash ------------------------------------------------------------------------------
def test_selection_hash_matches_the_documented_test_vectors():
    assert fnv1a64(b"") == 0xCBF29CE484222325 and fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert mix64(1) == 0x5692161D100B05E5
    assert score(0, "10.1.0.3") == 0xECB76CA96DB0982D and score(1, "10.1.0.3") == 0xC90E1B758E861514
    out = lines(relaycheck("vectors", preload=False).stdout)
    assert out['fnv1a64 ""'] == "cbf29ce484222325" and out['fnv1a64 "a"'] == "af63dc4c8601ec8c"
    assert out["mix64 1"] == "5692161d100b05e5"
    assert out["score 0"] == "10.1.0.3 ecb76ca96db0982d" and out["score 1"] == "10.1.0.3 c90e1b758e861514"
    assert out["select 2"] == "::ffff:10.1.0.3 0"       # and IPv4-mapped counts as IPv4
    # the documented connect preamble: 10.1.0.3:40000 from 10.0.0.2:1024
    doc = bytes.fromhex("57 53 48 50 01 01 00 00 04 04 9c 40 04 00 00 00"
                        "0a 01 00 03 00 00 00 00 00 00 00 00 00 00 00 00"
                        "0a 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00")
    assert out["preamble " + doc.hex()] == "" and encode(1, ("10.1.0.3", 40000), ("10.0.0.2", 1024)) == doc
    assert out["decoded 10.1.0.3:40000"] == "10.0.0.2:1024"
    assert out["decode-wrong-kind -1"] == "wrong kind" and out["decode-padding -1"] == "non-zero IPv4 padding"


def test_blast_preamble_matches_the_documented_vector():
    out = lines(relaycheck("vectors", preload=False).stdout)
    # docs/wanproto.md: kind 3, 10.1.0.3:40000 from 10.0.0.2:1024, 25 MB/s, 1452-byte datagrams
    doc = bytes.fromhex("57 53 48 50 01 03 00 00 04 04 9c 40 04 00 00 00"
                        "0a 01 00 03 00 00 00 00 00 00 00 00 00 00 00 00"
                        "0a 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00"
                        "00 00 00 00 01 7d 78 40 05 ac 00 00 00 00 00 00")
    assert out["blast-preamble " + doc.hex()] == ""
    assert out["blast-extension-bad -1"] == "-1 -1"      # rate 0, payload 63, payload 65508


def test_blast_request_sends_kind_3_to_that_host_only():
    with FakeRelay() as relay:
        done = relaycheck("blast", "127.0.1.5", "25000000", "1452",
                          "pair", SOURCE, "127.0.1.5,127.0.1.6", "nonblocking", "addr", "100000",
                          relays=relay.endpoints)
        seen = {r["destination"][0]: r["blast"] for r in relay.seen}
    assert "blast-request 0" in done.stdout                 # no connection to it was open yet
    assert done.stdout.count(" ok 100000") == 2             # the bytes pass as on any relayed connection
    assert seen == {"127.0.1.5": (25000000, 1452), "127.0.1.6": None}


def test_blast_request_replaced_and_withdrawn():
    with FakeRelay() as relay:
        relaycheck("blast", "127.0.1.5", "25000000", "1452", "blast", "127.0.1.5", "1000000", "9000",
                   "pair", SOURCE, "127.0.1.5", "blocking", "addr", "10", relays=relay.endpoints)
        relaycheck("blast", "127.0.1.5", "25000000", "1452", "blast", "127.0.1.5", "0", "0",
                   "pair", SOURCE, "127.0.1.5", "blocking", "addr", "10", relays=relay.endpoints)
        blasts = [r["blast"] for r in relay.seen]
    assert blasts == [(1000000, 9000), None]


def test_blast_request_switches_an_open_connection_through_its_relay():
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, "127.0.1.5", "blocking", "addr", "100000", relays=relay.endpoints,
                          env={"RELAYCHECK_BLAST_OPEN": "25000000 1452"})
        connect, update = relay.seen
        relay_ip, relay_port = relay.endpoints.split(":")
    assert "blast-request 0" in done.stdout and " ok 100000" in done.stdout     # switched, bytes intact
    assert connect["kind"] == 1 and connect["blast"] is None
    # kind 4 from the node's address, naming the open connection by its two ends
    assert update["kind"] == 4 and update["blast"] == (25000000, 1452)
    assert update["destination"] == (relay_ip, int(relay_port)) and update["source"] == connect["source"]
    assert update["peer"][0] == SOURCE


@pytest.mark.parametrize("args, relaying, expected", [
    (("127.0.1.5", "1000", "63"), True, "blast-request -1 EINVAL"),
    (("127.0.1.5", "1000", "65508"), True, "blast-request -1 EINVAL"),
    (("127.0.1.5", "1000", "1452"), False, "blast-request -1 EOPNOTSUPP"),
])
def test_bad_blast_requests_are_refused(args, relaying, expected):
    with FakeRelay() as relay:
        done = relaycheck("blast", *args, "pair", SOURCE, "127.0.1.5", "blocking", "addr", "10",
                          relays=relay.endpoints if relaying else None)
        assert [r["blast"] for r in relay.seen] == ([None] if relaying else [])
    assert expected in done.stdout


def test_reply_reasons_map_to_the_documented_errno():
    out = lines(relaycheck("vectors", preload=False).stdout)
    expected = {0: "0", 1: "ECONNREFUSED", 2: "EHOSTUNREACH", 3: "ETIMEDOUT", 4: "ECONNREFUSED", 5: "EACCES",
                6: "ENETUNREACH", 7: "ECONNRESET", 8: "EAGAIN", 9: "ECONNREFUSED", 10: "EPROTO", 11: "EPROTO",
                12: "ECONNABORTED", 13: "EIO", 14: "ENOENT", 15: "EIO"}
    assert {int(k.split()[1]): v for k, v in out.items() if k.startswith("reply ")} == expected


def test_relay_index_is_chosen_by_destination_host_like_wanproto():
    hosts = [f"10.{i % 7}.{i // 3}.{i}" for i in range(1, 60)] + ["127.0.1.3", "198.18.1.2"]
    for n in (1, 2, 3, 8):
        out = relaycheck("select", str(n), *hosts, preload=False).stdout.split("\n")
        assert [int(line.split()[2]) for line in out if line] == [select(n, h) for h in hosts]


def test_relay_by_address_spreads_consecutive_hosts_round_robin():
    hosts = [f"127.0.1.{i}" for i in range(1, 9)] + ["10.0.0.255", "10.0.1.0"]
    for n in (1, 2, 3, 4):
        out = relaycheck("select-address", str(n), *hosts, preload=False).stdout.split("\n")
        expected = [int(ipaddress.IPv4Address(h)) % n for h in hosts]
        assert [int(line.split()[2]) for line in out if line] == expected
    with FakeRelay(RELAY_IPS) as relay:
        out = relaycheck("pair", SOURCE, ",".join(hosts[:8]), "nonblocking", "addr", "1000", relays=relay.endpoints)
        used = {r["destination"][0]: r["relay"] for r in relay.seen}
    assert used == {h: int(h.rsplit(".", 1)[1]) % 2 for h in hosts[:8]}
    assert out.stdout.count(" ok 1000") == 8


def test_bad_relay_select_is_reported():
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, "127.0.1.3", "blocking", "addr", "10", relays=relay.endpoints,
                          env={"WANMPI_RELAY_SELECT": "random"})
        assert relay.seen == []
    assert "WANMPI_RELAY_SELECT=random: expected 'address' or 'hash'; relaying is off" in done.stderr


def test_connects_use_the_relay_the_hash_picks():
    hosts = [f"127.0.1.{i}" for i in range(1, 11)]
    assert len({select(2, h) for h in hosts}) == 2          # both relays get some
    with FakeRelay(RELAY_IPS) as relay:
        out = relaycheck("pair", SOURCE, ",".join(hosts), "nonblocking", "addr", "1000", relays=relay.endpoints,
                         env={"WANMPI_RELAY_SELECT": "hash"})
        used = {r["destination"][0]: r["relay"] for r in relay.seen}
    assert used == {h: select(2, h) for h in hosts}
    assert out.stdout.count(" ok 1000") == len(hosts)


# ---- connect --------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["addr", "null", "accept4"])
@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_connect_to_another_cluster_looks_direct_through_the_relay(mode, how):
    dest = "127.0.1.3"
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, dest, mode, how, relays=relay.endpoints)
        seen = list(relay.seen)
    out = lines(done.stdout)
    local, peer = out[f"local {dest}"], out[f"peer {dest}"]
    if mode == "blocking":
        assert out[f"connect {dest}"].startswith("0 0 ")
    else:       # as a direct non-blocking connect: in progress, then writable, then SO_ERROR 0
        assert out[f"connect {dest}"].startswith("-1 EINPROGRESS ")
        assert "OUT" in out[f"poll {dest}"] and out[f"so_error {dest}"] == "0"
    # getpeername shows the destination asked for, not the relay
    assert peer.startswith(dest + ":") and local.startswith(SOURCE + ":")
    # the relay got the destination and the socket's own (bound) address
    assert len(seen) == 1 and seen[0]["source"] == (SOURCE, int(local.split(":")[1]))
    assert f"{seen[0]['destination'][0]}:{seen[0]['destination'][1]}" == peer
    # the accepting side sees the original source, from accept() and from getpeername()
    assert out[f"accepted {dest}"] == ("-" if how == "null" else local)
    assert out[f"accepted-peer {dest}"] == local
    assert out[f"data {dest}"] == f"ok {1 << 20}"          # both ways, half-close, byte-exact
    assert done.stderr == ""


def test_debug_log_shows_the_relayed_and_delivered_sockets():
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, "127.0.1.3", "nonblocking", "addr", "100", relays=relay.endpoints,
                          env={"WANMPI_SHIM_DEBUG": "1"})
    assert "to 127.0.1.3:" in done.stderr and f"relayed through relay 0 ({relay.endpoints})" in done.stderr
    assert f"from {FAR_SOURCE}:" in done.stderr and "delivered from 127.0.0.1:" in done.stderr
    assert "WAN socket" in done.stderr          # and paced as a socket to cluster b


def test_same_cluster_and_unmapped_connects_are_untouched():
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, "127.0.0.3,127.0.9.1", "nonblocking", "addr", "1000",
                          relays=relay.endpoints)
        assert relay.seen == []
    out = lines(done.stdout)
    for dest in ("127.0.0.3", "127.0.9.1"):
        assert out[f"accepted {dest}"] == out[f"local {dest}"] and out[f"peer {dest}"].startswith(dest + ":")
        assert out[f"data {dest}"] == "ok 1000"


REFUSALS = [(1, "ECONNREFUSED"), (2, "EHOSTUNREACH"), (3, "ETIMEDOUT"), (4, "ECONNREFUSED"), (5, "EACCES"),
            (6, "ENETUNREACH"), (8, "EAGAIN"), (10, "EPROTO"), (12, "ECONNABORTED"), (99, "EIO")]


@pytest.mark.parametrize("reason, errno_name", REFUSALS)
@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_refusal_gives_the_errno_of_its_reason(mode, reason, errno_name):
    with FakeRelay(refuse=reason) as relay:
        out = fields(relaycheck("connect", SOURCE, "127.0.1.5", "4000", mode, relays=relay.endpoints).stdout)
    assert_failed(out, mode, errno_name)


def assert_failed(out: dict, mode: str, errno_name: str) -> None:
    if mode == "blocking":
        assert out["connect"].startswith(f"-1 {errno_name} ")
    else:       # the error comes where a direct connect's would: SO_ERROR, once
        assert out["connect"].startswith("-1 EINPROGRESS ")
        assert "OUT" in out["poll"] or "ERR" in out["poll"]
        assert out["so_error"] == errno_name and out["so_error-again"] == "0"
    assert out["peer"] == "- -1 ENOTCONN"               # not connected, as after a failed connect


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_destination_that_refuses_is_econnrefused(mode):
    port = closed_port("127.0.1.4")
    with FakeRelay() as relay:
        out = fields(relaycheck("connect", SOURCE, "127.0.1.4", str(port), mode, relays=relay.endpoints).stdout)
    assert_failed(out, mode, "ECONNREFUSED")


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_relay_down_fails_the_connect_with_a_clear_error(mode):
    down = f"127.0.0.11:{closed_port('127.0.0.11')}"
    done = relaycheck("connect", SOURCE, "127.0.1.5", "4000", mode, relays=down)
    out = fields(done.stdout)
    if "EINPROGRESS" in out["connect"]:
        assert out["so_error"] == "ECONNREFUSED"
    else:
        assert out["connect"].startswith("-1 ECONNREFUSED ")
    # said once, without being asked, naming the relay (the MPI will only name the destination)
    assert done.stderr.count(f"relay 0 ({down}) failed while") == 1, done.stderr
    assert "for 127.0.1.5:4000" in done.stderr and "Connection refused" in done.stderr


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_silent_relay_times_out(mode):
    with FakeRelay(silent=True) as relay:
        done = relaycheck("connect", SOURCE, "127.0.1.5", "4000", mode, relays=relay.endpoints,
                          env={"WANMPI_RELAY_TIMEOUT": "0.3"})
    out = fields(done.stdout)
    assert_failed(out, mode, "ETIMEDOUT")
    assert 250 <= float(out["connect"].split()[2]) < 2000
    assert "waiting for the reply" in done.stderr and "WANMPI_RELAY_TIMEOUT" in done.stderr


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_malformed_reply_is_eproto(mode):
    with FakeRelay(reply=b"HTTP") as relay:
        done = relaycheck("connect", SOURCE, "127.0.1.5", "4000", mode, relays=relay.endpoints)
    assert_failed(fields(done.stdout), mode, "EPROTO")
    assert "malformed reply" in done.stderr


def test_failing_calls_keep_their_result_and_errno_with_relays():
    """shimcheck's clusters: a = 127.0.0.1, b = 127.0.0.2, c = 127.0.0.3; its
    connects to b and c now go through the relay and must look the same."""
    with FakeRelay(ips=["127.0.0.21"]) as relay:
        alone = shimcheck("errors", preload=False)
        relayed = shimcheck("errors", env={"WANMPI_RELAYS": relay.endpoints, "WANMPI_SHIM_DEBUG": "1"})
        assert {r["destination"][0] for r in relay.seen} == {"127.0.0.2", "127.0.0.3"}, relayed.stderr
    assert relayed.stdout == alone.stdout
    assert "call connect-refused-other-cluster -1 ECONNREFUSED" in relayed.stdout
    assert "call connect-ok-keeps-errno 0 EDOM" in relayed.stdout and "call connect-again -1 EISCONN" in relayed.stdout


# ---- accept ---------------------------------------------------------------------------------
def deliver(payload: bytes, source: str = FAR_SOURCE, port: int = 0, pieces: int = 1, pause: float = 0.0,
            close_early: bool = False) -> None:
    with socket.socket() as s:
        s.bind((source, 0))
        s.connect(("127.0.1.3", port))
        step = max(1, len(payload) // pieces)
        for i in range(0, len(payload), step):
            s.sendall(payload[i:i + step])
            time.sleep(pause)
        if close_early:
            return
        time.sleep(0.5)         # the reader takes its first line before we close


GOOD = encode(2, ("127.0.1.3", 1), ("127.0.0.1", 4242))


@pytest.mark.parametrize("how", ["addr", "null", "accept4"])
@pytest.mark.parametrize("listener", ["blocking", "nonblocking"])
@pytest.mark.parametrize("setting", ["relays", "sources"])
def test_accept_reports_the_original_source_and_drops_malformed_preambles(listener, how, setting):
    """Order: garbage (dropped), a truncated preamble (dropped), a good one
    sent in pieces (repaired), a connection from a non-relay address (untouched)."""
    if setting == "relays":         # a relay of this cluster (b); only its address matters here
        env = {}
        relays = f"{FAR_SOURCE}:7000"
    else:
        env = {"WANMPI_RELAY_SOURCES": f"127.0.1.250, {FAR_SOURCE}"}
        relays = None
    env["WANMPI_SHIM_DEBUG"] = "1"
    proc = subprocess.Popen([str(RELAYCHECK), "accept", "127.0.1.3", "0", "2", listener, how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=relaycheck_env(relays, "b", env))
    try:
        port = int(proc.stdout.readline().split()[1])
        deliver(b"GET / HTTP/1.0\r\n\r\n", port=port, close_early=True)
        deliver(GOOD[:20], port=port, close_early=True)
        deliver(GOOD + b"hello\n", port=port, pieces=5, pause=0.05)
        deliver(b"plain\n", source="127.0.1.7", port=port)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stdout + stderr
    accepted = [line for line in stdout.splitlines() if line.startswith(("accepted", "line "))]
    first = "-" if how == "null" else "127.0.0.1:4242"
    assert accepted[0] == f"accepted - {first}" and accepted[1] == "accepted-peer - 127.0.0.1:4242"
    assert accepted[2] == "line hello"
    assert accepted[3].startswith("accepted - " + ("-" if how == "null" else "127.0.1.7:"))
    assert accepted[4].startswith("accepted-peer - 127.0.1.7:") and accepted[5] == "line plain"
    assert "done 2" in stdout
    dropped = [line for line in stdout.splitlines() if line.startswith("accept - -1")]
    # a blocking listener waits for the next connection; a non-blocking one says EAGAIN
    assert dropped == ([] if listener == "blocking" else ["accept - -1 EAGAIN"] * len(dropped))
    assert "dropped: bad magic" in stderr and "dropped: closed before the end of the delivery preamble" in stderr


def relaycheck_env(relays: str | None, cluster: str, extra: dict) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WANMPI_") and k != "LD_PRELOAD"}
    environment.update({"WANMPI_CLUSTER_MAP": MAP, "WANMPI_CLUSTER": cluster,
                        "LD_PRELOAD": str(libwanmpi.shim_library()), **extra})
    if relays:
        environment["WANMPI_RELAYS"] = relays
    return environment


def test_relay_that_never_sends_its_preamble_is_dropped_after_2_s():
    proc = subprocess.Popen([str(RELAYCHECK), "accept", "127.0.1.3", "0", "1", "nonblocking", "addr"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=relaycheck_env(f"{FAR_SOURCE}:7000", "b", {"WANMPI_SHIM_DEBUG": "1"}))
    try:
        port = int(proc.stdout.readline().split()[1])
        with socket.socket() as silent:
            silent.bind((FAR_SOURCE, 0))
            silent.connect(("127.0.1.3", port))
            start = time.monotonic()
            deliver(GOOD + b"after\n", port=port)
            stdout, stderr = proc.communicate(timeout=30)
            took = time.monotonic() - start
    finally:
        proc.kill()
    assert "accept - -1 EAGAIN" in stdout and "line after" in stdout, stdout
    assert "no delivery preamble within 2 s" in stderr and 1.8 < took < 10


# ---- settings -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, value, message", [
    ("WANMPI_RELAYS", "relay-a:7000", "WANMPI_RELAYS=relay-a:7000: 'relay-a:7000' is not IP:PORT"),
    ("WANMPI_RELAYS", "127.0.0.11", "'127.0.0.11' is not IP:PORT"),
    ("WANMPI_RELAYS", "127.0.0.11:0", "'127.0.0.11:0' is not IP:PORT"),
    ("WANMPI_RELAYS", "127.0.0.11:70000", "'127.0.0.11:70000' is not IP:PORT"),
    ("WANMPI_RELAYS", "127.0.0.11:7000,,127.0.0.12:7000", "'' is not IP:PORT"),
    ("WANMPI_RELAYS", "0.0.0.0:7000", "'0.0.0.0:7000' is not IP:PORT"),
    ("WANMPI_RELAY_SOURCES", "127.0.1.300", "WANMPI_RELAY_SOURCES=127.0.1.300: '127.0.1.300' is not an IP address"),
    ("WANMPI_RELAY_TIMEOUT", "soon", "WANMPI_RELAY_TIMEOUT=soon: expected seconds"),
    ("WANMPI_RELAY_TIMEOUT", "0", "WANMPI_RELAY_TIMEOUT=0: expected seconds"),
])
def test_bad_relay_setting_is_reported_and_relaying_is_off(name, value, message):
    with FakeRelay() as relay:
        env = {name: value}
        relays = value if name == "WANMPI_RELAYS" else relay.endpoints
        done = relaycheck("pair", SOURCE, "127.0.1.3", "nonblocking", "addr", "1000", relays=relays, env=env)
        assert relay.seen == []             # direct: loopback reaches cluster b without a relay
    assert message in done.stderr
    assert done.stderr.count("relaying is off in this process") == 1, done.stderr
    assert lines(done.stdout)["data 127.0.1.3"] == "ok 1000"


def test_per_cluster_relay_list_picks_this_clusters_relays():
    """One WANMPI_RELAYS for every process of a job: each takes its own cluster's entry."""
    with FakeRelay() as relay:
        every = f"b=127.0.1.250:7000; a={relay.endpoints};c=127.0.2.250:7000"
        out = relaycheck("pair", SOURCE, "127.0.1.3", "nonblocking", "addr", "1000", relays=every)
        assert [r["destination"][0] for r in relay.seen] == ["127.0.1.3"]
    assert lines(out.stdout)["data 127.0.1.3"] == "ok 1000" and "relaying is off" not in out.stderr


def test_per_cluster_relay_list_without_this_cluster_relays_nothing():
    with FakeRelay() as relay:
        out = relaycheck("pair", SOURCE, "127.0.1.3", "nonblocking", "addr", "10",
                         relays=f"b={relay.endpoints}", env={"WANMPI_SHIM_DEBUG": "1"})
        assert relay.seen == []
    assert "names no relays of this process's cluster 'a'" in out.stderr
    assert lines(out.stdout)["data 127.0.1.3"] == "ok 10"


@pytest.mark.parametrize("value", ["a=127.0.0.11:7000;127.0.0.12:7000", "=127.0.0.11:7000",
                                   "a=127.0.0.11:7000;a=127.0.0.12:7000", "a=127.0.0.11:7000,bad"])
def test_malformed_per_cluster_relay_list_turns_relaying_off(value):
    with FakeRelay() as relay:
        out = relaycheck("pair", SOURCE, "127.0.1.3", "blocking", "addr", "10", relays=value)
        assert relay.seen == []
    assert out.stderr.count("relaying is off in this process") == 1, out.stderr
    assert lines(out.stdout)["data 127.0.1.3"] == "ok 10"


def test_relays_without_a_cluster_map_are_reported():
    done = relaycheck("pair", SOURCE, "127.0.1.3", "blocking", "addr", "10", relays="127.0.0.11:7000",
                      env={"WANMPI_CLUSTER_MAP": None})
    assert "WANMPI_RELAYS is set but WANMPI_CLUSTER_MAP is not: nothing is relayed" in done.stderr


def test_ipv6_relay_addresses_are_read_and_an_ipv4_socket_cannot_use_one():
    assert select(2, "127.0.1.3") == 1 and select(2, "127.0.1.6") == 0
    with FakeRelay() as relay:
        done = relaycheck("pair", SOURCE, "127.0.1.3,127.0.1.6", "blocking", "addr", "10",
                          relays=f"[::1]:7000,{relay.endpoints}", env={"WANMPI_SHIM_DEBUG": "1"})
    assert "relaying through 2 relays" in done.stderr and "relaying is off" not in done.stderr
    out = lines(done.stdout)
    assert out["data 127.0.1.3"] == "ok 10"
    assert out["connect 127.0.1.6"].startswith("-1 EAFNOSUPPORT")
    assert "relay 0 ([::1]:7000) is IPv6 and the socket IPv4" in done.stderr
