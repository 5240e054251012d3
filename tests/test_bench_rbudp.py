"""`wanmpi bench rbudp`: RBUDP through a relay pair beside TCP cubic and bbr.
The loopback tests check the pieces (the connect preamble, the relays'
generated configuration); the testbed test runs a short benchmark with loss
and checks that RBUDP delivered every byte by UDP with resends."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, bring_up, wanmpi
from wanmpi import topo
from wanmpi.bench import rbudp as bench_rbudp
from wanmpi.testbed import net, transfer


def test_connect_preamble_is_the_documented_bytes():
    # docs/wanproto.md: connect() to 10.1.0.3:40000 from 10.0.0.2:1024.
    expected = bytes.fromhex("57534850 01010000 04049c40 04000000 0a010003" + "00" * 12 + "0a000002" + "00" * 12)
    assert transfer.connect_preamble(("10.1.0.3", 40000), ("10.0.0.2", 1024)) == expected


def test_the_relay_pair_configuration_passes_wanrelay_check(tmp_path):
    if not bench_rbudp.WANRELAY.is_file():
        pytest.skip("wanrelay is not built (make build)")
    t = topo.load(REPO / "examples/rbudp.toml")
    pair = bench_rbudp.RelayPair(t, tmp_path, 194_000_000, 1472)
    assert (tmp_path / "psk").stat().st_mode & 0o077 == 0, "the key file is private"
    for node, path in pair.configs.items():
        text = path.read_text()
        assert 'transport = "rbudp"' in text and 'rate = "194000000bit"' in text and "payload = 1472" in text
        done = subprocess.run([str(bench_rbudp.WANRELAY), "--check", "--config", str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, (node, done.stderr)


def test_bad_options_are_refused_naming_them():
    for args, needle in ((["--losses", "lots"], "--losses"), (["--variants", "udp"], "--variants"),
                         (["--size", "0"], "--size"), (["--size", "lots"], "--size"), (["--rate", "fast"], "--rate"), (["--payload", "10"], "--payload")):
        done = wanmpi("bench", "rbudp", "-t", "examples/rbudp.toml", *args, timeout=60)
        assert done.returncode == 2 and needle in done.stderr, (args, done.stderr)


@pytest.fixture(scope="module")
def rbudp_testbed():
    t = bring_up("examples/rbudp.toml")
    yield t
    net.teardown(net.State.load())


def test_bench_rbudp_delivers_every_byte_by_udp_despite_loss_testbed(rbudp_testbed, tmp_path):
    out = tmp_path / "rbudp.json"
    done = wanmpi("bench", "rbudp", "--size", "8MB", "--losses", "1%", "--max-seconds", "60",
                  "--json", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == "wanmpi-bench/1" and doc["bench"] == "rbudp"
    rows = {r["variant"]: r for r in doc["summary"]}
    assert set(rows) == {"rbudp", "tcp-cubic", "tcp-bbr"}
    for r in rows.values():
        assert r["bytes"] == 8_000_000 and not r["partial"], r
        assert 0 < r["goodput_bps"] <= 1.01 * doc["settings"]["path_bps"], r
    rb = rows["rbudp"]
    assert rb["datagrams_sent"] >= 8_000_000 // 1448, rb
    assert rb["datagrams_resent"] > 0, "1 % loss on the link: some datagrams were resent"
    assert rb["emulator_drops"] > 0
    assert "rbudp resent / sent" in done.stdout
