"""`wanmpi sim`'s run: libwanmpi built with smpicc (`make smpi`, cached in
build/smpi), bench/collbench (collectives) or bench/patterns (the FT and IS
kernels, with `wanmpi bench suite`'s arguments per class: bench/kernels.py)
run by smpirun on the platform of the topology, and the result written in the
one format of `wanmpi bench` (bench/results.py, bench "sim"; the summary rows
of collectives are `wanmpi bench coll`'s, those of a kernel one row with its
seconds per iteration).

One case per variant: "wanmpi" (collbench linked with libwanmpi, over SMPI's
algorithms as the fallback) or, with --no-wanmpi, the selector's name
("mpich", "ompi": SMPI's own implementations of those MPIs' algorithms). The
simulation is deterministic, so one timed iteration is enough, after one
untimed: the job's first call pays a one-time cost (SMPI's mpich allreduce
of 64 KiB on 2x4: 0.231 s the first time, 0.069 s every time after).

SMPI's settings (docs/scale.md, "Blockers and workarounds"):
  flat bandwidth and latency factors (B3: the default ones are a LAN's),
  smpi/test:0 (B1, with lib/smpi's patches), and a per-byte send overhead on
  messages of 64 KiB or less (B2: SMPI has no FIFO per connection, so chunks
  posted together would all arrive at the end). That overhead is a
  calibration knob: `send_overhead`, s/B; by default the study's value at
  100 Mbit/s NICs (8.5e-8, 1.0625 x the NIC's time per byte), scaled to the
  slowest NIC.
  No computation benchmarked (smpi/simulate-computation:no): scaled by
  smpi/host-speed it came to microseconds, but its jitter reordered events
  and moved a 16 MiB broadcast over 3 x 8 by up to 1 ms (27.3-28.4 ms)
  between identical runs; without it every run gives the same time.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .. import paths
from ..bench import coll
from ..bench.bounds import lower_bound
from ..bench.cases import BenchError, Case, Record
from ..bench.kernels import KERNELS as SUITE_KERNELS
from ..bench.results import exit_status, finish, now_iso
from ..job.libwanmpi import environment
from ..topo import Topology
from . import library, platform

OPS = ("bcast", "allreduce", "alltoall")
KERNELS = ("ft", "is")              # bench/patterns.c's all-to-all kernels
SELECTORS = ("mpich", "ompi")
OVERHEAD_PER_NIC_BYTE = 1.0625      # the study's 8.5e-8 s/B at 100 Mbit/s (8e-8 s/B)
SMALL_MESSAGE = 65536               # the send overhead applies up to this size
SHARING = {                          # how flows share a link: SimGrid's default weighs them by their route's
    "tcp": (),                       # latency (TCP's RTT unfairness); "equal": near-equal shares, as
    "equal": ("--cfg=network/weight-S:1e7",),   # paced senders would get (libwanshim cannot load under SMPI)
}
QUIET_LOGS = ("--log=smpi_config.thresh:warning", "--log=xbt_cfg.thresh:warning",
              "--log=smpi_coll.thresh:warning")


def default_send_overhead(t: Topology) -> float:
    """Seconds per byte: 1.0625 x the slowest NIC's time per byte."""
    return OVERHEAD_PER_NIC_BYTE * 8 / min(c.nic_bps for c in t.clusters)


def smpi_options(selector: str, send_overhead: float, sharing: str = "tcp") -> list[str]:
    x = f"{send_overhead:.4g}"
    return [f"--cfg=smpi/coll-selector:{selector}", "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
            f"--cfg=network/TCP-gamma:{platform.TCP_WINDOW}",
            f"--cfg=smpi/ois:0:0:{x};{SMALL_MESSAGE}:0:0", f"--cfg=smpi/os:0:0:{x};{SMALL_MESSAGE}:0:0",
            "--cfg=smpi/test:0", "--cfg=smpi/simulate-computation:no", *SHARING[sharing], *QUIET_LOGS]


SMPI_DIR_VARIABLE = "WANMPI_SMPI_DIR"   # another build of `make smpi SMPI_DIR=...`: an older library, side by side


def smpi_dir() -> Path:
    other = os.environ.get(SMPI_DIR_VARIABLE)
    if other:
        return Path(other).resolve()
    if paths.REPO is None:
        raise BenchError("wanmpi sim builds libwanmpi with smpicc from the sources: run it from a checkout")
    return paths.REPO / "build" / "smpi"


def build() -> Path:
    """`make smpi` (at nice 19; nothing to do when it is up to date): build/smpi;
    or $WANMPI_SMPI_DIR as it is (made by `make smpi SMPI_DIR=...`)."""
    if shutil.which("smpicc") is None or shutil.which("smpirun") is None:
        raise BenchError("smpicc/smpirun not found: install SimGrid (`make apt` installs libsimgrid-dev)")
    if os.environ.get(SMPI_DIR_VARIABLE):
        out = smpi_dir()
        missing = [p.name for p in (program("collbench", True), program("collbench", False)) if not p.exists()]
        if missing:
            raise BenchError(f"${SMPI_DIR_VARIABLE}={out}: no {', '.join(missing)} there "
                             f"(make smpi SMPI_DIR={out} builds them)")
        return out
    out = smpi_dir()
    done = subprocess.run(["nice", "-n", "19", "make", "-s", "-C", str(paths.REPO), "smpi"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"make smpi failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return out


def program(name: str, wanmpi: bool) -> Path:
    """build/smpi's bench/<name>.c, with libwanmpi's objects or without."""
    return smpi_dir() / f"{name}-{'wan' if wanmpi else 'plain'}"


def rank_environment(t: Topology, stats: Path | None) -> dict[str, str]:
    """The topology's WANMPI_* settings (job/libwanmpi.py), clusters by rank
    (SMPI ranks have no addresses), statistics per rank if `stats`."""
    env = {k: v for k, v in environment(t).items() if k != "WANMPI_CLUSTER_MAP"}
    env["WANMPI_RANK_CLUSTERS"] = platform.rank_clusters(t)
    if stats is not None:
        env["WANMPI_STATS"] = str(stats / "stats-%r.json")
    return env


_RUNNING: set[int] = set()              # process groups of the smpiruns under way (a sweep's threads)
_RUNNING_LOCK = threading.Lock()
_STOPPED = threading.Event()            # kill_running was called: start no more


def run_smpirun(command: list[str], env: dict, work: Path, timeout: float) -> tuple[int, str, str]:
    """smpirun in a process group of its own: it runs smpimain in the
    background, so on a timeout or an interrupt the whole group is killed
    (killing smpirun alone left smpimain running)."""
    with _RUNNING_LOCK:
        if _STOPPED.is_set():
            raise BenchError("not started: wanmpi sim was told to stop")
        proc = subprocess.Popen(command, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        _RUNNING.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchError(f"smpirun did not end within {timeout:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
    return proc.returncode, stdout, stderr


def kill_running() -> None:
    """Ends every smpirun under way, whole process groups: `wanmpi sim`
    told to stop (SIGTERM, SIGINT) while a sweep's threads wait on them,
    which no exception in the main thread reaches."""
    with _RUNNING_LOCK:
        _STOPPED.set()
        groups = list(_RUNNING)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def simulate(t: Topology, program: Path, selector: str, send_overhead: float, args: list[str],
             work: Path, wanmpi: bool, timeout: float, settings: dict[str, str] | None = None,
             nic_latency_us: int = platform.NIC_LATENCY_US, sharing: str = "tcp",
             simgrid: Path | None = None) -> dict:
    """One smpirun of collbench on `t` (on the SimGrid library `simgrid`,
    None: Debian's; library.py): its result rows, and rank 0's libwanmpi
    statistics (`wanmpi_stats`) when it ran with libwanmpi."""
    xml, hosts = platform.write(t, work, nic_latency_us)
    env = {**os.environ, **rank_environment(t, work if wanmpi else None),
           "WANMPI_LAN_LATENCY": str(platform.hop_latency_us(nic_latency_us)), **(settings or {})}
    command = ["nice", "-n", "19", "smpirun", *library.smpirun_wrapper(simgrid), "-np", str(len(t.nodes)),
               "-platform", str(xml), "-hostfile", str(hosts), *smpi_options(selector, send_overhead, sharing),
               str(program), *args]
    returncode, stdout, stderr = run_smpirun(command, env, work, timeout)
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if returncode != 0 or not rows:
        why = [l for l in (stderr + stdout).splitlines() if "WARNING" not in l][-5:]
        raise BenchError(f"smpirun: exit status {returncode}: {' | '.join(why)}")
    metrics: dict = {"rows": rows}
    stats = work / "stats-0.json"
    if wanmpi and stats.exists():
        metrics["wanmpi_stats"] = json.loads(stats.read_text())
    return metrics


def simulate_case(sim: Topology, kernel: str, selector: str, wanmpi: bool, overhead: float, prog: Path,
                  args: list[str], timeout: float, params: tuple = (), variant: str | None = None,
                  settings: dict[str, str] | None = None, nic_latency_us: int = platform.NIC_LATENCY_US,
                  sharing: str = "tcp", simgrid: Path | None = None) -> Record:
    """One smpirun as a case of `wanmpi bench` (variant "wanmpi", the
    selector's name, or `variant`: libwanmpi with WANMPI_* `settings`), in a
    temporary directory under build/smpi/runs."""
    delay_ms = max((l.delay_us for l in sim.links), default=0) / 1000
    name = variant or ("wanmpi" if wanmpi else selector)
    record = Record(Case(kernel, name, f"smpi-{selector}", delay_ms, params=params))
    started = time.monotonic()
    (smpi_dir() / "runs").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=smpi_dir() / "runs") as work:
        try:
            record.metrics = simulate(sim, prog, selector, overhead, args, Path(work), wanmpi, timeout, settings,
                                      nic_latency_us, sharing, simgrid)
            record.status = "ok"
        except BenchError as e:
            record.status, record.error = "failed", str(e)
    record.seconds = time.monotonic() - started
    record.env = {"load_avg_1m": round(os.getloadavg()[0], 2)}
    return record


def prepared(t: Topology, overrides: platform.Overrides, send_overhead: float | None) -> tuple[Topology, float]:
    """The simulated topology (every route checked before anything is built),
    the send overhead, and build/smpi made."""
    sim = platform.simulated(t, overrides)
    platform.check_routes(sim)
    build()
    return sim, default_send_overhead(sim) if send_overhead is None else send_overhead


def settings_of(sim: Topology, overrides: platform.Overrides, selector: str, wanmpi: bool, overhead: float,
                timeout: float, simgrid: Path | None, **extra) -> dict:
    return {"simulator": "SimGrid SMPI", "simgrid": library.describe(simgrid), "selector": selector,
            "wanmpi": wanmpi, **extra, "ranks": len(sim.nodes), "send_overhead_s_per_byte": overhead,
            "overrides": overrides.as_dict(), "smpi_options": smpi_options(selector, overhead), "timeout_s": timeout}


def run(t: Topology, overrides: platform.Overrides, ops: list[str], sizes: list[int], selector: str,
        wanmpi: bool, send_overhead: float | None, iters: int, json_path: str | None, timeout: float,
        start: str = "clock", shared_from: int = 0, simgrid: Path | None = None) -> int:
    """Build, simulate collbench, print the table and write the result document
    (sizes from `shared_from` up in buffers the ranks share, not checked)."""
    started_iso, started = now_iso(), time.monotonic()
    sim, overhead = prepared(t, overrides, send_overhead)
    args = ["--ops", ",".join(ops), "--sizes", ",".join(map(str, sizes)), "--iters", str(iters), "--warmup", "1",
            "--start", start, *(["--shared-from", str(shared_from)] if shared_from else [])]
    record = simulate_case(sim, "collbench", selector, wanmpi, overhead, program("collbench", wanmpi), args, timeout,
                           nic_latency_us=overrides.nic_latency, simgrid=simgrid)
    results = results_of(sim, record, overrides.nic_latency)
    coll.print_table(results, [record.case.variant])
    settings = settings_of(sim, overrides, selector, wanmpi, overhead, timeout, simgrid, ops=ops, sizes=sizes,
                           iters=iters, start=start, shared_from=shared_from)
    document = finish("sim", t, settings, [record], coll.summary(results), started_iso, started, json_path)
    return exit_status(document)


def run_kernel(t: Topology, overrides: platform.Overrides, kernel: str, klass: str, selector: str, wanmpi: bool,
               send_overhead: float | None, json_path: str | None, timeout: float, simgrid: Path | None = None) -> int:
    """Build, simulate one kernel of bench/patterns.c with the suite's
    arguments for `klass` (its message size and iterations; the program
    runs one untimed iteration first), print its time, write the document."""
    started_iso, started = now_iso(), time.monotonic()
    sim, overhead = prepared(t, overrides, send_overhead)
    args = SUITE_KERNELS[kernel].args[klass]
    record = simulate_case(sim, kernel, selector, wanmpi, overhead, program("patterns", wanmpi), args, timeout,
                           params=(("class", klass),), nic_latency_us=overrides.nic_latency, simgrid=simgrid)
    summary = kernel_summary(record, klass)
    for row in summary:
        print(f"{row['kernel']} class {klass}, one-way delay {row['delay_ms']:g} ms, {row['variant']}: "
              f"{row['seconds']:.4f} s for {row['iters']} iterations, {row['per_iter_s']:.4f} s each")
    settings = settings_of(sim, overrides, selector, wanmpi, overhead, timeout, simgrid,
                           **{"kernel": kernel, "class": klass, "args": args})
    document = finish("sim", t, settings, [record], summary, started_iso, started, json_path)
    return exit_status(document)


def kernel_summary(record: Record, klass: str) -> list[dict]:
    """The kernel's JSON line as a summary row, with the case's variant and delay."""
    if not record.ok:
        return []
    row = record.metrics["rows"][-1]
    return [{"kernel": row["kernel"], "class": klass, "variant": record.case.variant, "delay_ms": record.case.delay_ms,
             "ranks": row["ranks"], "bytes": row["bytes"], "iters": row["iters"], "seconds": row["seconds"],
             "per_iter_s": row["per_iter_s"], "check": row["check"]}]


def results_of(t: Topology, record: Record, nic_latency_us: int) -> list[coll.Result]:
    if not record.ok:
        return []
    nodes, path = list(t.nodes), platform.path_latency_s(nic_latency_us)
    return [coll.Result(record.case.delay_ms, record.case.variant, row["op"], row["bytes"], row["ranks"],
                        row["iters"], row["median_s"], row["min_s"],
                        lower_bound(t, row["op"], row["bytes"], nodes, record.case.delay_ms, path), 0, 0)
            for row in record.metrics["rows"]]


def clean_leftovers() -> list[str]:
    """`wanmpi clean`'s part for the simulator: every smpimain of ours whose
    smpirun is gone (an orphan: its parent is init, or its work directory was
    deleted), and work directories under build/smpi*/runs that no simulation
    uses any more. Returns what was removed."""
    removed, live_dirs = [], set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            if not cmdline or not cmdline[0].endswith(b"/smpimain") or b"/build/smpi" not in b" ".join(cmdline):
                continue
            cwd = os.readlink(proc / "cwd")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == 1 or cwd.endswith(" (deleted)"):
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                removed.append(f"simulation process {proc.name} (smpimain) whose smpirun is gone")
            except ProcessLookupError:
                pass
        else:
            live_dirs.add(cwd)
    if paths.REPO is not None:
        for runs in (paths.REPO / "build").glob("smpi*/runs"):
            for work in runs.iterdir():
                if work.is_dir() and str(work) not in live_dirs and time.time() - work.stat().st_mtime > 60:
                    shutil.rmtree(work, ignore_errors=True)
                    removed.append(f"simulation work directory {work}")
    return removed
