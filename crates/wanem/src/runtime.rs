//! The runtime: one thread, one ppoll loop over every TUN fd, the control
//! socket and a signalfd. It reads packets in batches, feeds the core with
//! CLOCK_MONOTONIC nanoseconds, writes released packets to the far end and
//! sleeps until shortly before the next release and spins the rest, within a
//! CPU budget (see [`crate::spin`]). No locks.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Instant;

use thiserror::Error;

use crate::config::{Config, ConfigError, Dir};
use crate::control::{self, Request};
use crate::emulator::Emulator;
use crate::impair::{Packet, Verdict};
use crate::monitor::Bin;
use crate::spin::{SpinBudget, Wait};
use crate::sys::{self, NetnsHome, SignalFd, SysError, Tun};

/// Packets read from one TUN per loop iteration before releases are served.
const READ_BATCH: usize = 64;
/// A sleep longer than this ends `PRE_WAKE_NS` early and is finished by a
/// second, short sleep: a long sleep on an idle (virtual) CPU overshoots by
/// ~100 µs, a short one by ~15 µs (measured; see docs/wanem.md); the last
/// `SPIN_BEFORE_NS` are spun when the budget allows.
const PRE_WAKE_ABOVE_NS: u64 = 500_000;
/// How early a long sleep ends.
const PRE_WAKE_NS: u64 = 200_000;
/// Spare packet buffers kept for reuse.
const POOL_MAX: usize = 8192;
/// How often monitor rows are handed to the buffered writer.
const MONITOR_WRITE_NS: u64 = 10_000_000;
/// Buffer of the monitor CSV writer.
const MONITOR_BUFFER: usize = 256 * 1024;
/// Control clients served at once.
const MAX_CLIENTS: usize = 32;
/// Unsent reply bytes after which a client that does not read is dropped.
const MAX_CLIENT_OUTPUT: usize = 1 << 20;
/// Transmit failures logged to stderr before going quiet (counters go on).
const TX_ERRORS_LOGGED: u32 = 10;
/// The monitor CSV header.
pub const MONITOR_HEADER: &str = "time_ms,link,dir,bytes,packets,drops,queue_bytes";

/// Command-line options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Config JSON file.
    pub config: PathBuf,
    /// Control socket path.
    pub control: PathBuf,
    /// Monitor CSV to start writing at once.
    pub monitor: Option<PathBuf>,
}

/// Why wanem stopped with an error.
#[derive(Debug, Error)]
pub enum RunError {
    /// Invalid config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A TUN device could not be attached.
    #[error("link {link} end {end}: {source}")]
    Attach {
        /// Link name.
        link: String,
        /// `a` or `b`.
        end: &'static str,
        /// What failed.
        source: SysError,
    },
    /// Another process serves the control socket.
    #[error("control socket {0} is in use by a running process")]
    ControlInUse(PathBuf),
    /// The control path exists and is not a socket.
    #[error("control path {0} exists and is not a socket; not removing it")]
    ControlNotSocket(PathBuf),
    /// Creating the control socket failed.
    #[error("control socket {path}: {source}")]
    ControlBind {
        /// Socket path.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// The initial monitor file could not be created.
    #[error("monitor {path}: {source}")]
    MonitorOpen {
        /// CSV path.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// Signal setup failed.
    #[error(transparent)]
    Signal(SysError),
    /// Reading a TUN device failed (device deleted?).
    #[error("link {link} end {end}: read from {dev}: {source}")]
    TunRead {
        /// Link name.
        link: String,
        /// `a` or `b`.
        end: &'static str,
        /// Device name.
        dev: String,
        /// Underlying error.
        source: io::Error,
    },
    /// ppoll failed.
    #[error("ppoll: {0}")]
    Poll(io::Error),
}

impl RunError {
    /// 2 for errors before the loop started (config, devices, socket), 1 after.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::TunRead { .. } | RunError::Poll(_) => 1,
            _ => 2,
        }
    }
}

/// Removes the control socket file when dropped.
struct ControlPath(PathBuf);

impl Drop for ControlPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn bind_control(path: &Path) -> Result<(UnixListener, ControlPath), RunError> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(RunError::ControlNotSocket(path.to_path_buf()));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(RunError::ControlInUse(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(|source| RunError::ControlBind {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let bind_err = |source| RunError::ControlBind {
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    let guard = ControlPath(path.to_path_buf());
    listener.set_nonblocking(true).map_err(bind_err)?;
    Ok((listener, guard))
}

/// One connected control client.
struct Client {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    eof: bool,
    dead: bool,
}

impl Client {
    /// Dead, or the peer closed and every reply has been written.
    fn finished(&self) -> bool {
        self.dead || (self.eof && self.output.is_empty())
    }
}

/// The running monitor CSV.
struct MonitorFile {
    path: PathBuf,
    out: BufWriter<File>,
    next_write: u64,
}

fn create_monitor(path: &Path, now: u64) -> io::Result<MonitorFile> {
    let file = File::create(path)?;
    let mut out = BufWriter::with_capacity(MONITOR_BUFFER, file);
    writeln!(out, "{MONITOR_HEADER}")?;
    Ok(MonitorFile {
        path: path.to_path_buf(),
        out,
        next_write: now + MONITOR_WRITE_NS,
    })
}

struct Runtime {
    epoch: Instant,
    emu: Emulator,
    /// Per link: `[end a, end b]`.
    tuns: Vec<[Tun; 2]>,
    devs: Vec<[String; 2]>,
    listener: UnixListener,
    _control_path: ControlPath,
    clients: Vec<Client>,
    signals: SignalFd,
    monitor: Option<MonitorFile>,
    pool: Vec<Packet>,
    buffer_size: usize,
    bins: Vec<Vec<Bin>>,
    tx_errors: u32,
    pollfds: Vec<libc::pollfd>,
    spin: SpinBudget,
}

const END_NAMES: [&str; 2] = ["a", "b"];

/// Every link's TUN devices (`[end a, end b]`), their names, and the
/// largest MTU of any device or link (the packet buffer size).
type AttachedLinks = (Vec<[Tun; 2]>, Vec<[String; 2]>, u64);

/// Attaches every link's two TUN devices in their namespaces.
fn attach_links(config: &Config) -> Result<AttachedLinks, RunError> {
    let home = NetnsHome::open().map_err(|source| RunError::Attach {
        link: config.links[0].name.clone(),
        end: "a",
        source,
    })?;
    let mut tuns = Vec::with_capacity(config.links.len());
    let mut devs = Vec::with_capacity(config.links.len());
    let mut buffer_size = 0;
    for link in &config.links {
        let mut pair = Vec::with_capacity(2);
        for (end, e) in END_NAMES.iter().zip(link.ends()) {
            let tun = home
                .attach_tun(&e.netns, &e.dev)
                .map_err(|source| RunError::Attach {
                    link: link.name.clone(),
                    end,
                    source,
                })?;
            if tun.mtu > link.mtu {
                eprintln!(
                    "wanem: warning: link {} end {end}: device {} has MTU {} > config mtu {}",
                    link.name, e.dev, tun.mtu, link.mtu
                );
            }
            buffer_size = buffer_size.max(tun.mtu.max(link.mtu));
            pair.push(tun);
        }
        let b = pair.pop().expect("two ends");
        let a = pair.pop().expect("two ends");
        tuns.push([a, b]);
        devs.push([link.a.dev.clone(), link.b.dev.clone()]);
    }
    drop(home);
    Ok((tuns, devs, buffer_size))
}

/// Starts wanem and serves until SIGINT/SIGTERM.
///
/// # Errors
/// See [`RunError`]; [`RunError::exit_code`] tells startup from runtime errors.
pub fn run(opts: &Options) -> Result<(), RunError> {
    let config = Config::load(&opts.config)?;
    let (tuns, devs, buffer_size) = attach_links(&config)?;
    let signals = SignalFd::termination().map_err(RunError::Signal)?;
    if let Err(e) = sys::set_timer_slack(1) {
        eprintln!("wanem: warning: PR_SET_TIMERSLACK: {e}");
    }
    let (listener, control_path) = bind_control(&opts.control)?;
    let epoch = Instant::now();
    let mut rt = Runtime {
        epoch,
        emu: Emulator::new(&config, 0),
        tuns,
        devs,
        listener,
        _control_path: control_path,
        clients: Vec::new(),
        signals,
        monitor: None,
        pool: Vec::new(),
        buffer_size: usize::try_from(buffer_size).unwrap_or(65_535).max(1),
        bins: vec![Vec::new(); config.links.len() * 2],
        tx_errors: 0,
        pollfds: Vec::new(),
        spin: SpinBudget::new(0),
    };
    if let Some(path) = &opts.monitor {
        let now = rt.now();
        let m = create_monitor(path, now).map_err(|source| RunError::MonitorOpen {
            path: path.clone(),
            source,
        })?;
        rt.emu.start_monitor(now);
        rt.monitor = Some(m);
    }
    let names: Vec<&str> = config.links.iter().map(|l| l.name.as_str()).collect();
    eprintln!(
        "wanem: serving {} link(s) [{}]; control socket {}",
        names.len(),
        names.join(", "),
        opts.control.display()
    );
    let result = rt.serve();
    let now = rt.now();
    if let Err(e) = rt.stop_monitor(now) {
        eprintln!("wanem: error: {e}");
    }
    result
}

impl Runtime {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn recycle(&mut self, mut buf: Packet) {
        if self.pool.len() < POOL_MAX {
            buf.clear();
            self.pool.push(buf);
        }
    }

    fn serve(&mut self) -> Result<(), RunError> {
        loop {
            let now = self.now();
            self.release_due(now);
            self.write_monitor_rows(now, false);
            // Releases may be spun up to; monitor rows only need a sleep.
            let now = self.now();
            let mut timeout = match self.spin.wait(now, self.emu.next_wakeup(), |t| {
                if t > PRE_WAKE_ABOVE_NS {
                    t - PRE_WAKE_NS
                } else {
                    t
                }
            }) {
                Wait::Spin => Some(0),
                Wait::Sleep(t) => Some(t),
                Wait::Forever => None,
            };
            if let Some(m) = &self.monitor {
                let t = m.next_write.saturating_sub(now);
                timeout = Some(timeout.map_or(t, |w| w.min(t)));
            }
            self.build_pollfds();
            let ready = sys::ppoll(&mut self.pollfds, timeout).map_err(RunError::Poll)?;
            if ready == 0 {
                continue;
            }
            if self.pollfds[0].revents != 0 && self.signals.take().is_some() {
                return Ok(());
            }
            let now = self.now();
            for link in 0..self.tuns.len() {
                for end in 0..2 {
                    let revents = self.pollfds[2 + link * 2 + end].revents;
                    if revents != 0 {
                        self.read_tun(link, end, now, revents)?;
                    }
                }
            }
            if self.pollfds[1].revents != 0 {
                self.accept_clients();
            }
            let base = 2 + self.tuns.len() * 2;
            for i in 0..self.clients.len() {
                if self.pollfds.get(base + i).is_some_and(|p| p.revents != 0) {
                    self.serve_client(i);
                }
            }
            self.clients.retain(|c| !c.finished());
        }
    }

    fn build_pollfds(&mut self) {
        let poll = |fd: libc::c_int, events: libc::c_short| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        self.pollfds.clear();
        self.pollfds.push(poll(self.signals.raw_fd(), libc::POLLIN));
        self.pollfds.push(poll(self.listener.as_raw_fd(), libc::POLLIN));
        for pair in &self.tuns {
            for tun in pair {
                self.pollfds.push(poll(tun.file.as_raw_fd(), libc::POLLIN));
            }
        }
        for c in &self.clients {
            let mut events = 0;
            if !c.eof {
                events |= libc::POLLIN;
            }
            if !c.output.is_empty() {
                events |= libc::POLLOUT;
            }
            self.pollfds.push(poll(c.stream.as_raw_fd(), events));
        }
    }

    /// Reads up to a batch of packets from one end and feeds its direction.
    fn read_tun(
        &mut self,
        link: usize,
        end: usize,
        now: u64,
        revents: libc::c_short,
    ) -> Result<(), RunError> {
        let read_error = |rt: &Self, source| RunError::TunRead {
            link: rt.emu.links()[link].name.clone(),
            end: END_NAMES[end],
            dev: rt.devs[link][end].clone(),
            source,
        };
        for _ in 0..READ_BATCH {
            let mut buf = self
                .pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(self.buffer_size));
            buf.resize(self.buffer_size, 0);
            match (&self.tuns[link][end].file).read(&mut buf) {
                Ok(0) => {
                    self.recycle(buf);
                    break;
                }
                Ok(n) => {
                    buf.truncate(n);
                    let dir = &mut self.emu.links_mut()[link].dirs[end];
                    if let Verdict::Dropped(_, buf) = dir.enqueue(now, buf) {
                        self.recycle(buf);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.recycle(buf);
                    if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                        let e = io::Error::other("device gone (poll reported an error)");
                        return Err(read_error(self, e));
                    }
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.recycle(buf),
                Err(e) => return Err(read_error(self, e)),
            }
        }
        Ok(())
    }

    /// Writes every packet due by `now` to the far end of its link.
    fn release_due(&mut self, now: u64) {
        for link in 0..self.tuns.len() {
            for dir in Dir::BOTH {
                let ingress = dir.index();
                let egress = 1 - ingress;
                while let Some(r) = self.emu.links_mut()[link].dirs[ingress].poll_release(now) {
                    let result = (&self.tuns[link][egress].file).write(&r.packet);
                    let d = &mut self.emu.links_mut()[link].dirs[ingress];
                    match result {
                        Ok(n) => d.transmitted(n),
                        Err(e) => {
                            d.transmit_failed();
                            if self.tx_errors < TX_ERRORS_LOGGED {
                                self.tx_errors += 1;
                                eprintln!(
                                    "wanem: link {} {dir}: write to {} failed, packet dropped: {e}{}",
                                    self.emu.links()[link].name,
                                    self.devs[link][egress],
                                    if self.tx_errors == TX_ERRORS_LOGGED {
                                        " (further write errors are only counted in drop_tx)"
                                    } else {
                                        ""
                                    }
                                );
                            }
                        }
                    }
                    self.recycle(r.packet);
                }
            }
        }
    }

    /// Appends finished monitor rows (all remaining ones with `stop`).
    fn write_monitor_rows(&mut self, now: u64, stop: bool) -> Option<io::Result<()>> {
        let m = self.monitor.as_mut()?;
        if !stop && now < m.next_write {
            return None;
        }
        m.next_write = now + MONITOR_WRITE_NS;
        self.emu.collect_bins(now, stop, &mut self.bins);
        let rows = self.bins.iter().map(Vec::len).max().unwrap_or(0);
        let mut result = Ok(());
        'rows: for i in 0..rows {
            for (link, l) in self.emu.links().iter().enumerate() {
                for dir in Dir::BOTH {
                    if let Some(b) = self.bins[link * 2 + dir.index()].get(i) {
                        let r = writeln!(
                            m.out,
                            "{},{},{},{},{},{},{}",
                            b.index,
                            l.name,
                            dir.name(),
                            b.bytes,
                            b.packets,
                            b.drops,
                            b.max_queue
                        );
                        if let Err(e) = r {
                            result = Err(e);
                            break 'rows;
                        }
                    }
                }
            }
        }
        for b in &mut self.bins {
            b.clear();
        }
        if result.is_err() && !stop {
            // Keep serving packets; give up on this file.
            let path = m.path.display().to_string();
            if let Err(e) = &result {
                eprintln!("wanem: error: monitor {path}: {e}; monitoring stopped");
            }
            self.emu.collect_bins(now, true, &mut self.bins);
            for b in &mut self.bins {
                b.clear();
            }
            self.monitor = None;
        }
        Some(result)
    }

    /// Stops the running monitor, if any, writing its last rows and flushing.
    fn stop_monitor(&mut self, now: u64) -> io::Result<()> {
        let Some(result) = self.write_monitor_rows(now, true) else {
            return Ok(());
        };
        let Some(mut m) = self.monitor.take() else {
            return result;
        };
        let flushed = m.out.flush();
        result.and(flushed).map_err(|e| {
            io::Error::new(e.kind(), format!("monitor {}: {e}", m.path.display()))
        })
    }

    fn accept_clients(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.clients.len() >= MAX_CLIENTS {
                        let mut s = stream;
                        let _ = s.write_all(control::error_reply("too many control clients").as_bytes());
                        continue;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.clients.push(Client {
                        stream,
                        input: Vec::new(),
                        output: Vec::new(),
                        eof: false,
                        dead: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    fn serve_client(&mut self, i: usize) {
        let mut chunk = [0u8; 4096];
        let mut lines = Vec::new();
        {
            let c = &mut self.clients[i];
            while !c.eof && !c.dead {
                match c.stream.read(&mut chunk) {
                    Ok(0) => c.eof = true,
                    Ok(n) => c.input.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => c.dead = true,
                }
            }
            while let Some(pos) = c.input.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = c.input.drain(..=pos).collect();
                lines.push(Ok(line));
            }
            if c.input.len() > control::MAX_LINE {
                lines.push(Err(format!(
                    "request line longer than {} bytes; closing",
                    control::MAX_LINE
                )));
                c.input.clear();
                c.eof = true;
            } else if c.eof && !c.input.is_empty() {
                lines.push(Ok(std::mem::take(&mut c.input)));
            }
        }
        for line in lines {
            let reply = match line {
                Ok(bytes) => self.handle_line(&bytes),
                Err(msg) => control::error_reply(&msg),
            };
            self.clients[i].output.extend_from_slice(reply.as_bytes());
        }
        let c = &mut self.clients[i];
        while !c.output.is_empty() && !c.dead {
            match c.stream.write(&c.output) {
                Ok(n) => {
                    c.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => c.dead = true,
            }
        }
        if c.output.len() > MAX_CLIENT_OUTPUT {
            c.dead = true;
        }
    }

    fn handle_line(&mut self, bytes: &[u8]) -> String {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return control::error_reply("malformed request: not UTF-8");
        };
        let request = match control::parse_request(text.trim()) {
            Ok(r) => r,
            Err(e) => return control::error_reply(&e),
        };
        let now = self.now();
        match request {
            Request::Show => {
                let monitor = self.monitor.as_ref().map(|m| m.path.display().to_string());
                let shown = serde_json::to_value(self.emu.show(now, monitor)).map(|mut v| {
                    // The runtime's own cost: time spent spinning before releases.
                    v["spin_s"] = serde_json::json!(self.spin.spun_ns() as f64 / 1e9);
                    v
                });
                match shown.and_then(|v| serde_json::to_string(&v)) {
                    Ok(mut s) => {
                        s.push('\n');
                        s
                    }
                    Err(e) => control::error_reply(&format!("show: {e}")),
                }
            }
            Request::Set { link, dir, patch } => match self.emu.set(now, &link, dir, &patch) {
                Ok(()) => control::ok_reply(),
                Err(e) => control::error_reply(&e),
            },
            Request::ResetCounters => {
                self.emu.reset_counters(now);
                control::ok_reply()
            }
            Request::Monitor { file: None } => match self.stop_monitor(now) {
                Ok(()) => control::ok_reply(),
                Err(e) => control::error_reply(&e.to_string()),
            },
            Request::Monitor { file: Some(path) } => {
                let m = match create_monitor(&path, now) {
                    Ok(m) => m,
                    Err(e) => {
                        return control::error_reply(&format!("monitor {}: {e}", path.display()))
                    }
                };
                if let Err(e) = self.stop_monitor(now) {
                    eprintln!("wanem: error: {e}");
                }
                self.emu.start_monitor(now);
                self.monitor = Some(m);
                control::ok_reply()
            }
        }
    }
}
