"""`wanmpi sim --shared-from SIZE` and a sweep's `shared_from` (docs/scale.md,
"Sizes"): from SIZE up collbench's buffers are SMPI_SHARED_MALLOC'd (every
rank the same memory: 256 MiB messages on many ranks without that much
memory), so those results are not checked and say so; smaller ones are."""
from __future__ import annotations

import json

from wanmpi.cli.main import main
from wanmpi.sim import sweep

from test_sim import TWO, nothing_left_behind, spec_file, testbed_lock  # noqa: F401 (fixtures)


def test_sizes_from_shared_from_up_run_in_shared_buffers_unchecked(tmp_path):
    out = tmp_path / "s.json"
    assert main(["sim", "-t", str(TWO), "--coll", "bcast", "allreduce", "--bytes", "64KiB", "4MiB",
                 "--shared-from", "1MiB", "--json", str(out), "--timeout", "600"]) == 0
    document = json.loads(out.read_text())
    assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    assert document["settings"]["shared_from"] == 1 << 20
    rows = {(r["op"], r["bytes"]): r["checked"] for r in document["cases"][0]["metrics"]["rows"]}
    assert rows == {("bcast", 65536): True, ("bcast", 4 << 20): False,
                    ("allreduce", 65536): True, ("allreduce", 4 << 20): False}
    for row in document["summary"]:
        assert row["bound_s"] <= row["median_s"], row


def test_a_sweep_with_shared_from_needs_less_memory_and_marks_its_rows(tmp_path, capsys):
    spec = sweep.load_spec(spec_file(tmp_path, **{'timeout = "300s"': 'timeout = "300s"\nshared_from = "1MiB"',
                                                  '"1MiB"]': '"256MiB"]'}))
    assert spec.shared_from == 1 << 20
    # 2 x 2 ranks: two buffers of 256 MiB and the ranks' staging, not 4 ranks x 4 x 256 MiB
    assert sweep.memory_needed(spec, spec.base) == 4 * 2 * (256 << 20) + 2 * (256 << 20)
    plain = sweep.load_spec(spec_file(tmp_path, **{'"1MiB"]': '"256MiB"]'}))
    assert plain.shared_from == 0 and sweep.memory_needed(plain, plain.base) == 4 * 4 * (256 << 20)
    rows = sweep.summary(spec, [])
    assert {(r["bytes"], r["checked"]) for r in rows} == {(65536, True), (256 << 20, False)}
    bad = spec_file(tmp_path, **{'timeout = "300s"': 'timeout = "300s"\nshared_from = "lots"'})
    assert main(["sim", "--sweep", str(bad)]) == 2
    assert "shared_from: 'lots'" in capsys.readouterr().err
