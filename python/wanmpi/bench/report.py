"""`wanmpi bench report FILE.json...`: the tables and plots of a saved result
file (results.py's format), without running anything: the markdown table and
PNGs of `bench suite`, the tables and plots of `bench coll` and `bench pacing`,
the tables of `bench vpn`.
Several `bench suite` files (parts of one run, e.g. one per MPI) are merged
into one (`--json` keeps the merged document)."""
from __future__ import annotations

from pathlib import Path

from . import coll, pacing, plot, suite, vpn
from .cases import BenchError
from .results import read_json, write_json


def run(paths: list[str], out: str | None, merged_json: str | None = None) -> int:
    """Several suite files (parts of one run) are merged first; --json writes the merged document."""
    documents = [read_json(p) for p in paths]
    path = paths[0]
    if len(documents) > 1:
        if documents[0]["bench"] != "suite":
            raise BenchError("only `bench suite` results can be merged")
        document = suite.merge(documents)
    else:
        document = documents[0]
    if merged_json:
        write_json(merged_json, document)
        path = merged_json
    out_dir = Path(out) if out else Path(path).resolve().parent
    stem = Path(path).stem
    bench = document["bench"]
    written: list[str] = []
    if bench == "suite":
        records = suite.records_of(document)
        text = suite.markdown(document["summary"], records, document["settings"])
        print(text)
        out_dir.mkdir(parents=True, exist_ok=True)
        md = out_dir / f"{stem}.md"
        md.write_text(f"Command: `{document['command']}`\n\n{text}")
        written = [str(md), *plot.suite(document, out_dir, stem)]
    elif bench == "coll":
        results = [coll.Result(**{k: v for k, v in row.items() if k != "of_bound"})
                   for row in document["summary"]]
        coll.print_table(results, document["settings"]["variants"])
        written = plot.collectives(results, out_dir) if results else []
    elif bench == "pacing":
        fields = set(pacing.Result.__dataclass_fields__)
        results = [pacing.Result(**{k: v for k, v in row.items() if k in fields})
                   for row in document["summary"]]
        pacing.print_table(results, document["settings"]["variants"])
        written = plot.pacing(document["summary"], out_dir, stem) if results else []
    elif bench == "vpn":
        text = vpn.markdown(document)
        print(text)
        out_dir.mkdir(parents=True, exist_ok=True)
        md = out_dir / f"{stem}.md"
        md.write_text(f"Command: `{document['command']}`\n\n{text}")
        written = [str(md)]
    else:
        raise BenchError(f"{path}: no report for bench {bench!r}")
    for w in written:
        print(f"wrote {w}")
    return 0
