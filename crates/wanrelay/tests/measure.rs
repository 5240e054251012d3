//! Loopback measurements for later benchmarks (printed, not asserted):
//! bulk throughput and small-message ping-pong latency through two relays
//! (client -> a0 -> trunk -> b0 -> node) against a direct connection.
//! A test binary of its own, so it does not share the CPU with the others
//! (cargo runs test binaries one after another). Run with
//! `cargo test --release -p wanrelay --test measure -- --nocapture`.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn bulk(mut c: TcpStream, mut s: TcpStream, bytes: usize) -> f64 {
    let t0 = Instant::now();
    let writer = tokio::spawn(async move {
        let chunk = vec![0x5au8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            c.write_all(&chunk[..n]).await.unwrap();
            left -= n;
        }
        c
    });
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    while got < bytes {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        got += n;
    }
    let secs = t0.elapsed().as_secs_f64();
    writer.await.unwrap();
    bytes as f64 * 8.0 / secs / 1e9
}

/// Round trips of `size` bytes; returns the median and the mean in us.
async fn pingpong(mut c: TcpStream, mut s: TcpStream, size: usize, rounds: usize) -> (f64, f64) {
    let echo = tokio::spawn(async move {
        let mut b = vec![0u8; size];
        for _ in 0..rounds {
            s.read_exact(&mut b).await.unwrap();
            s.write_all(&b).await.unwrap();
        }
    });
    let msg = vec![1u8; size];
    let mut b = vec![0u8; size];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        c.write_all(&msg).await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    echo.await.unwrap();
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    (samples[samples.len() / 2], mean)
}

async fn direct_pair(dest: &Dest) -> (TcpStream, TcpStream) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.1.1:0".parse().unwrap()).unwrap();
    let c = sock.connect(dest.addr).await.unwrap();
    let (s, _) = dest.listener.accept().await.unwrap();
    c.set_nodelay(true).unwrap();
    s.set_nodelay(true).unwrap();
    (c, s)
}

async fn relayed_pair(inside: SocketAddr, dest: &Dest) -> (TcpStream, TcpStream) {
    let c = open_ok(inside, "127.0.1.1", dest.addr).await;
    let (s, _) = dest.accept().await;
    s.set_nodelay(true).unwrap();
    (c, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_throughput_and_latency_through_two_relays() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    const BYTES: usize = 300 * 1000 * 1000;
    const ROUNDS: usize = 5000;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (c, s) = direct_pair(&dest).await;
    let direct_gbit = bulk(c, s, BYTES).await;
    let (c, s) = relayed_pair(w.a.inside, &dest).await;
    let relayed_gbit = bulk(c, s, BYTES).await;

    let (c, s) = direct_pair(&dest).await;
    let (direct_med, direct_mean) = pingpong(c, s, 1, ROUNDS).await;
    let (c, s) = relayed_pair(w.a.inside, &dest).await;
    let (relayed_med, relayed_mean) = pingpong(c, s, 1, ROUNDS).await;

    println!("loopback, 2 cores shared by client, server and both relays:");
    println!(
        "  bulk 300 MB one way: direct {direct_gbit:.2} Gbit/s, through two relays {relayed_gbit:.2} Gbit/s ({:.0} %)",
        relayed_gbit / direct_gbit * 100.0
    );
    println!(
        "  1-byte ping-pong RTT: direct median {direct_med:.1} us (mean {direct_mean:.1}), through two relays median {relayed_med:.1} us (mean {relayed_mean:.1}); added per relay per one-way pass ~{:.1} us",
        (relayed_med - direct_med) / 4.0
    );
}

/// 1-byte ping-pong through two relays without and with `busy_poll`, in
/// alternating rounds (printed, not asserted): what polling instead of
/// sleeping saves per relay pass when the relays have CPU to spin on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_latency_with_and_without_busy_polling() {
    const ROUNDS: usize = 3000;
    let dest = Dest::new("127.0.2.1").await;
    let sleeping = world(WorldOptions::default());
    let polling = world(WorldOptions {
        top: "busy_poll = \"100us\"",
        ..Default::default()
    });
    sleeping.wait_trunks(1).await;
    polling.wait_trunks(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut direct, mut slept, mut polled) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (c, s) = direct_pair(&dest).await;
        direct.push(pingpong(c, s, 1, ROUNDS).await.0);
        let (c, s) = relayed_pair(sleeping.a.inside, &dest).await;
        slept.push(pingpong(c, s, 1, ROUNDS).await.0);
        let (c, s) = relayed_pair(polling.a.inside, &dest).await;
        polled.push(pingpong(c, s, 1, ROUNDS).await.0);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (d, s, p) = (med(&mut direct), med(&mut slept), med(&mut polled));
    println!("loopback, 1-byte ping-pong RTT, median of 3 rounds of {ROUNDS} (each a median):");
    println!(
        "  direct {d:.1} us; two relays {s:.1} us ({:.1} us per relay pass); busy_poll 100us {p:.1} us ({:.1} us per pass)",
        (s - d) / 4.0,
        (p - d) / 4.0
    );
}
