//! Privileged end-to-end tests: real TUN devices in two network namespaces
//! (`wemt-a`, `wemt-b`), the built `wanem` binary between them, ping and a
//! TCP transfer across. They need root and /dev/net/tun, so they are ignored
//! by default. Run them with:
//!
//! ```text
//! sudo cargo test --release -p wanem --test netns -- --ignored --test-threads=1 --nocapture
//! ```
//!
//! Namespaces and temporary files are removed on success and on failure.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const NS_A: &str = "wemt-a";
const NS_B: &str = "wemt-b";
const DEV: &str = "wan0";
const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// TCP payload per 1500-byte IP packet (20 IP + 20 TCP + 12 timestamp option).
const PAYLOAD_SHARE: f64 = 1448.0 / 1500.0;

/// The tests share namespace names, so they must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"))
}

fn must(args: &[&str]) {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces joined by nothing but a TUN device each; deleted on drop.
struct Namespaces;

impl Namespaces {
    fn create() -> Namespaces {
        for ns in [NS_A, NS_B] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
        let guard = Namespaces;
        for (ns, addr) in [(NS_A, ADDR_A), (NS_B, ADDR_B)] {
            must(&["ip", "netns", "add", ns]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            must(&["ip", "netns", "exec", ns, "ip", "tuntap", "add", "dev", DEV, "mode", "tun"]);
            must(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            must(&["ip", "-n", ns, "addr", "add", &format!("{addr}/24"), "dev", DEV]);
            must(&["ip", "-n", ns, "link", "set", DEV, "mtu", "1500", "up"]);
        }
        guard
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [NS_A, NS_B] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

/// A running wanem with its scratch directory; stopped and removed on drop.
struct Wanem {
    child: Child,
    dir: PathBuf,
    control: PathBuf,
}

fn direction(rate_bps: u64, delay_us: u64, queue_bytes: u64, seed: u64) -> Value {
    json!({"rate_bps": rate_bps, "delay_us": delay_us, "queue_bytes": queue_bytes,
           "loss": 0.0, "seed": seed, "up": true})
}

impl Wanem {
    fn start(rate_bps: u64, delay_us: u64, queue_bytes: u64, monitor: bool, rt: bool) -> Wanem {
        let dir = std::env::temp_dir().join(format!("wemt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let config = json!({"links": [{
            "name": "a-b",
            "a": {"netns": format!("/run/netns/{NS_A}"), "dev": DEV},
            "b": {"netns": format!("/run/netns/{NS_B}"), "dev": DEV},
            "mtu": 1500,
            "a_to_b": direction(rate_bps, delay_us, queue_bytes, 1),
            "b_to_a": direction(rate_bps, delay_us, queue_bytes, 2),
        }]});
        let config_path = dir.join("wanem.json");
        std::fs::write(&config_path, config.to_string()).expect("write config");
        let control = dir.join("control.sock");
        let bin = env!("CARGO_BIN_EXE_wanem");
        let mut cmd = if rt {
            let mut c = Command::new("chrt");
            c.args(["-f", "50", bin]);
            c
        } else {
            Command::new(bin)
        };
        cmd.arg("--config").arg(&config_path).arg("--control").arg(&control);
        if monitor {
            cmd.arg("--monitor").arg(dir.join("start.csv"));
        }
        let child = cmd.stderr(Stdio::inherit()).spawn().expect("spawn wanem");
        let w = Wanem { child, dir, control };
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(&w.control).is_err() {
            assert!(Instant::now() < deadline, "control socket never appeared");
            thread::sleep(Duration::from_millis(20));
        }
        w
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn request(&self, req: Value) -> Value {
        let mut s = UnixStream::connect(&self.control).expect("connect control");
        writeln!(s, "{req}").expect("send");
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).expect("reply");
        serde_json::from_str(&line).expect("reply is JSON")
    }

    fn ok(&self, req: Value) {
        let reply = self.request(req.clone());
        assert_eq!(reply["ok"], true, "{req} -> {reply}");
    }

    fn counters(&self, dir: &str) -> Value {
        self.request(json!({"cmd": "show"}))["links"][0][dir]["counters"].clone()
    }

    /// SIGTERM; returns the exit status code.
    fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "wanem ignored SIGTERM");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Wanem {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Ping summary: per-packet RTTs (ms, sorted, as printed: 3 significant
/// digits) and the precise `min/avg/max/mdev` line.
struct Pings {
    rtts: Vec<f64>,
    summary: Option<[f64; 4]>,
    /// What ping printed, for failure messages.
    output: String,
}

/// Pings b from a `count` times, 50 ms apart.
fn ping(count: u32) -> Pings {
    let out = run(&[
        "ip", "netns", "exec", NS_A, "ping", "-n", "-c", &count.to_string(), "-i", "0.05", "-W", "2",
        &ADDR_B.to_string(),
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").parse().ok())
        .collect();
    rtts.sort_by(f64::total_cmp);
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .and_then(|v| {
            // "1.0/2.0/3.0/0.5 ms", then ", pipe 2" when replies overlapped
            let n: Vec<f64> = v
                .split(" ms")
                .next()?
                .split('/')
                .filter_map(|x| x.parse().ok())
                .collect();
            n.try_into().ok()
        });
    Pings {
        rtts,
        summary,
        output: text,
    }
}

fn ping_rtts(count: u32) -> Vec<f64> {
    ping(count).rtts
}

fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

/// Sorted ping RTTs against the emulated RTT `want_ms`: none early, the
/// fastest within 0.5 ms, the median within 5 ms.
fn assert_on_time(sorted: &[f64], want_ms: f64) {
    assert!(sorted[0] >= want_ms, "faster than the delay {want_ms} ms: {sorted:?}");
    assert!(sorted[0] - want_ms < 0.5, "even the fastest ping is late for {want_ms} ms: {sorted:?}");
    assert!(median(sorted) - want_ms < 5.0, "median RTT far above {want_ms} ms: {sorted:?}");
}

fn enter_netns(ns: &str) {
    let f = File::open(format!("/run/netns/{ns}")).expect("open netns");
    // SAFETY: setns on a valid fd; changes only this thread's namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

/// Sends TCP from a to b for `warmup + measure`; returns goodput (bit/s)
/// counted at the receiver during `measure`.
fn tcp_goodput(warmup: Duration, measure: Duration) -> f64 {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = thread::spawn(move || {
        enter_netns(NS_B);
        let listener = TcpListener::bind(SocketAddrV4::new(ADDR_B, 5001)).expect("bind");
        ready_tx.send(()).expect("signal ready");
        let (mut conn, _) = listener.accept().expect("accept");
        conn.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut buf = vec![0u8; 256 * 1024];
        let start = Instant::now();
        let mut counted = 0u64;
        loop {
            let n = conn.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            let t = start.elapsed();
            if t >= warmup && t < warmup + measure {
                counted += n as u64;
            }
            if t >= warmup + measure {
                break;
            }
        }
        counted as f64 * 8.0 / measure.as_secs_f64()
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).expect("receiver ready");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_sender = stop.clone();
    let sender = thread::spawn(move || {
        enter_netns(NS_A);
        let mut conn = TcpStream::connect(SocketAddrV4::new(ADDR_B, 5001)).expect("connect");
        conn.set_write_timeout(Some(Duration::from_secs(2))).expect("timeout");
        let chunk = vec![0x5au8; 64 * 1024];
        while !stop_sender.load(Ordering::Relaxed) {
            if conn.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let goodput = receiver.join().expect("receiver");
    stop.store(true, Ordering::Relaxed);
    sender.join().expect("sender");
    goodput
}

/// (utime, stime) of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_comm = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    (fields[11].parse().expect("utime"), fields[12].parse().expect("stime"))
}

fn csv_sums(path: &Path, dir: &str) -> (u64, u64, u64, usize) {
    let text = std::fs::read_to_string(path).expect("monitor csv");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time_ms,link,dir,bytes,packets,drops,queue_bytes"));
    let (mut bytes, mut packets, mut drops, mut rows) = (0, 0, 0, 0);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7, "{line}");
        if f[2] == dir {
            bytes += f[3].parse::<u64>().expect("bytes");
            packets += f[4].parse::<u64>().expect("packets");
            drops += f[5].parse::<u64>().expect("drops");
            rows += 1;
        }
    }
    (bytes, packets, drops, rows)
}

#[test]
#[ignore = "needs root, /dev/net/tun and network namespaces"]
fn wanem_delays_limits_and_obeys_control_between_namespaces() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ns = Namespaces::create();
    let rate = 50_000_000;
    // At real-time priority, as the testbed runs it (python/wanmpi/emulator.py
    // tune()). On a host with 55 % of both CPUs taken the median was 3-6 ms
    // late at either priority: the kernel's own path waits there too.
    let mut w = Wanem::start(rate, 10_000, 1_000_000, true, true);

    // RTT = 2 x 10 ms one-way: never early, the fastest ping on time, the
    // median not grossly late. (A CI host with 1-9 % steal delayed the median
    // by 3.6 ms while the fastest pings stayed on time; the accuracy on a
    // quiet host is measured by `wanmpi bench emulator`.)
    let rtts = ping_rtts(20);
    assert!(rtts.len() >= 19, "lost pings: {rtts:?}");
    assert_on_time(&rtts, 20.0);

    // A delay change through the control socket takes effect.
    w.ok(json!({"cmd": "set", "link": "a-b", "dir": "both", "delay_us": 2500}));
    let rtts = ping_rtts(20);
    assert_on_time(&rtts, 5.0);

    // Link down drops everything, counted; up again restores it.
    w.ok(json!({"cmd": "set", "link": "a-b", "dir": "a_to_b", "up": false}));
    assert!(ping_rtts(5).is_empty());
    assert!(w.counters("a_to_b")["drop_down"].as_u64() >= Some(5));
    w.ok(json!({"cmd": "set", "link": "a-b", "dir": "a_to_b", "up": true, "loss": 1.0}));
    assert!(ping_rtts(5).is_empty());
    assert!(w.counters("a_to_b")["drop_loss"].as_u64() >= Some(5));
    w.ok(json!({"cmd": "set", "link": "a-b", "dir": "a_to_b", "loss": 0.0}));
    assert_eq!(ping_rtts(5).len(), 5);

    // Throughput is held to the rate; the monitor adds up to the counters.
    // (One BDP of queue at 50 Mbit/s and 5 ms RTT = 31250 B.)
    w.ok(json!({"cmd": "set", "link": "a-b", "dir": "both", "queue_bytes": 31_250}));
    let csv = w.dir.join("transfer.csv");
    w.ok(json!({"cmd": "reset_counters"}));
    w.ok(json!({"cmd": "monitor", "file": csv.to_str().expect("utf-8 path")}));
    let goodput = tcp_goodput(Duration::from_millis(500), Duration::from_millis(1500));
    let ceiling = rate as f64 * PAYLOAD_SHARE;
    eprintln!("goodput {:.1} Mbit/s (ceiling {:.1})", goodput / 1e6, ceiling / 1e6);
    assert!(goodput <= ceiling * 1.01, "goodput {goodput} above the rate");
    assert!(goodput >= ceiling * 0.75, "goodput {goodput} far below the rate");
    thread::sleep(Duration::from_millis(300));
    w.ok(json!({"cmd": "monitor", "file": null}));
    for dir in ["a_to_b", "b_to_a"] {
        let c = w.counters(dir);
        let (bytes, packets, drops, rows) = csv_sums(&csv, dir);
        assert!(rows > 1500, "{rows} rows");
        assert_eq!(Some(bytes), c["dep_bytes"].as_u64(), "{dir}");
        assert_eq!(Some(packets), c["dep_packets"].as_u64(), "{dir}");
        let d = ["drop_queue", "drop_loss", "drop_down"]
            .iter()
            .map(|k| c[k].as_u64().expect("counter"))
            .sum::<u64>();
        assert_eq!(drops, d, "{dir}");
        // Drained: everything that departed was written out.
        assert_eq!(c["tx_packets"], c["dep_packets"], "{dir}");
        assert_eq!(c["queue_bytes"], 0);
    }

    // Malformed input gets an error and the connection stays usable.
    let mut s = UnixStream::connect(&w.control).expect("connect");
    writeln!(s, "not json\n{{\"cmd\":\"show\"}}").expect("send");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("reply");
    assert!(line.contains("\"ok\":false"), "{line}");
    line.clear();
    r.read_line(&mut line).expect("reply");
    assert!(line.contains("\"ok\":true"), "{line}");

    // SIGTERM: exit 0, socket removed, the startup monitor flushed.
    assert_eq!(w.terminate(), Some(0));
    assert!(!w.control.exists(), "control socket left behind");
    let start_csv = std::fs::read_to_string(w.dir.join("start.csv")).expect("start csv");
    assert!(start_csv.lines().count() > 1);
}

#[test]
#[ignore = "needs root, /dev/net/tun and network namespaces"]
fn wanem_refuses_a_missing_device_with_exit_code_2() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ns = Namespaces::create();
    let dir = std::env::temp_dir().join(format!("wemt-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = json!({"links": [{
        "name": "a-b",
        "a": {"netns": format!("/run/netns/{NS_A}"), "dev": DEV},
        "b": {"netns": format!("/run/netns/{NS_B}"), "dev": "nosuchdev"},
        "a_to_b": direction(1_000_000, 0, 1500, 1),
        "b_to_a": direction(1_000_000, 0, 1500, 2),
    }]});
    let path = dir.join("c.json");
    std::fs::write(&path, config.to_string()).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_wanem"))
        .arg("--config")
        .arg(&path)
        .arg("--control")
        .arg(dir.join("c.sock"))
        .output()
        .expect("run wanem");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("wanem: error: link a-b end b: device nosuchdev not found"),
        "{stderr}"
    );
}

/// Prints the numbers for the docs: idle RTT per delay, goodput at
/// 200 Mbit/s with a 1 BDP queue, wanem CPU use. Checks only sanity.
#[test]
#[ignore = "needs root; a measurement, run with --nocapture"]
fn measure_rtt_goodput_and_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ns = Namespaces::create();
    for rt in [false, true] {
        let rate = 200_000_000;
        let w = Wanem::start(rate, 1_000, 100_000, false, rt);
        let label = if rt { "SCHED_FIFO 50" } else { "SCHED_OTHER" };
        for delay_ms in [0u64, 1, 5, 10, 20] {
            w.ok(json!({"cmd": "set", "link": "a-b", "dir": "both", "delay_us": delay_ms * 1000}));
            let p = ping(40);
            let [min, avg, max, mdev] = p
                .summary
                .unwrap_or_else(|| panic!("[{label}] {delay_ms} ms: no ping summary: {}", p.output));
            eprintln!(
                "[{label}] one-way {delay_ms:2} ms: RTT min {min:.3} avg {avg:.3} max {max:.3} mdev {mdev:.3} ms; \
                 avg - 2 x delay = {:.3} ms",
                avg - 2.0 * delay_ms as f64
            );
            assert!(min >= 2.0 * delay_ms as f64);
        }
        // 10 ms one-way: BDP = 200 Mbit/s x 20 ms = 500 kB.
        let bdp = rate / 8 * 20 / 1000;
        w.ok(json!({"cmd": "set", "link": "a-b", "dir": "both", "delay_us": 10_000, "queue_bytes": bdp}));
        w.ok(json!({"cmd": "reset_counters"}));
        let ticks = cpu_ticks(w.pid());
        let t0 = Instant::now();
        let goodput = tcp_goodput(Duration::from_millis(1000), Duration::from_millis(3000));
        let wall = t0.elapsed().as_secs_f64();
        // SAFETY: sysconf is always safe to call.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let (user, sys) = cpu_ticks(w.pid());
        let user = (user - ticks.0) as f64 / hz / wall;
        let sys = (sys - ticks.1) as f64 / hz / wall;
        let c = w.counters("a_to_b");
        let sent = c["tx_packets"].as_u64().unwrap_or(0).max(1) as f64;
        eprintln!(
            "[{label}] 200 Mbit/s, 10 ms, queue {bdp} B: goodput {:.1} Mbit/s (ceiling {:.1}), wanem CPU {:.0}% of one core \
             (user {:.0}%, system {:.0}%), \
             a_to_b drop_queue {} late_200us {} late_1ms {} mean lateness {:.1} us",
            goodput / 1e6,
            rate as f64 * PAYLOAD_SHARE / 1e6,
            (user + sys) * 100.0,
            user * 100.0,
            sys * 100.0,
            c["drop_queue"],
            c["late_200us"],
            c["late_1ms"],
            c["late_sum_ns"].as_u64().unwrap_or(0) as f64 / sent / 1e3
        );
        assert!(goodput > 0.0);
    }
}
