"""`wanmpi doctor` and the TCP settings the topology asks for: the WAN paths'
bandwidth-delay products, the buffer limits the testbed gives its nodes, and
every check on fabricated settings (OK / WARN / FAIL, the fix, the exit code),
then on real testbed nodes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, bring_up, wanmpi
from wanmpi import tcptune, topo
from wanmpi.cli import main as cli
from wanmpi.job import doctor
from wanmpi.job.doctor import FAIL, OK, WARN, Interface, NodeSettings
from wanmpi.testbed import net

FIXTURES = Path(__file__).parent / "fixtures"
TWO = REPO / "examples" / "two-clusters.toml"
THREE = REPO / "examples" / "three-clusters.toml"

GOOD = {
    "net.ipv4.tcp_rmem": "4096 131072 33554432", "net.ipv4.tcp_wmem": "4096 16384 4194304",
    "net.core.rmem_max": "4194304", "net.core.wmem_max": "4194304", "net.ipv4.tcp_window_scaling": "1",
    "net.ipv4.tcp_congestion_control": "cubic", "net.ipv4.tcp_available_congestion_control": "reno cubic bbr",
    "net.ipv4.tcp_allowed_congestion_control": "reno cubic", "net.ipv4.tcp_slow_start_after_idle": "0",
    "net.ipv4.tcp_no_metrics_save": "1", "net.ipv4.tcp_mtu_probing": "1",
}
ETH0 = Interface("eth0", 1500, ("fq",), ("198.18.0.1/24",))


def settings(interfaces=(ETH0,), **changed) -> NodeSettings:
    values = {**GOOD, **{k.replace("__", "."): v for k, v in changed.items()}}
    return NodeSettings({k: v for k, v in values.items() if v is not None}, tuple(interfaces))


def finding(findings, check: str):
    (f,) = [f for f in findings if f.check == check]
    return f


# ---- what the topology asks for -----------------------------------------------------
def test_paths_follow_the_routes_and_take_the_slowest_link_or_nic():
    t = topo.load(THREE)
    paths = {(p.source, p.dest): p for p in tcptune.wan_paths(t)}
    assert len(paths) == 6
    bc = paths[("b", "c")]
    assert [l.name for l in bc.links] == ["b-c"] and bc.rate_bps == 100_000_000 and bc.rtt_us == 30_000
    assert bc.bdp_bytes == 375_000
    assert paths[("a", "c")].rate_bps == 100_000_000       # a's NICs, not the 200 Mbit/s link
    assert tcptune.largest_path(t, "a").dest == "c"
    assert tcptune.buffer_limit(t) == 750_000
    assert tcptune.buffer_limit(topo.load(TWO)) == 2 * 100_000_000 * 20_000 // 8_000_000


def test_buffer_limits_are_raised_never_lowered():
    assert tcptune.raised_triple("4096\t16384\t4194304", 50_000_000) == "4096 16384 50000000"
    assert tcptune.raised_triple("4096 131072 33554432", 1_000_000) is None
    assert tcptune.raised_triple("nonsense", 1) is None


# ---- checks on fabricated settings ------------------------------------------------------
def test_well_tuned_node_is_all_ok():
    findings = doctor.examine(topo.load(TWO), settings(), "a")
    assert [f for f in findings if f.status != OK] == []
    assert {f.check for f in findings} >= {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max",
                                           "net.ipv4.tcp_congestion_control", "mtu eth0", "qdisc eth0"}


@pytest.mark.parametrize("maximum, status", [(200_000, FAIL), (400_000, WARN), (500_000, OK)])
def test_buffer_max_below_the_bdp_fails_below_twice_warns(maximum, status):
    # two-clusters: 100 Mbit/s NICs x 20 ms RTT = BDP 250 KB; wanted 500 KB
    findings = doctor.examine(topo.load(TWO), settings(net__ipv4__tcp_wmem=f"4096 16384 {maximum}"), "a")
    f = finding(findings, "net.ipv4.tcp_wmem")
    assert f.status == status
    if status != OK:
        assert f.fix == ['sysctl -w net.ipv4.tcp_wmem="4096 16384 500000"']
        assert "autotuning" in f.why


def test_core_buffer_limits_warn_and_are_fixed_on_the_host():
    findings = doctor.examine(topo.load(TWO), settings(net__core__rmem_max="212992"), "a",
                              fix_prefix="ip netns exec wm-a0 ")
    f = finding(findings, "net.core.rmem_max")
    assert f.status == WARN and f.fix == ["sysctl -w net.core.rmem_max=500000"]   # host-wide: no prefix
    assert "btl_tcp_sndbuf" in f.why


def test_reno_warns_with_the_time_to_recover_and_recommends_bbr():
    f = finding(doctor.examine(topo.load(TWO), settings(net__ipv4__tcp_congestion_control="reno"), "a"),
                "net.ipv4.tcp_congestion_control")
    assert f.status == WARN
    assert "round trips" in f.why and "Recommended: bbr" in f.why
    assert f.fix == ["sysctl -w net.ipv4.tcp_congestion_control=bbr"]


def test_testbed_node_fix_allows_the_algorithm_on_the_host_first():
    s = settings(net__ipv4__tcp_congestion_control="reno",
                 net__ipv4__tcp_available_congestion_control="reno cubic",
                 net__ipv4__tcp_allowed_congestion_control="reno")
    f = finding(doctor.examine(topo.load(TWO), s, "a", "ip netns exec wm-a0 "), "net.ipv4.tcp_congestion_control")
    assert f.fix == ['sysctl -w net.ipv4.tcp_allowed_congestion_control="reno cubic"',
                     "ip netns exec wm-a0 sysctl -w net.ipv4.tcp_congestion_control=cubic"]


def test_unavailable_algorithm_is_loaded_first():
    s = settings(net__ipv4__tcp_congestion_control="reno", net__ipv4__tcp_available_congestion_control="reno")
    f = finding(doctor.examine(topo.load(TWO), s, "a"), "net.ipv4.tcp_congestion_control")
    assert f.fix == ["modprobe tcp_cubic", "sysctl -w net.ipv4.tcp_congestion_control=cubic"]


def test_slow_start_after_idle_warns_and_says_why():
    f = finding(doctor.examine(topo.load(TWO), settings(net__ipv4__tcp_slow_start_after_idle="1"), "a"),
                "net.ipv4.tcp_slow_start_after_idle")
    assert f.status == WARN and f.fix == ["sysctl -w net.ipv4.tcp_slow_start_after_idle=0"]
    assert "bursts" in f.why and "initial 10 segments" in f.why and "round trips" in f.why


@pytest.mark.parametrize("key, bad, status", [
    ("net.ipv4.tcp_no_metrics_save", "0", WARN),
    ("net.ipv4.tcp_mtu_probing", "0", WARN),
    ("net.ipv4.tcp_window_scaling", "0", FAIL),
])
def test_each_setting_has_its_status_and_fix(key, bad, status):
    f = finding(doctor.examine(topo.load(TWO), settings(**{key.replace(".", "__"): bad}), "a"), key)
    assert f.status == status and f.why
    assert f.fix[0].startswith(f"sysctl -w {key}=")


def test_missing_sysctl_is_a_warning_not_a_crash():
    findings = doctor.examine(topo.load(TWO), settings(net__ipv4__tcp_rmem=None, net__core__wmem_max=None), "a")
    assert finding(findings, "net.ipv4.tcp_rmem").found == "cannot be read"
    assert finding(findings, "net.core.wmem_max").status == WARN


def test_mtu_other_than_the_topologys_warns_and_no_fq_is_fine():
    eth0 = Interface("eth0", 9000, ("tbf",), ("198.18.0.1/24",))
    findings = doctor.examine(topo.load(TWO), settings(interfaces=(eth0,)), "a")
    mtu = finding(findings, "mtu eth0")
    assert mtu.status == WARN and mtu.fix == ["ip link set dev eth0 mtu 1500"]
    qdisc = finding(findings, "qdisc eth0")
    assert qdisc.status == OK and "internal pacing" in qdisc.why


def test_machine_outside_the_topology_is_told_so():
    lo = Interface("lo", 65536, ("noqueue",), ("127.0.0.1/8",))
    s = settings(interfaces=(lo,))
    assert doctor.cluster_of_settings(topo.load(TWO), s) is None
    f = finding(doctor.examine(topo.load(TWO), s, None), "interfaces")
    assert f.status == WARN


def test_collected_output_of_a_testbed_node_is_parsed():
    s = doctor.parse_collected((FIXTURES / "doctor-a0.txt").read_text())
    assert s.sysctls["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert s.sysctls["net.ipv4.tcp_available_congestion_control"] == "reno bbr cubic"
    assert s.interfaces_in("198.18.0.0/24") == [Interface("eth0", 1500, ("tbf",), ("198.18.0.1/24",))]
    assert doctor.cluster_of_settings(topo.load(TWO), s) == "a"


def test_exit_status_is_nonzero_on_fail_only(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "collect", lambda target: settings(net__ipv4__tcp_slow_start_after_idle="1"))
    assert cli.main(["doctor", str(TWO)]) == 0
    assert "WARN  net.ipv4.tcp_slow_start_after_idle: 1" in capsys.readouterr().out
    monkeypatch.setattr(doctor, "collect", lambda target: settings(net__ipv4__tcp_rmem="4096 131072 65536"))
    assert cli.main(["doctor", str(TWO), "--json"]) == doctor.EXIT_FAIL
    data = json.loads(capsys.readouterr().out)
    assert data["cluster"] == "a"
    assert [f["check"] for f in data["findings"] if f["status"] == FAIL] == ["net.ipv4.tcp_rmem"]


def test_unknown_node_is_named(capsys):
    assert cli.main(["doctor", str(TWO), "--node", "zz"]) == 2
    assert "no node 'zz'" in capsys.readouterr().err


# ---- on the testbed -------------------------------------------------------------------------
def test_long_fat_wan_raises_the_testbed_buffer_limits_and_down_restores_the_host(tmp_path):
    fat = tmp_path / "fat.toml"
    fat.write_text('[[cluster]]\nname = "a"\nnodes = 1\nnic = "1Gbit"\n'
                   '[[cluster]]\nname = "b"\nnodes = 1\nnic = "1Gbit"\n'
                   '[wan]\nrate = "1Gbit"\ndelay = "100ms"\n')
    host_before = Path("/proc/sys/net/core/rmem_max").read_text().strip()
    need = 2 * 1_000_000_000 * 200_000 // 8_000_000                    # 2 x BDP = 50 MB
    assert int(host_before) < need
    t = bring_up(str(fat))
    try:
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            value = net.shell.output(net.in_netns("wm-a0", ["sysctl", "-n", key]))
            assert tcptune.parse_triple(value)[2] == need, (key, value)
        assert Path("/proc/sys/net/core/rmem_max").read_text().strip() == str(need)
        done = wanmpi("doctor", str(fat), "--node", "a0")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "OK    net.ipv4.tcp_wmem: max 50000000 B" in done.stdout
    finally:
        net.teardown(net.State.load())
    assert Path("/proc/sys/net/core/rmem_max").read_text().strip() == host_before
    assert t.links[0].delay_us == 100_000


def test_doctor_on_a_testbed_node(two_clusters):
    done = wanmpi("doctor", "--node", "b1")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "testbed node b1 (namespace wm-b1), cluster b" in out
    assert "OK    net.ipv4.tcp_no_metrics_save: 1" in out          # set by testbed up
    assert "OK    mtu eth0: 1500" in out and "OK    qdisc eth0: tbf (no fq)" in out
    assert ", 0 FAIL" in out
    if "WARN  net.ipv4.tcp_slow_start_after_idle" in out:
        assert "fix: ip netns exec wm-b1 sysctl -w net.ipv4.tcp_slow_start_after_idle=0" in out
