"""`wanmpi bench flap` on the testbed: a job survives a WAN cut with its
results checked, the stall after the links return is measured, and the links
are up again afterwards (also after a job that failed)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from conftest import wanmpi
from wanmpi import paths
from wanmpi.testbed import emulator


def links_up() -> bool:
    return all(l[d]["up"] for l in emulator.request({"cmd": "show"})["links"] for d in emulator.DIRECTIONS)


def test_flap_measures_the_stall_and_restores_the_links(two_clusters, tmp_path):
    out = tmp_path / "flap.json"
    done = wanmpi("bench", "flap", "-t", "examples/two-clusters.toml", "--cuts", "3", "--variants", "wanmpi",
                  "--mpis", "openmpi", "--json", str(out), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["bench"] == "flap" and doc["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    m = doc["cases"][0]["metrics"]
    assert m["steps"] > 10 and 2.5 <= m["cut_s"] <= 4.5 and m["stall_s"] > 0, m
    assert "| openmpi | wanmpi | 3 |" in done.stdout
    assert links_up()


def test_flap_restores_the_links_when_the_job_fails(two_clusters, tmp_path):
    done = wanmpi("bench", "flap", "-t", "examples/two-clusters.toml", "--cuts", "3", "--variants", "plain",
                  "--mpis", "mpich", "--timeout", "5", timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "failed: steps mpich plain" in done.stdout and "exit status 124" in done.stdout
    assert links_up()


def test_a_relayed_job_survives_a_cut_longer_than_the_trunks_idle_timeout(two_clusters, tmp_path):
    """Through relays, a 25 s cut outlasts the trunks' idle_timeout (20 s):
    each trunk's session is suspended and resumed on a new connection, every
    stream intact (the job's sums are checked), instead of the job dying."""
    out = tmp_path / "flap.json"
    done = wanmpi("bench", "flap", "-t", "examples/two-clusters.toml", "--cuts", "25", "--variants", "relayed",
                  "--mpis", "openmpi", "--json", str(out), "--monitor", str(tmp_path / "wan"), timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    m = json.loads(out.read_text())["cases"][0]["metrics"]
    assert m["steps"] > 10 and 24 <= m["cut_s"] <= 27 and 0 < m["stall_s"] < 10, m
    # The WAN monitor saw the cut: traffic before and after, none inside but drops (retransmissions, redials).
    assert m["traffic_png"].endswith(".png") and Path(m["traffic_png"]).stat().st_size > 10_000
    bins = [r for r in csv.DictReader(open(Path(m["traffic_png"]).with_suffix(".csv")))]
    def during(lo: float, hi: float, key: str) -> int:
        return sum(int(r[key]) for r in bins if lo <= int(r["time_ms"]) < hi)
    assert during(0, 8000, "bytes") > 1e6 and during(34_000, 10**9, "bytes") > 1e6
    assert during(10_000, 32_000, "bytes") == 0 and during(10_000, 32_000, "drops") > 10
    kept = paths.STATE_DIR / "relay-logs"
    for relay in ("a-relay0", "b-relay0"):
        metrics = [l for l in (kept / f"{relay}.metrics").read_text().splitlines() if not l.startswith("#")]
        resumed = [l for l in metrics if l.startswith("wanrelay_trunk_resumes_total")]
        assert resumed and all(float(l.split()[-1]) >= 1 for l in resumed), metrics
        assert not [l for l in metrics if l.startswith("wanrelay_trunk_closes_total")], metrics
    assert links_up()
