"""The emulated WAN link at run time: `wanmpi link set/show/monitor` and the
traffic plot. Changes take effect at once; monitor totals equal the counters."""
from __future__ import annotations

import csv
import re
import subprocess
import time

import pytest

from conftest import wanmpi
from wanmpi.testbed import emulator, net


def rtt_ms(two_clusters, count: int = 20) -> float | None:
    """The fastest of `count` pings (a contended host delays some, not all)."""
    a0, b0 = two_clusters.node("a0"), two_clusters.node("b0")
    out = subprocess.run(net.in_netns(a0.netns, ["ping", "-q", "-n", "-c", str(count), "-i", "0.05", "-W", "1",
                                                 b0.address]), capture_output=True, text=True).stdout
    m = re.search(r"= ([\d.]+)/", out)
    return float(m.group(1)) if m else None


def test_changing_delay_while_running_takes_effect(two_clusters):
    try:
        done = wanmpi("link", "set", "a-b", "--delay", "25ms")
        assert done.returncode == 0, done.stderr
        assert 50.0 <= rtt_ms(two_clusters) <= 52.0
        done = wanmpi("link", "set", "a-b", "--dir", "a_to_b", "--delay", "5ms")
        assert done.returncode == 0, done.stderr
        assert 30.0 <= rtt_ms(two_clusters) <= 32.0         # 5 ms there, 25 ms back
    finally:
        wanmpi("link", "set", "a-b", "--delay", "10ms")
    assert 20.0 <= rtt_ms(two_clusters) <= 22.0


def test_wanem_spins_up_to_releases_within_its_cpu_budget(two_clusters):
    before = emulator.request({"cmd": "show"})
    assert rtt_ms(two_clusters, count=10) is not None
    after = emulator.request({"cmd": "show"})
    assert after["spin_s"] > before["spin_s"]            # delayed pings were spun up to
    # never more than 2 % of wall time plus the 2 ms of credit it may save up
    assert after["spin_s"] <= 0.02 * after["uptime_s"] + 0.002 + 1e-4
    assert "spinning before releases" in wanmpi("link", "show").stdout


def test_cutting_the_link_drops_everything_until_it_is_back(two_clusters):
    try:
        assert wanmpi("link", "set", "a-b", "--down").returncode == 0
        before = emulator.counters()[("a-b", "a_to_b")]["drop_down"]
        assert rtt_ms(two_clusters, count=3) is None
        assert emulator.counters()[("a-b", "a_to_b")]["drop_down"] >= before + 3
        assert "DOWN" in wanmpi("link", "show").stdout
    finally:
        assert wanmpi("link", "set", "a-b", "--up").returncode == 0
    assert rtt_ms(two_clusters) is not None


@pytest.mark.parametrize("args, message", [
    (["--delay=-5ms"], "--delay: negative duration"),
    (["--rate", "0Mbit"], "--rate: rate '0Mbit' is below 1 kbit/s"),
    (["--loss", "1.5"], "--loss: loss '1.5' is outside [0, 1]"),
    (["--queue", "1000B"], "queue_bytes 1000 is smaller than one MTU (1500)"),
    ([], "nothing to change"),
])
def test_bad_link_settings_are_refused_and_change_nothing(two_clusters, args, message):
    before = emulator.request({"cmd": "show"})["links"][0]["a_to_b"]
    done = wanmpi("link", "set", "a-b", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    after = emulator.request({"cmd": "show"})["links"][0]["a_to_b"]
    assert {k: v for k, v in after.items() if k != "counters"} == \
        {k: v for k, v in before.items() if k != "counters"}


def test_unknown_link_is_named(two_clusters):
    done = wanmpi("link", "set", "a-c", "--delay", "1ms")
    assert done.returncode == 2 and "no link 'a-c' (links: a-b)" in done.stderr


def test_monitor_totals_equal_the_link_counters_and_plot_draws_them(two_clusters, tmp_path):
    csv_path = tmp_path / "traffic.csv"
    emulator.request({"cmd": "reset_counters"})
    assert wanmpi("link", "monitor", str(csv_path)).returncode == 0
    a0, b0 = two_clusters.node("a0"), two_clusters.node("b0")
    subprocess.run(net.in_netns(a0.netns, ["ping", "-q", "-c", "20", "-i", "0.01", "-s", "1400",
                                           b0.address]), capture_output=True, check=True)
    time.sleep(0.1)                                   # the last replies are delivered
    assert wanmpi("link", "monitor", "--stop").returncode == 0
    counters = emulator.counters()
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    for direction in emulator.DIRECTIONS:
        mine = [r for r in rows if r["link"] == "a-b" and r["dir"] == direction]
        assert sum(int(r["packets"]) for r in mine) == counters[("a-b", direction)]["dep_packets"] >= 20
        assert sum(int(r["bytes"]) for r in mine) == counters[("a-b", direction)]["dep_bytes"]
    png = tmp_path / "traffic.png"
    done = wanmpi("plot", "traffic", str(csv_path), "-o", str(png), "--bin-ms", "5")
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_refuses_a_file_that_is_not_a_monitor_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    done = wanmpi("plot", "traffic", str(bad))
    assert done.returncode == 2 and "not a traffic monitor CSV" in done.stderr
