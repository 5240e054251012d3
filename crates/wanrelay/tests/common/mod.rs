//! Two relays on loopback, as child processes, with "member nodes" on
//! 127.0.1.x (cluster a) and 127.0.2.x (cluster b): all of 127.0.0.0/8 is
//! loopback on Linux, so no network namespace is needed.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use wanproto::{Decoded, Preamble, Reply};

pub const KEY_A: &str = "correct horse battery staple 0123456789";
pub const KEY_WRONG: &str = "not the key the other relay has 98765";

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A free port on `ip` (bound and released), never one this test process
/// was given before: the kernel may hand a released port out again at once,
/// and two relays were once given the same metrics port.
pub fn free_port(ip: IpAddr) -> u16 {
    unused_port(|| {
        std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
}

/// The first port `pick` yields that no earlier call handed out.
fn unused_port(mut pick: impl FnMut() -> u16) -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = pick();
        if given.insert(port) {
            return port;
        }
    }
}

pub fn scratch_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "wanrelay-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn write_key(dir: &Path, name: &str, key: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

pub struct RelayProc {
    pub name: String,
    pub child: Option<Child>,
    pub inside: SocketAddr,
    pub outside: SocketAddr,
    pub metrics: SocketAddr,
    pub log: PathBuf,
    pub config: PathBuf,
}

impl RelayProc {
    pub fn start(
        dir: &Path,
        name: &str,
        config: &str,
        inside: SocketAddr,
        outside: SocketAddr,
        metrics: SocketAddr,
    ) -> RelayProc {
        let cpath = dir.join(format!("{name}.toml"));
        std::fs::write(&cpath, config).unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_wanrelay"))
            .arg("--config")
            .arg(&cpath)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        RelayProc {
            name: name.into(),
            child: Some(child),
            inside,
            outside,
            metrics,
            log,
            config: cpath,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Waits for the process to exit (at most `limit`).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let t0 = Instant::now();
        let child = self.child.as_mut().unwrap();
        while t0.elapsed() < limit {
            if let Some(s) = child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub async fn scrape(&self) -> String {
        scrape(self.metrics).await
    }

    /// Waits until `line` appears in the metrics page.
    pub async fn wait_metric(&self, line: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self.scrape().await.lines().any(|l| l == line) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub async fn wait_log(&self, needle: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self.log_text().contains(needle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for RelayProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub async fn scrape(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return String::new();
    };
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// The value of a metric line `name{labels}` (exact series), if present.
pub fn metric(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
}

pub struct WorldOptions {
    pub key_b: &'static str,
    /// What relay a believes b0 serves.
    pub a_reachable_b: &'static str,
    pub trunks: usize,
    pub pacing_rate: Option<&'static str>,
    pub extra_a: &'static str,
    pub start_b: bool,
    /// Appended to both configurations (e.g. a `[trunk]` table).
    pub tables: &'static str,
    /// RBUDP keys of both peers (`transport = "rbudp"`, rate, payload, ...);
    /// non-empty also gives both relays a UDP socket.
    pub rbudp: &'static str,
    /// Extra keys of b0's peer a0 only (e.g. to make b0 speak tcp).
    pub rbudp_b: Option<&'static str>,
    /// Top-level keys of both configurations (e.g. `busy_poll = "50us"`).
    pub top: &'static str,
}

impl Default for WorldOptions {
    fn default() -> Self {
        WorldOptions {
            key_b: KEY_A,
            a_reachable_b: "127.0.2.0/24",
            trunks: 1,
            pacing_rate: None,
            extra_a: "",
            start_b: true,
            tables: "",
            rbudp: "",
            rbudp_b: None,
            top: "",
        }
    }
}

/// Relay a0 (cluster a, members 127.0.1.0/24) dials relay b0 (cluster b,
/// members 127.0.2.0/24).
pub struct World {
    pub dir: PathBuf,
    pub a: RelayProc,
    pub b: Option<RelayProc>,
    pub b_config: String,
    pub b_addrs: (SocketAddr, SocketAddr, SocketAddr),
    /// UDP sockets of a0 and b0 (RBUDP worlds).
    pub udp: Option<(SocketAddr, SocketAddr)>,
}

/// A UDP port free on `ip` now, never one handed out before (as `free_port`).
pub fn free_udp_port(ip: IpAddr) -> u16 {
    unused_port(|| {
        std::net::UdpSocket::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
}

#[allow(clippy::too_many_arguments)]
pub fn relay_config(
    name: &str,
    cluster: &str,
    key: &Path,
    inside: SocketAddr,
    members: &str,
    outside: Option<SocketAddr>,
    metrics: SocketAddr,
    peer: &str,
) -> String {
    let outside = outside.map_or(String::new(), |o| {
        format!("[outside]\nlisten = [\"{o}\"]\n")
    });
    format!(
        "name = \"{name}\"\ncluster = \"{cluster}\"\nkey_file = \"{}\"\nlog_level = \"info\"\nshutdown_grace = \"2s\"\n\n\
         [inside]\nlisten = [\"{inside}\"]\nmembers = [\"{members}\"]\nconnect_timeout = \"2s\"\npreamble_timeout = \"2s\"\n\n\
         {outside}\n[metrics]\nlisten = \"{metrics}\"\n\n{peer}",
        key.display()
    )
}

pub fn world(o: WorldOptions) -> World {
    let dir = scratch_dir();
    let key_a = write_key(&dir, "a.key", KEY_A, 0o600);
    let key_b = write_key(&dir, "b.key", o.key_b, 0o600);
    let a_inside = SocketAddr::new(ip("127.0.1.254"), free_port(ip("127.0.1.254")));
    let a_outside = SocketAddr::new(ip("127.0.0.11"), free_port(ip("127.0.0.11")));
    let a_metrics = SocketAddr::new(ip("127.0.0.1"), free_port(ip("127.0.0.1")));
    let b_inside = SocketAddr::new(ip("127.0.2.254"), free_port(ip("127.0.2.254")));
    let b_outside = SocketAddr::new(ip("127.0.0.12"), free_port(ip("127.0.0.12")));
    let b_metrics = SocketAddr::new(ip("127.0.0.1"), free_port(ip("127.0.0.1")));
    let pacing = o
        .pacing_rate
        .map_or(String::new(), |r| format!("pacing_rate = \"{r}\"\n"));
    let peer_b = format!(
        "[[peer]]\nname = \"b0\"\ncluster = \"b\"\naddresses = [\"{b_outside}\"]\nreachable = [\"{}\"]\ntrunks = {}\n{pacing}\n{}\n{}",
        o.a_reachable_b, o.trunks, o.extra_a, o.rbudp
    );
    let peer_a = format!(
        "[[peer]]\nname = \"a0\"\ncluster = \"a\"\nreachable = [\"127.0.1.0/24\"]\ntrunks = {}\n{pacing}\n{}\n",
        o.trunks,
        o.rbudp_b.unwrap_or(o.rbudp)
    );
    let ca = relay_config(
        "a0",
        "a",
        &key_a,
        a_inside,
        "127.0.1.0/24",
        None,
        a_metrics,
        &peer_b,
    );
    let cb = relay_config(
        "b0",
        "b",
        &key_b,
        b_inside,
        "127.0.2.0/24",
        Some(b_outside),
        b_metrics,
        &peer_a,
    );
    let (mut ca, mut cb) = (
        format!("{}\n{ca}\n{}", o.top, o.tables),
        format!("{}\n{cb}\n{}", o.top, o.tables),
    );
    let udp = (!o.rbudp.is_empty()).then(|| {
        let ua = SocketAddr::new(ip("127.0.0.11"), free_udp_port(ip("127.0.0.11")));
        let ub = SocketAddr::new(ip("127.0.0.12"), free_udp_port(ip("127.0.0.12")));
        ca = format!("{ca}\n[outside]\nudp_listen = \"{ua}\"\n");
        cb = cb.replacen(
            "[outside]\n",
            &format!("[outside]\nudp_listen = \"{ub}\"\n"),
            1,
        );
        (ua, ub)
    });
    let a = RelayProc::start(&dir, "a0", &ca, a_inside, a_outside, a_metrics);
    let b = o
        .start_b
        .then(|| RelayProc::start(&dir, "b0", &cb, b_inside, b_outside, b_metrics));
    World {
        dir,
        a,
        b,
        b_config: cb,
        b_addrs: (b_inside, b_outside, b_metrics),
        udp,
    }
}

impl World {
    pub fn b(&self) -> &RelayProc {
        self.b.as_ref().unwrap()
    }

    /// Waits until relay a has `n` trunks up to b0.
    pub async fn wait_trunks(&self, n: usize) {
        for slot in 0..n {
            let line = format!("wanrelay_trunk_up{{peer=\"b0\",trunk=\"{slot}\"}} 1");
            assert!(
                self.a.wait_metric(&line, Duration::from_secs(10)).await,
                "trunk {slot} not up; log of a0:\n{}\nlog of b0:\n{}",
                self.a.log_text(),
                self.b.as_ref().map(|b| b.log_text()).unwrap_or_default()
            );
        }
    }

    pub fn restart_b(&mut self) {
        let (i, o, m) = self.b_addrs;
        self.b = Some(RelayProc::start(&self.dir, "b0", &self.b_config, i, o, m));
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("relay logs kept in {}", self.dir.display());
        }
    }
}

/// A destination node: accepts connections and hands them over with the
/// delivery preamble read.
pub struct Dest {
    pub listener: TcpListener,
    pub addr: SocketAddr,
}

impl Dest {
    pub async fn new(ip_s: &str) -> Dest {
        let listener = TcpListener::bind((ip(ip_s), 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        Dest { listener, addr }
    }

    /// The next connection and its delivery preamble.
    pub async fn accept(&self) -> (TcpStream, Preamble) {
        let (mut s, _) = self.listener.accept().await.unwrap();
        let mut b = [0u8; 48];
        s.read_exact(&mut b).await.unwrap();
        match Preamble::decode_deliver(&b).unwrap() {
            Decoded::Complete(p, 48) => (s, p),
            other => panic!("bad delivery preamble {other:?}"),
        }
    }

    /// Echoes every connection (with half-close) until dropped.
    pub fn echo(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let (s, _) = self.accept().await;
                tokio::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = w.shutdown().await;
                });
            }
        })
    }
}

/// A TCP connection from `src_ip` (port chosen by the kernel) to relay
/// `inside`, with TCP_NODELAY, as the shim's connects are.
async fn dial(inside: SocketAddr, src_ip: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(ip(src_ip), 0)).unwrap();
    let s = sock.connect(inside).await.unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Connects from `src_ip` to relay `inside` asking for `dst`; sends the
/// preamble (and `early` bytes with it).
pub async fn connect_via(
    inside: SocketAddr,
    src_ip: &str,
    dst: SocketAddr,
    early: &[u8],
) -> TcpStream {
    let mut s = dial(inside, src_ip).await;
    let src = s.local_addr().unwrap();
    let mut msg = Preamble::connect(dst, src).encode().to_vec();
    msg.extend_from_slice(early);
    s.write_all(&msg).await.unwrap();
    s
}

/// A 64-byte preamble of `kind` 3 or 4 (IPv4 endpoints `dst`, `src`, then
/// the blast extension), written by hand from docs/wanproto.md section 1
/// rather than with wanproto's encoder, so the tests check the documented
/// bytes.
fn hand_preamble(kind: u8, dst: SocketAddr, src: SocketAddr, rate: u64, payload: u16) -> Vec<u8> {
    let (IpAddr::V4(d), IpAddr::V4(a)) = (dst.ip(), src.ip()) else {
        panic!("IPv4 only");
    };
    let mut msg = vec![0x57, 0x53, 0x48, 0x50, 1, kind, 0, 0, 4, 4];
    msg.extend_from_slice(&dst.port().to_be_bytes());
    msg.extend_from_slice(&src.port().to_be_bytes());
    msg.extend_from_slice(&[0, 0]);
    msg.extend_from_slice(&d.octets());
    msg.extend_from_slice(&[0; 12]);
    msg.extend_from_slice(&a.octets());
    msg.extend_from_slice(&[0; 12]);
    msg.extend_from_slice(&rate.to_be_bytes());
    msg.extend_from_slice(&payload.to_be_bytes());
    msg.extend_from_slice(&[0; 6]);
    assert_eq!(msg.len(), 64);
    msg
}

/// Connects from `src_ip` to relay `inside` asking for `dst` with a
/// kind-3 connect preamble (a blast request for `rate` bytes/s and
/// `payload`-byte datagrams), its 64 bytes written by hand from
/// docs/wanproto.md, and expects an ok reply.
pub async fn open_ok_with_blast(
    inside: SocketAddr,
    src_ip: &str,
    dst: SocketAddr,
    rate: u64,
    payload: u16,
) -> TcpStream {
    let mut s = dial(inside, src_ip).await;
    let src = s.local_addr().unwrap();
    s.write_all(&hand_preamble(3, dst, src, rate, payload))
        .await
        .unwrap();
    assert_eq!(read_reply(&mut s).await, Reply::Ok);
    s
}

/// Sends a kind-4 preamble (a blast request for the open connection
/// `relay_end` <-> `node_end`, or its withdrawal for `None`), its 64 bytes
/// written by hand from docs/wanproto.md, on a new connection from
/// `src_ip` to relay `inside`; the relay's reply.
pub async fn blast_update(
    inside: SocketAddr,
    src_ip: &str,
    relay_end: SocketAddr,
    node_end: SocketAddr,
    request: Option<(u64, u16)>,
) -> Reply {
    let mut s = dial(inside, src_ip).await;
    let (rate, payload) = request.unwrap_or((0, 0));
    s.write_all(&hand_preamble(4, relay_end, node_end, rate, payload))
        .await
        .unwrap();
    let reply = read_reply(&mut s).await;
    // The relay closes the control connection after its reply.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("control connection closed after the reply")
        .unwrap();
    assert!(rest.is_empty(), "bytes after the reply: {rest:?}");
    reply
}

pub async fn read_reply(s: &mut TcpStream) -> Reply {
    let mut r = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut r))
        .await
        .expect("reply within 10 s")
        .expect("reply");
    match Reply::decode(&r).unwrap() {
        Decoded::Complete(r, 4) => r,
        other => panic!("bad reply {other:?}"),
    }
}

/// Connects through the relay and expects an ok reply.
pub async fn open_ok(inside: SocketAddr, src_ip: &str, dst: SocketAddr) -> TcpStream {
    let mut s = connect_via(inside, src_ip, dst, &[]).await;
    assert_eq!(read_reply(&mut s).await, Reply::Ok);
    s
}

/// Deterministic pseudo-random bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// `n` bytes each way at once between a client and its destination, both
/// directions checked by hash; the seconds it took (at most 120).
pub async fn exchange(c: tokio::net::TcpStream, s: tokio::net::TcpStream, n: usize) -> f64 {
    tokio::time::timeout(Duration::from_secs(120), exchange_inner(c, s, n))
        .await
        .expect("the exchange finished within 120 s")
}

/// `n` bytes each way at once on two connections that stay open (no
/// half-close), both directions checked byte for byte; the seconds it
/// took (at most 120). `seed` varies the bytes between calls.
pub async fn exchange_open(c: &mut TcpStream, s: &mut TcpStream, n: usize, seed: u64) -> f64 {
    let t0 = Instant::now();
    let run = async {
        let (mut cr, mut cw) = c.split();
        let (mut sr, mut sw) = s.split();
        let up = pattern(seed, n);
        let down = pattern(seed + 1, n);
        async fn read_n(r: &mut tokio::net::tcp::ReadHalf<'_>, n: usize) -> Vec<u8> {
            let mut got = vec![0u8; n];
            r.read_exact(&mut got).await.unwrap();
            got
        }
        let (_, _, at_dest, at_client) = tokio::join!(
            async { cw.write_all(&up).await.unwrap() },
            async { sw.write_all(&down).await.unwrap() },
            read_n(&mut sr, n),
            read_n(&mut cr, n),
        );
        assert!(at_dest == up, "client -> destination bytes differ");
        assert!(at_client == down, "destination -> client bytes differ");
    };
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the exchange finished within 120 s");
    t0.elapsed().as_secs_f64()
}

async fn exchange_inner(c: tokio::net::TcpStream, s: tokio::net::TcpStream, n: usize) -> f64 {
    let t0 = Instant::now();
    let (cr, cw) = c.into_split();
    let (sr, sw) = s.into_split();
    let send = |mut w: tokio::net::tcp::OwnedWriteHalf, seed: u64| {
        tokio::spawn(async move {
            let mut h = Sha256::new();
            let mut sent = 0;
            let mut i = 0;
            while sent < n {
                let chunk = pattern(seed + i, (n - sent).min(1 << 20));
                h.update(&chunk);
                w.write_all(&chunk).await.unwrap();
                sent += chunk.len();
                i += 1;
            }
            w.shutdown().await.unwrap();
            h.finalize()
        })
    };
    let recv = |mut r: tokio::net::tcp::OwnedReadHalf| {
        tokio::spawn(async move {
            let mut h = Sha256::new();
            let mut got = 0;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = r.read(&mut buf).await.unwrap();
                if k == 0 {
                    break;
                }
                h.update(&buf[..k]);
                got += k;
            }
            (got, h.finalize())
        })
    };
    let up = send(cw, 1);
    let down = send(sw, 1_000_000);
    let at_dest = recv(sr);
    let at_client = recv(cr);
    let limit = Duration::from_secs(120);
    let (up, down) = (up.await.unwrap(), down.await.unwrap());
    let (n1, h1) = tokio::time::timeout(limit, at_dest)
        .await
        .expect("client -> destination finished")
        .unwrap();
    let (n2, h2) = tokio::time::timeout(limit, at_client)
        .await
        .expect("destination -> client finished")
        .unwrap();
    assert_eq!((n1, h1), (n, up), "client -> destination bytes differ");
    assert_eq!((n2, h2), (n, down), "destination -> client bytes differ");
    t0.elapsed().as_secs_f64()
}
