//! `udpprobe`: a UDP packet source and sink for measuring what a link loses
//! and how many packets per second it forwards (used by `wanmpi bench
//! emulator`). A Python sender tops out near the rates being measured; this
//! one hands the kernel batches of datagrams with `sendmmsg` and drains them
//! with `recvmmsg`.
//!
//! ```text
//! udpprobe send --to ADDR:PORT --size BYTES --run ID (--seconds S | --count N) [--pps N] [--batch N] [--gso on|off]
//! udpprobe recv --bind ADDR:PORT --run ID [--wait S] [--idle S] [--max-seconds S]
//! ```
//!
//! Every datagram starts with the run id and its sequence number (two
//! little-endian u64); the receiver counts distinct sequence numbers of its run
//! only, so stray or duplicated packets never count as delivered. `send` paces
//! to `--pps` (absent: as fast as the kernel takes them; paced, `--seconds`
//! means pps x seconds datagrams) and prints one JSON
//! line at the end; `recv` prints `{"ready":true}` once bound, then one JSON
//! line after `--idle` seconds without a packet (or `--wait` seconds without a
//! first one, or `--max-seconds`). Exit status 2 for a bad command line or a
//! failing system call, with `udpprobe: error: ...` on stderr.

use std::collections::HashMap;
use std::io::{self, Write};
use std::mem;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Run id and sequence number at the start of every datagram.
const HEADER: usize = 16;
/// Largest UDP payload over IPv4.
const MAX_PAYLOAD: usize = 65_507;
/// Largest message handed to UDP segmentation offload, and its segment limit.
const GSO_MAX_BYTES: usize = 65_000;
const GSO_MAX_SEGMENTS: usize = 64;
/// Paced sending sends what is due about this often.
const PACING_QUANTUM: Duration = Duration::from_micros(200);
/// Datagrams per recvmmsg call.
const RECV_BATCH: usize = 64;
/// Receive buffer asked for (SO_RCVBUFFORCE as root, else SO_RCVBUF).
const RCVBUF: libc::c_int = 32 << 20;
/// Highest sequence number the receiver tracks (a 32 MiB bitmap).
const MAX_TRACKED: u64 = 1 << 28;
/// How long one blocking receive waits before the idle checks run.
const RECV_TICK: Duration = Duration::from_millis(20);

const USAGE: &str = "usage: udpprobe send --to ADDR:PORT --size BYTES --run ID (--seconds S | --count N) [--pps N] [--batch N] [--gso on|off]\n       udpprobe recv --bind ADDR:PORT --run ID [--wait S] [--idle S] [--max-seconds S]";

/// Distinct, duplicated and reordered sequence numbers of one run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    seen: Vec<u64>,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Datagrams whose sequence number had already been received.
    pub duplicates: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// Sequence numbers beyond `MAX_TRACKED` (not counted as unique).
    pub untracked: u64,
    /// Highest sequence number received plus one.
    pub next_expected: u64,
}

impl Tally {
    /// Counts one received sequence number.
    pub fn record(&mut self, seq: u64) {
        if seq >= MAX_TRACKED {
            self.untracked += 1;
            return;
        }
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize((word + 1).next_power_of_two(), 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[word] |= 1 << bit;
        self.unique += 1;
        if seq < self.next_expected {
            self.reordered += 1;
        } else {
            self.next_expected = seq + 1;
        }
    }
}

/// Packets due by `elapsed` at `pps` (the first one at time zero), capped at `limit`.
pub fn due(elapsed: Duration, pps: f64, sent: u64, limit: u64) -> u64 {
    let scheduled = (elapsed.as_secs_f64() * pps).floor() as u64 + 1;
    scheduled.saturating_sub(sent).min(limit)
}

/// When packet number `seq` is due at `pps`.
pub fn due_at(seq: u64, pps: f64) -> Duration {
    Duration::from_secs_f64(seq as f64 / pps)
}

/// Writes the header of datagram `seq` of run `run`.
pub fn stamp(buf: &mut [u8], run: u64, seq: u64) {
    buf[..8].copy_from_slice(&run.to_le_bytes());
    buf[8..HEADER].copy_from_slice(&seq.to_le_bytes());
}

/// Reads (run, seq) from a datagram, None if it is too short.
pub fn read_stamp(buf: &[u8]) -> Option<(u64, u64)> {
    if buf.len() < HEADER {
        return None;
    }
    let run = u64::from_le_bytes(buf[..8].try_into().ok()?);
    let seq = u64::from_le_bytes(buf[8..HEADER].try_into().ok()?);
    Some((run, seq))
}

#[derive(Debug)]
struct Args(HashMap<String, String>);

impl Args {
    fn parse(args: &[String], known: &[&str]) -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (arg.as_str(), None),
            };
            let name = flag
                .strip_prefix("--")
                .filter(|n| known.contains(n))
                .ok_or_else(|| format!("unknown argument {arg:?}"))?;
            let value = match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| format!("{flag} needs a value"))?,
            };
            if map.insert(name.to_string(), value).is_some() {
                return Err(format!("{flag} given twice"));
            }
        }
        Ok(Args(map))
    }

    fn get<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        self.0
            .get(name)
            .map(|v| v.parse().map_err(|_| format!("--{name}: cannot read {v:?}")))
            .transpose()
    }

    fn need<T: std::str::FromStr>(&self, name: &str) -> Result<T, String> {
        self.get(name)?.ok_or_else(|| format!("--{name} is required"))
    }
}

fn positive(name: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("--{name} must be a positive number (got {v})"))
    }
}

fn os_error(call: &str) -> String {
    format!("{call}: {}", io::Error::last_os_error())
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// What `send` was asked to do, checked.
struct SendPlan {
    to: SocketAddrV4,
    size: usize,
    run: u64,
    pps: Option<f64>,
    batch: usize,
    gso: bool,
    /// Datagrams to send at most.
    limit: u64,
    /// Unpaced `--seconds`: how long to send.
    duration: Option<Duration>,
}

impl SendPlan {
    fn parse(args: &Args) -> Result<Self, String> {
        let to: SocketAddrV4 = args.need("to")?;
        let size: usize = args.need("size")?;
        let run: u64 = args.need("run")?;
        let seconds = args.get::<f64>("seconds")?.map(|s| positive("seconds", s)).transpose()?;
        let count: Option<u64> = args.get("count")?;
        let pps = args.get::<f64>("pps")?.map(|p| positive("pps", p)).transpose()?;
        let batch: usize = args.get("batch")?.unwrap_or(32);
        let gso = match args.get::<String>("gso")?.as_deref() {
            None | Some("off") => false,
            Some("on") => true,
            Some(v) => return Err(format!("--gso: expected on or off (got {v:?})")),
        };
        if !(HEADER..=MAX_PAYLOAD).contains(&size) {
            return Err(format!("--size must be {HEADER}..{MAX_PAYLOAD} bytes of UDP payload (got {size})"));
        }
        if seconds.is_none() && count.is_none() {
            return Err("give --seconds or --count".into());
        }
        if !(1..=1024).contains(&batch) {
            return Err(format!("--batch must be 1..1024 (got {batch})"));
        }
        // Paced for a duration: a fixed number of datagrams, so a sender that was
        // short of CPU catches up (and takes longer) instead of sending fewer.
        let limit = match (count, pps, seconds) {
            (Some(c), _, _) => c,
            (None, Some(p), Some(s)) => (p * s).ceil() as u64,
            _ => u64::MAX,
        };
        let duration = match (count, pps) {
            (None, None) => seconds.map(Duration::from_secs_f64),
            _ => None,
        };
        Ok(SendPlan { to, size, run, pps, batch, gso, limit, duration })
    }
}

/// A UDP socket connected to `to`, and how many datagrams one message carries
/// (several with segmentation offload).
fn open_sender(to: SocketAddrV4, size: usize, gso: bool) -> Result<(UdpSocket, usize), String> {
    let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("bind: {e}"))?;
    socket.connect(to).map_err(|e| format!("connect {to}: {e}"))?;
    // SAFETY: plain prctl; a finer timer slack only makes pacing sleeps shorter.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    // With UDP segmentation offload one message carries several datagrams that
    // the kernel splits every `size` bytes: fewer trips through the socket layer.
    let per_msg = if gso { (GSO_MAX_BYTES / size).clamp(1, GSO_MAX_SEGMENTS) } else { 1 };
    if per_msg > 1 {
        let seg = size as libc::c_int;
        // SAFETY: setsockopt reads one c_int we own.
        let r = unsafe {
            libc::setsockopt(socket.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT, (&seg as *const libc::c_int).cast(),
                             mem::size_of::<libc::c_int>() as libc::socklen_t)
        };
        if r != 0 {
            return Err(os_error("setsockopt UDP_SEGMENT"));
        }
    }
    Ok((socket, per_msg))
}

/// The messages of one `sendmmsg` call: `batch` buffers of `per_msg`
/// datagrams of `size` bytes each, and how many datagrams each message holds.
struct SendBatch {
    size: usize,
    per_msg: usize,
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    in_msg: Vec<u64>,
}

impl SendBatch {
    fn new(batch: usize, size: usize, per_msg: usize) -> Self {
        let mut bufs = vec![vec![0u8; size * per_msg]; batch];
        let iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        // SAFETY: zeroed mmsghdr is valid (null name, no control data).
        let msgs: Vec<libc::mmsghdr> = (0..batch).map(|_| unsafe { mem::zeroed() }).collect();
        SendBatch { size, per_msg, bufs, iovs, msgs, in_msg: vec![0u64; batch] }
    }

    /// Stamps datagrams `next..next + n` of run `run` into the messages;
    /// returns how many messages they fill.
    fn fill(&mut self, run: u64, next: u64, n: u64) -> usize {
        let (size, per_msg) = (self.size, self.per_msg);
        let (mut seq, mut filled) = (next, 0usize);
        while seq < next + n {
            let k = (next + n - seq).min(per_msg as u64);
            for j in 0..k as usize {
                stamp(&mut self.bufs[filled][j * size..], run, seq + j as u64);
            }
            self.iovs[filled].iov_len = k as usize * size;
            self.msgs[filled].msg_hdr.msg_iov = &mut self.iovs[filled];
            self.msgs[filled].msg_hdr.msg_iovlen = 1;
            self.in_msg[filled] = k;
            seq += k;
            filled += 1;
        }
        filled
    }
}

/// What `send` did.
#[derive(Default)]
struct SendCount {
    sent: u64,
    skipped: u64,
    errors: u64,
    last_error: String,
}

/// Sends the plan's datagrams through `batch`, paced from `start` if asked,
/// until the limit or the duration.
fn blast(plan: &SendPlan, fd: libc::c_int, batch: &mut SendBatch, start: Instant) -> SendCount {
    let per_call = (plan.batch * batch.per_msg) as u64;
    // Paced: wake once per quantum, not once per packet (a wake-up costs more
    // than a datagram at these rates).
    let quantum = plan.pps.map_or(1, |p| ((p * PACING_QUANTUM.as_secs_f64()) as u64).clamp(1, per_call));
    let mut count = SendCount::default();
    loop {
        let elapsed = start.elapsed();
        let next = count.sent + count.skipped;
        if next >= plan.limit || plan.duration.is_some_and(|d| elapsed >= d) {
            break;
        }
        let room = per_call.min(plan.limit - next);
        let n = match plan.pps {
            Some(p) => due(elapsed, p, next, room),
            None => room,
        };
        let burst = quantum.min(room);
        if n < burst {
            let wake = due_at(next + burst - 1, plan.pps.unwrap_or(1.0));
            std::thread::sleep(wake.saturating_sub(start.elapsed()));
            continue;
        }
        let filled = batch.fill(plan.run, next, n);
        // SAFETY: msgs[..filled] point at live buffers at least iov_len long.
        let r = unsafe { libc::sendmmsg(fd, batch.msgs.as_mut_ptr(), filled as libc::c_uint, 0) };
        if r >= 0 {
            count.sent += batch.in_msg[..r as usize].iter().sum::<u64>();
            continue;
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        // ENOBUFS, ECONNREFUSED (an ICMP from the far end), ...: skip one message and go on.
        count.skipped += batch.in_msg[0];
        count.errors += batch.in_msg[0];
        count.last_error = e.to_string();
    }
    count
}

fn send(args: &Args) -> Result<String, String> {
    let plan = SendPlan::parse(args)?;
    let (socket, per_msg) = open_sender(plan.to, plan.size, plan.gso)?;
    let mut batch = SendBatch::new(plan.batch, plan.size, per_msg);
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let SendCount { sent, errors, last_error, .. } = blast(&plan, socket.as_raw_fd(), &mut batch, start);
    let seconds = start.elapsed().as_secs_f64();
    let size = plan.size;
    Ok(format!(
        "{{\"sent\":{sent},\"send_errors\":{errors},\"last_error\":{last_error:?},\"payload_bytes\":{size},\
         \"seconds\":{seconds:.6},\"cpu_seconds\":{:.3}}}",
        cpu_seconds() - cpu0
    ))
}

/// A UDP socket bound to `bind` with a large receive buffer, whose receives
/// time out every `RECV_TICK`.
fn open_receiver(bind: SocketAddr) -> Result<UdpSocket, String> {
    let socket = UdpSocket::bind(bind).map_err(|e| format!("bind {bind}: {e}"))?;
    socket.set_read_timeout(Some(RECV_TICK)).map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    let fd = socket.as_raw_fd();
    let size = mem::size_of::<libc::c_int>() as libc::socklen_t;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt reads one c_int we own.
        let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, opt, (&RCVBUF as *const libc::c_int).cast(), size) };
        if r == 0 {
            break;
        }
    }
    Ok(socket)
}

/// The messages of one `recvmmsg` call: `RECV_BATCH` buffers of the largest
/// payload.
struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    _iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl RecvBatch {
    fn new() -> Self {
        let mut bufs = vec![vec![0u8; MAX_PAYLOAD]; RECV_BATCH];
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        // SAFETY: zeroed mmsghdr is valid (null name, no control data).
        let mut msgs: Vec<libc::mmsghdr> = (0..RECV_BATCH).map(|_| unsafe { mem::zeroed() }).collect();
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        RecvBatch { bufs, _iovs: iovs, msgs }
    }
}

/// What `recv` counted of its run, and when its first and last datagrams came.
#[derive(Default)]
struct RecvCount {
    tally: Tally,
    received: u64,
    foreign: u64,
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl RecvCount {
    /// Counts the `r` datagrams a `recvmmsg` call left in `batch`.
    fn record(&mut self, batch: &RecvBatch, r: usize, run: u64) {
        let now = Instant::now();
        for (m, b) in batch.msgs.iter().zip(batch.bufs.iter()).take(r) {
            let len = m.msg_len as usize;
            match read_stamp(&b[..len]) {
                Some((id, seq)) if id == run => {
                    self.received += 1;
                    self.bytes += len as u64;
                    self.tally.record(seq);
                }
                _ => self.foreign += 1,
            }
        }
        if self.received > 0 {
            self.first.get_or_insert(now);
            self.last = Some(now);
        }
    }
}

fn recv(args: &Args) -> Result<String, String> {
    let bind: SocketAddr = args.need("bind")?;
    let run: u64 = args.need("run")?;
    let wait = Duration::from_secs_f64(positive("wait", args.get("wait")?.unwrap_or(10.0))?);
    let idle = Duration::from_secs_f64(positive("idle", args.get("idle")?.unwrap_or(1.0))?);
    let max = Duration::from_secs_f64(positive("max-seconds", args.get("max-seconds")?.unwrap_or(600.0))?);
    let socket = open_receiver(bind)?;
    let fd = socket.as_raw_fd();
    println!("{{\"ready\":true}}");
    io::stdout().flush().map_err(|e| format!("stdout: {e}"))?;
    let mut batch = RecvBatch::new();
    let mut count = RecvCount::default();
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    loop {
        let now = Instant::now();
        let quiet = match count.last {
            Some(t) => now - t >= idle,
            None => now - start >= wait,
        };
        if quiet || now - start >= max {
            break;
        }
        // SAFETY: msgs point at RECV_BATCH live buffers of MAX_PAYLOAD bytes.
        let r = unsafe {
            libc::recvmmsg(fd, batch.msgs.as_mut_ptr(), RECV_BATCH as libc::c_uint, libc::MSG_WAITFORONE, std::ptr::null_mut())
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => continue,
                _ => return Err(os_error("recvmmsg")),
            }
        }
        count.record(&batch, r as usize, run);
    }
    let span = match (count.first, count.last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    let RecvCount { tally, received, foreign, bytes, .. } = count;
    Ok(format!(
        "{{\"received\":{received},\"unique\":{},\"duplicates\":{},\"reordered\":{},\"untracked\":{},\
         \"foreign\":{foreign},\"payload_bytes\":{bytes},\"seconds\":{span:.6},\"cpu_seconds\":{:.3}}}",
        tally.unique,
        tally.duplicates,
        tally.reordered,
        tally.untracked,
        cpu_seconds() - cpu0
    ))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        Some("send") => Args::parse(&argv[1..], &["to", "size", "run", "seconds", "count", "pps", "batch", "gso"])
            .and_then(|a| send(&a)),
        Some("recv") => Args::parse(&argv[1..], &["bind", "run", "wait", "idle", "max-seconds"])
            .and_then(|a| recv(&a)),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(format!("expected `send` or `recv`\n{USAGE}")),
    };
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("udpprobe: error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_distinct_duplicate_and_reordered_sequence_numbers() {
        let mut t = Tally::default();
        for seq in [0, 1, 3, 2, 3, 5, 4, 200] {
            t.record(seq);
        }
        assert_eq!((t.unique, t.duplicates, t.reordered, t.next_expected), (7, 1, 2, 201));
        t.record(MAX_TRACKED);
        assert_eq!((t.unique, t.untracked), (7, 1));
    }

    #[test]
    fn pacing_schedules_the_first_packet_at_once_and_then_one_per_period() {
        assert_eq!(due(Duration::ZERO, 1000.0, 0, 32), 1);
        assert_eq!(due(Duration::from_millis(10), 1000.0, 1, 32), 10);
        assert_eq!(due(Duration::from_millis(100), 1000.0, 0, 32), 32);
        assert_eq!(due(Duration::from_millis(5), 1000.0, 6, 32), 0);
        assert_eq!(due_at(6, 1000.0), Duration::from_millis(6));
    }

    #[test]
    fn stamp_round_trips_and_short_datagrams_are_foreign() {
        let mut b = [0u8; 20];
        stamp(&mut b, 7, 42);
        assert_eq!(read_stamp(&b), Some((7, 42)));
        assert_eq!(read_stamp(&b[..10]), None);
    }

    #[test]
    fn bad_command_lines_are_named() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Args::parse(&args(&["--nope", "1"]), &["to"]).unwrap_err().contains("unknown argument"));
        assert!(Args::parse(&args(&["--to"]), &["to"]).unwrap_err().contains("needs a value"));
        let a = Args::parse(&args(&["--to", "1.2.3.4:5", "--size", "8", "--run", "1", "--count", "1"]),
                            &["to", "size", "run", "count"]).unwrap();
        assert!(send(&a).unwrap_err().contains("--size must be"));
    }
}
