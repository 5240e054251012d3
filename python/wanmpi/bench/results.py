"""The one result format of `wanmpi bench` (docs/benchmarks.md, "Result
format"): the document a run writes with `--json` and `bench report` reads
back, what a run prints at its end, and the markdown tables of the reports.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

from .. import paths
from ..topo import Topology
from .cases import BenchError, Record

FORMAT = "wanmpi-bench/1"


# ---- where and when a run was made --------------------------------------------------------
def git_commit() -> dict:
    """The commit of this wanmpi: its checkout's, or in a prefix the one it was installed from."""
    me = paths.identity()
    return {"commit": me.commit, "dirty": me.dirty}


def machine() -> dict:
    return {"host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def now_iso() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def rules_settings(rules: str | None) -> dict:
    """What a run records of the rules file its libwanmpi jobs read: path and text."""
    if not rules:
        return {}
    try:
        return {"rules": rules, "rules_text": Path(rules).read_text()}
    except OSError:
        return {"rules": rules}


# ---- results -------------------------------------------------------------------------------
def result_document(bench: str, base: Topology, settings: dict, records: list[Record], summary: list[dict],
                    started_iso: str, seconds: float, argv: list[str] | None = None) -> dict:
    """The one result format of `wanmpi bench` (docs/benchmarks.md, "Result format")."""
    failed = [r for r in records if not r.ok]
    return {
        "format": FORMAT,
        "bench": bench,
        "command": shlex.join(["wanmpi", *(sys.argv[1:] if argv is None else argv)]),
        "started": started_iso,
        "seconds": round(seconds, 1),
        "git": git_commit(),
        "machine": machine(),
        "topology": {"source": base.source, "text": base.text},
        "settings": settings,
        "counts": {"cases": len(records), "ok": len(records) - len(failed), "failed": len(failed)},
        "cases": [r.as_dict(i) for i, r in enumerate(records)],
        "summary": summary,
    }


def finish(bench: str, base: Topology, settings: dict, records: list[Record], summary: list[dict],
           started_iso: str, started: float, json_path: str | Path | None) -> dict:
    """The end of a `wanmpi bench` run: each failed case and the environment
    on stdout, then the result document, written to `json_path` if given."""
    for r in records:
        if not r.ok:
            print(f"failed: {r.case.label()}: {r.error}")
    print("environment: " + environment_summary(records))
    document = result_document(bench, base, settings, records, summary, started_iso, time.monotonic() - started)
    if json_path:
        write_json(json_path, document)
    return document


def exit_status(document: dict) -> int:
    """1 if a case failed, else 0."""
    return 1 if document["counts"]["failed"] else 0


def write_json(path: str | Path, document: dict) -> None:
    try:
        Path(path).write_text(json.dumps(document, indent=1) + "\n")
    except OSError as e:
        raise BenchError(f"--json: cannot write {path}: {e.strerror}") from None


def read_json(path: str | Path) -> dict:
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BenchError(f"{path}: not a result file: {e}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BenchError(f"{path}: not a {FORMAT} result file")
    return document


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    def cell(v) -> str:
        return "-" if v is None else str(v).replace("|", "\\|")
    out = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(out) + "\n"


def environment_summary(records: list[Record]) -> str:
    """One paragraph: load, idle share, emulator drops and lateness, failures."""
    loads = [r.env["load_avg_1m"] for r in records if "load_avg_1m" in r.env]
    idle = [r.env["cpu_idle"] for r in records if r.env.get("cpu_idle") is not None]
    emu = [r.env["emulator"] for r in records if "emulator" in r.env]
    behind = sum(1 for e in emu if e["behind"])
    failed = [r for r in records if not r.ok]
    parts = []
    if loads:
        parts.append(f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}")
    if idle:
        parts.append(f"CPU idle {100 * min(idle):.0f}-{100 * max(idle):.0f} %, median {100 * statistics.median(idle):.0f} %")
    if emu:
        parts.append(f"emulator: {sum(e['drops'] for e in emu)} drops, "
                     f"{sum(e['late_1ms'] for e in emu)} releases > 1 ms late in all, "
                     f"behind in {behind} of {len(emu)} cases")
    parts.append(f"{len(failed)} of {len(records)} cases failed" if failed else f"all {len(records)} cases ok")
    return "; ".join(parts) + "."
