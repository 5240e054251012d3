"""`wanmpi bench emulator` measures the emulator against its settings and puts
every setting back. Quick mode only; speed is recorded, not asserted."""
from __future__ import annotations

import json

import pytest

from conftest import wanmpi
from wanmpi import shell
from wanmpi.testbed import emulator, net

ROUTERS = ("wm-a-r", "wm-b-r")


def tcp_buffers() -> dict:
    return {(ns, key): shell.output(net.in_netns(ns, ["sysctl", "-n", key])).split()
            for ns in ROUTERS for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")}


def tun_mtus() -> list[str]:
    return [shell.output(["ip", "-n", ns, "-o", "link", "show", dev]).split(" mtu ")[1].split()[0]
            for ns, dev in (("wm-a-r", "wan-b"), ("wm-b-r", "wan-a"))]


def test_quick_bench_measures_the_emulator_near_its_settings_and_restores_them(two_clusters, tmp_path):
    settings, buffers, mtus = emulator.settings(), tcp_buffers(), tun_mtus()
    out = tmp_path / "emulator.json"
    done = wanmpi("bench", "emulator", "--quick", "--json", str(out), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    assert document["format"] == "wanmpi-bench/1" and document["bench"] == "emulator"
    assert document["git"]["commit"] and document["machine"]["cpus"] >= 1
    r = document["summary"]

    for row in r["rtt"]:                     # the delay is there, and little else (the fastest
        if row["path"].startswith(("node", "router")):   # of 10: other jobs may share the CPUs)
            assert row["expected_ms"] <= row["min_ms"] <= row["expected_ms"] + 1.0, row
            assert row["median_ms"] >= row["min_ms"]
    assert {s["delay_ms"] for s in r["rtt_summary"]} == {1, 10}
    assert {(t["cc"], t["flows"]) for t in r["tcp"]} >= {("bbr", 1), ("cubic", 4)}
    for t in r["tcp"]:                       # shaped: never above the rate, and not starved
        assert 0 < t["goodput_bps"] <= 1.01 * t["rate_bps"], t
    for loss in r["loss"]:                   # 20 000 datagrams at 1 %: 200 expected
        dropped = loss["emulator_dropped"] / loss["emulator_arrivals"]
        assert 0.5 * loss["configured"] <= dropped <= 1.5 * loss["configured"], loss
        assert loss["emulator_dropped"] <= loss["lost"] and loss["measured"] >= 0.5 * loss["configured"]
    assert r["load"]["goodput_bps"] > 0 and r["load"]["emulator"]["wanem_cpu"] > 0
    assert [c["mtu"] for c in r["capacity"]] == [1500, 9000]
    for c in r["capacity"]:
        assert c["pps"] > 0 and c["steps"] and c["limited_by"]
    assert r["headroom"]["rate"] > 0
    assert "TCP goodput" in done.stdout and "headroom" in done.stdout

    assert emulator.settings() == settings   # every setting put back
    assert tcp_buffers() == buffers
    assert tun_mtus() == mtus
    assert not net.health(net.State.load())


@pytest.mark.parametrize("args, message", [
    (["--parts", "rtt,speed"], "--parts: unknown part 'speed' (parts: rtt, tcp, loss, load, capacity)"),
    (["--seconds", "0"], "--seconds: expected a duration in (0, 600] seconds, got 0"),
    (["--seconds", "-2"], "--seconds: expected a duration in (0, 600] seconds, got -2"),
    (["--link", "a-c"], "--link: no link 'a-c' (links: a-b)"),
    (["--json", "/no/such/dir/out.json"], "--json: cannot write /no/such/dir/out.json"),
    (["--seconds", "soon"], "argument --seconds: invalid float value: 'soon'"),
])
def test_bad_arguments_are_refused_before_measuring(two_clusters, args, message):
    settings = emulator.settings()
    done = wanmpi("bench", "emulator", *args, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert emulator.settings() == settings


def test_another_topology_than_the_running_one_is_refused(two_clusters):
    done = wanmpi("bench", "emulator", "--quick", "-t", "examples/three-clusters.toml", timeout=60)
    assert done.returncode == 2 and "the testbed of" in done.stderr and "is up" in done.stderr
