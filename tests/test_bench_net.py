"""`wanmpi bench net` measures what the topology configures (within tolerance)."""
from __future__ import annotations

import json

from conftest import wanmpi


def test_bench_net_measures_every_link_direction_against_its_configuration(two_clusters, tmp_path):
    out = tmp_path / "net.json"
    done = wanmpi("bench", "net", "--seconds", "1.5", "--json", str(out), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    assert document["format"] == "wanmpi-bench/1" and document["bench"] == "net"
    rows = document["summary"]
    seen = {(r["what"], r["direction"]) for r in rows}
    assert seen == {("RTT", "a0->b0"), ("TCP 1 flow", "a0->b0"), ("TCP 4 flows", "a->b"),
                    ("RTT", "b0->a0"), ("TCP 1 flow", "b0->a0"), ("TCP 4 flows", "b->a")}
    for r in rows:
        if r["what"] == "RTT":      # the emulated delay is there, never less; the median of a loaded host can be
            assert 20.0 <= r["measured"] <= 40.0, r     # far later (33.9 ms seen), the emulator's own accuracy is
                                                        # asserted by test_bench_emulator and wanem's netns tests
        else:                       # shaped: never above the configured rate, and not starved
            assert 0.5 * r["configured"] <= r["measured"] <= 1.02 * r["configured"], r
    assert "TCP 4 flows" in done.stdout and "error" in done.stdout
