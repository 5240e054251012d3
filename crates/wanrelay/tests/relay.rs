//! End-to-end behaviour of two relays on loopback (child processes):
//! client on 127.0.1.x -> relay a0 -> trunk -> relay b0 -> node 127.0.2.x.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wanproto::{Reason, Reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_bytes_both_ways_and_original_source_delivered() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let daddr = dest.addr;
    // Early data after the preamble is delivered first.
    let mut c = connect_via(w.a.inside, "127.0.1.1", daddr, b"early bytes").await;
    let src = c.local_addr().unwrap();
    let (mut s, pre) = dest.accept().await;
    assert_eq!(
        pre.source, src,
        "the destination learns the original source"
    );
    assert_eq!(pre.destination, daddr);
    assert_eq!(read_reply(&mut c).await, Reply::Ok);
    let mut early = [0u8; 11];
    s.read_exact(&mut early).await.unwrap();
    assert_eq!(&early, b"early bytes");

    // 100 MB each way at once, compared by hash.
    const N: usize = 100 * 1000 * 1000;
    let secs = exchange(c, s, N).await;
    println!(
        "100 MB each way at once through two relays: {secs:.2} s ({:.0} Mbit/s each way)",
        N as f64 * 8.0 / secs / 1e6
    );

    let page = w.a.scrape().await;
    assert!(
        metric(
            &page,
            "wanrelay_stream_bytes_total{peer=\"b0\",trunk=\"0\",direction=\"to_wan\"}"
        )
        .unwrap()
            >= (N + 11) as f64
    );
    assert!(
        metric(
            &page,
            "wanrelay_stream_bytes_total{peer=\"b0\",trunk=\"0\",direction=\"from_wan\"}"
        )
        .unwrap()
            >= N as f64
    );
}

/// With `busy_poll` the relays carry the same bytes, spin after traffic
/// (counted), and stop spinning when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_polling_relays_carry_exact_bytes_and_count_their_spinning() {
    let w = world(WorldOptions {
        top: "busy_poll = \"200us\"",
        ..Default::default()
    });
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (s, _) = dest.accept().await;
    const N: usize = 20 * 1000 * 1000;
    exchange(c, s, N).await;
    let spun = |page: &str| metric(page, "wanrelay_busy_poll_nanoseconds_total").unwrap_or(0.0);
    let (a, b) = (w.a.scrape().await, w.b().scrape().await);
    assert!(
        spun(&a) > 0.0 && spun(&b) > 0.0,
        "both relays spun after traffic"
    );
    // idle (no PING before 5 s of silence; scrapes are not traffic): at
    // most one window more each, then nothing
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (a1, b1) = (spun(&w.a.scrape().await), spun(&w.b().scrape().await));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (a2, b2) = (spun(&w.a.scrape().await), spun(&w.b().scrape().await));
    assert_eq!((a1, b1), (a2, b2), "idle relays do not spin");
    assert!(w.a.log_text().contains("busy polling after traffic"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_connections() {
    let w = world(WorldOptions {
        trunks: 2,
        ..Default::default()
    });
    w.wait_trunks(2).await;
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    for i in 1..=4 {
        let d = Dest::new(&format!("127.0.2.{i}")).await;
        addrs.push(d.addr);
        servers.push(d.echo());
    }
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let inside = w.a.inside;
        let dst = addrs[i as usize % addrs.len()];
        tasks.push(tokio::spawn(async move {
            let src = format!("127.0.1.{}", 1 + i % 8);
            let c = open_ok(inside, &src, dst).await;
            let data = pattern(i, 64 * 1024 + i as usize * 37);
            let (mut r, mut wr) = c.into_split();
            let d2 = data.clone();
            let writer = tokio::spawn(async move {
                wr.write_all(&d2).await.unwrap();
                wr.shutdown().await.unwrap();
            });
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            writer.await.unwrap();
            assert!(back == data, "connection {i}: echoed bytes differ");
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("connection finished")
            .unwrap();
    }
    let page = w.a.scrape().await;
    let opened: f64 = (0..2)
        .filter_map(|t| {
            metric(
                &page,
                &format!("wanrelay_streams_opened_total{{peer=\"b0\",trunk=\"{t}\",side=\"out\"}}"),
            )
        })
        .sum();
    assert_eq!(opened, 200.0);
    // Streams to one host use one trunk; four hosts spread over both here.
    let per_trunk: Vec<f64> = (0..2)
        .map(|t| {
            metric(
                &page,
                &format!("wanrelay_streams_opened_total{{peer=\"b0\",trunk=\"{t}\",side=\"out\"}}"),
            )
            .unwrap_or(0.0)
        })
        .collect();
    assert!(
        per_trunk.iter().all(|&n| n % 50.0 == 0.0),
        "by destination host: {per_trunk:?}"
    );
    for s in servers {
        s.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_propagates_both_ways() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;

    // Client finishes first; the destination still answers after the FIN.
    let mut c = connect_via(w.a.inside, "127.0.1.1", dest.addr, b"question").await;
    let (mut s, _) = dest.accept().await;
    assert_eq!(read_reply(&mut c).await, Reply::Ok);
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"question");
    s.write_all(b"answer after your FIN").await.unwrap();
    s.shutdown().await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"answer after your FIN");

    // Destination finishes first; the client keeps sending.
    let mut c = open_ok(w.a.inside, "127.0.1.2", dest.addr).await;
    let (mut s, _) = dest.accept().await;
    s.write_all(b"bye").await.unwrap();
    s.shutdown().await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"bye");
    c.write_all(b"still talking").await.unwrap();
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"still talking");
    let page = w.a.scrape().await;
    assert!(
        w.a.wait_metric(
            "wanrelay_streams_closed_total{peer=\"b0\",trunk=\"0\"} 2",
            Duration::from_secs(5)
        )
        .await,
        "{page}"
    );
}

fn is_reset(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::ConnectionReset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_propagates_both_ways() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;

    // Destination resets: the client's socket is reset.
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (s, _) = dest.accept().await;
    s.set_zero_linger().unwrap();
    drop(s);
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(&r, Err(e) if is_reset(e)), "client read: {r:?}");

    // Client resets: the destination's socket is reset.
    let c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (mut s, _) = dest.accept().await;
    c.set_zero_linger().unwrap();
    drop(c);
    let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap();
    assert!(
        matches!(&r, Err(e) if is_reset(e)),
        "destination read: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_their_reason() {
    let w = world(WorldOptions {
        a_reachable_b: "127.0.2.0/23", // a0 believes b0 serves 127.0.3.x too; b0 does not
        ..Default::default()
    });
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;

    // Destination not a member of the far cluster: the far relay refuses.
    let not_member = Dest::new("127.0.3.1").await;
    let mut c = connect_via(w.a.inside, "127.0.1.1", not_member.addr, b"").await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::NotMember));
    assert!(
        w.b()
            .wait_log("destination is not a member node", Duration::from_secs(2))
            .await
    );

    // Nobody listening at the destination.
    let closed_port = free_port(ip("127.0.2.9"));
    let mut c = connect_via(
        w.a.inside,
        "127.0.1.1",
        (ip("127.0.2.9"), closed_port).into(),
        b"",
    )
    .await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::Refused));

    // No peer relay serves the destination.
    let mut c = connect_via(
        w.a.inside,
        "127.0.1.1",
        "127.0.7.1:80".parse().unwrap(),
        b"",
    )
    .await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::NoRoute));

    // Inside connection from a non-member address.
    let mut c = connect_via(w.a.inside, "127.0.9.1", dest.addr, b"").await;
    assert_eq!(
        read_reply(&mut c).await,
        Reply::Refused(Reason::SourceMismatch)
    );

    // Preamble source that is not the connection's address.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.1.2:0".parse().unwrap()).unwrap();
    let mut c = sock.connect(w.a.inside).await.unwrap();
    let forged = wanproto::Preamble::connect(dest.addr, "127.0.1.3:4000".parse().unwrap());
    c.write_all(&forged.encode()).await.unwrap();
    assert_eq!(
        read_reply(&mut c).await,
        Reply::Refused(Reason::SourceMismatch)
    );

    // Not a preamble at all: refused from the first byte, then closed.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.1.2:0".parse().unwrap()).unwrap();
    let mut c = sock.connect(w.a.inside).await.unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::Protocol));
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), c.read_to_end(&mut rest))
        .await
        .unwrap();
    assert!(rest.is_empty());

    // Silence: refused after the preamble timeout (2 s here).
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.1.2:0".parse().unwrap()).unwrap();
    let mut c = sock.connect(w.a.inside).await.unwrap();
    c.write_all(b"WSHP").await.unwrap();
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::Protocol));

    // The destination never saw any of these.
    let none = tokio::time::timeout(Duration::from_millis(200), dest.listener.accept()).await;
    assert!(
        none.is_err(),
        "a refused connection reached the destination"
    );
    let none = tokio::time::timeout(Duration::from_millis(200), not_member.listener.accept()).await;
    assert!(none.is_err(), "the far relay connected to a non-member");

    let page = w.a.scrape().await;
    assert_eq!(
        metric(
            &page,
            "wanrelay_inside_refused_total{reason=\"source_mismatch\"}"
        ),
        Some(2.0),
        "{page}"
    );
    assert_eq!(
        metric(&page, "wanrelay_inside_refused_total{reason=\"protocol\"}"),
        Some(2.0)
    );
    assert_eq!(
        metric(&page, "wanrelay_inside_refused_total{reason=\"no_route\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &page,
            "wanrelay_streams_refused_total{peer=\"b0\",side=\"out\",reason=\"not_member\"}"
        ),
        Some(1.0)
    );
    let pb = w.b().scrape().await;
    assert_eq!(
        metric(
            &pb,
            "wanrelay_streams_refused_total{peer=\"a0\",side=\"in\",reason=\"not_member\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &pb,
            "wanrelay_streams_refused_total{peer=\"a0\",side=\"in\",reason=\"refused\"}"
        ),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_to_the_relays_own_listener_is_refused() {
    // b0's inside listener lies in its members range, as on a real cluster
    // LAN: a stream naming it must not make b0 connect to itself.
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let (b_inside, _, _) = w.b_addrs;
    let mut c = connect_via(w.a.inside, "127.0.1.1", b_inside, b"").await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::NotMember));
    assert!(
        w.b()
            .wait_log(
                "destination is one of this relay's own listeners",
                Duration::from_secs(2)
            )
            .await,
        "{}",
        w.b().log_text()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !w.b().log_text().contains("inside connection refused"),
        "b0 connected to its own inside listener:\n{}",
        w.b().log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refusals_is_counted_but_logged_a_few_times_a_second() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    for _ in 0..60 {
        let mut c = connect_via(w.a.inside, "127.0.9.1", dest.addr, b"").await;
        assert_eq!(
            read_reply(&mut c).await,
            Reply::Refused(Reason::SourceMismatch)
        );
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut c = connect_via(w.a.inside, "127.0.9.1", dest.addr, b"").await;
    assert_eq!(
        read_reply(&mut c).await,
        Reply::Refused(Reason::SourceMismatch)
    );
    assert!(w.a.wait_log("skipped=", Duration::from_secs(2)).await);
    let log = w.a.log_text();
    let lines = log.matches("inside connection refused").count();
    assert!(
        (2..=20).contains(&lines),
        "{lines} refusal lines for 61 refusals:\n{log}"
    );
    let skipped: u64 = log
        .lines()
        .filter(|l| l.contains("inside connection refused"))
        .filter_map(|l| {
            l.split("skipped=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(skipped + lines as u64, 61, "{log}");
    let page = w.a.scrape().await;
    assert_eq!(
        metric(
            &page,
            "wanrelay_inside_refused_total{reason=\"source_mismatch\"}"
        ),
        Some(61.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_with_the_wrong_key_is_refused() {
    let w = world(WorldOptions {
        key_b: KEY_WRONG,
        ..Default::default()
    });
    assert!(
        w.b()
            .wait_log("peer failed authentication", Duration::from_secs(10))
            .await,
        "b0 log:\n{}",
        w.b().log_text()
    );
    assert!(
        w.a.wait_log("failed authentication", Duration::from_secs(5))
            .await
            || w.a.log_text().contains("could not authenticate")
    );
    let page = w.b().scrape().await;
    assert!(
        metric(&page, "wanrelay_trunk_refused_total{reason=\"auth\"}").unwrap_or(0.0) >= 1.0,
        "{page}"
    );
    let page = w.a.scrape().await;
    assert_eq!(
        metric(&page, "wanrelay_trunk_up{peer=\"b0\",trunk=\"0\"}"),
        Some(0.0)
    );
    // No stream can be opened.
    let dest = Dest::new("127.0.2.1").await;
    let mut c = connect_via(w.a.inside, "127.0.1.1", dest.addr, b"").await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::NoRoute));
    // A silent or foreign client on the outside port is refused too.
    let mut s = tokio::net::TcpStream::connect(w.b().outside).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_far_relay_resets_connections_promptly_and_trunks_come_back() {
    let mut w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let mut conns = Vec::new();
    for i in 0..5 {
        let c = open_ok(w.a.inside, &format!("127.0.1.{}", i + 1), dest.addr).await;
        let (s, _) = dest.accept().await;
        conns.push((c, s));
    }
    let t0 = Instant::now();
    w.b.as_mut()
        .unwrap()
        .child
        .as_mut()
        .unwrap()
        .kill()
        .unwrap();
    for (c, _s) in &mut conns {
        let mut buf = [0u8; 8];
        let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("no hang");
        assert!(
            matches!(&r, Err(e) if is_reset(e)),
            "client read after the relay died: {r:?}"
        );
    }
    println!(
        "connections reset {:.0} ms after the far relay was killed",
        t0.elapsed().as_secs_f64() * 1e3
    );
    // A new connection is refused at once while the peer is down.
    let mut c = connect_via(w.a.inside, "127.0.1.1", dest.addr, b"").await;
    assert_eq!(read_reply(&mut c).await, Reply::Refused(Reason::NoRoute));
    // The relay comes back: a0 reconnects and streams flow again.
    w.b.as_mut().unwrap().wait_exit(Duration::from_secs(2));
    w.restart_b();
    w.wait_trunks(1).await;
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (mut s, _) = dest.accept().await;
    c.write_all(b"again").await.unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"again");
    let page = w.a.scrape().await;
    assert!(
        metric(
            &page,
            "wanrelay_streams_reset_total{peer=\"b0\",trunk=\"0\",by=\"trunk_lost\"}"
        )
        .unwrap_or(0.0)
            >= 5.0,
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_trunks_and_exits_zero() {
    let mut w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (_s, _) = dest.accept().await;
    w.a.signal("TERM");
    let status =
        w.a.wait_exit(Duration::from_secs(10))
            .expect("relay exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "log:\n{}", w.a.log_text());
    assert!(w.a.log_text().contains("shutting down"));
    // The open connection was reset (the grace period expired with it open).
    let mut buf = [0u8; 4];
    let r = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .unwrap();
    assert!(
        matches!(&r, Err(e) if is_reset(e)) || matches!(r, Ok(0)),
        "{r:?}"
    );
    // b0 saw a GOAWAY, not an error.
    assert!(
        w.b().wait_log("GOAWAY", Duration::from_secs(5)).await,
        "{}",
        w.b().log_text()
    );
    // b0 with no stream open exits at once on SIGINT.
    w.b().signal("INT");
    let status =
        w.b.as_mut()
            .unwrap()
            .wait_exit(Duration::from_secs(5))
            .expect("b0 exits");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_prometheus_text() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let daddr = dest.addr;
    let echo = dest.echo();
    let mut c = open_ok(w.a.inside, "127.0.1.1", daddr).await;
    c.write_all(b"ping").await.unwrap();
    let mut b = [0u8; 4];
    c.read_exact(&mut b).await.unwrap();
    echo.abort();
    let page = w.a.scrape().await;
    for name in [
        "wanrelay_trunk_up",
        "wanrelay_trunk_bytes_total",
        "wanrelay_streams_opened_total",
        "wanrelay_inside_connections_total",
    ] {
        assert!(
            page.contains(&format!("# TYPE {name} ")),
            "{name} missing:\n{page}"
        );
    }
    assert!(
        metric(
            &page,
            "wanrelay_trunk_bytes_total{peer=\"b0\",trunk=\"0\",direction=\"sent\"}"
        )
        .unwrap()
            > 0.0
    );
    assert!(
        metric(
            &page,
            "wanrelay_trunk_connects_total{peer=\"b0\",trunk=\"0\"}"
        )
        .unwrap()
            >= 1.0
    );
    // Anything but GET /metrics is a 404.
    let mut s = tokio::net::TcpStream::connect(w.a.metrics).await.unwrap();
    s.write_all(b"POST /x HTTP/1.0\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.0 404"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_limits_the_wan_rate() {
    let w = world(WorldOptions {
        pacing_rate: Some("80Mbit"),
        ..Default::default()
    });
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (mut s, _) = dest.accept().await;
    const N: usize = 10_000_000;
    let t0 = Instant::now();
    let writer = tokio::spawn(async move {
        c.write_all(&vec![7u8; N]).await.unwrap();
        c
    });
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    while n < N {
        n += s.read(&mut buf).await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    writer.await.unwrap();
    let mbit = N as f64 * 8.0 / secs / 1e6;
    println!("paced at 80 Mbit/s: {mbit:.1} Mbit/s");
    // The upper bound is the point; the lower one only catches a stalled
    // pacer (a loaded machine may not keep up with 80 Mbit/s).
    assert!(mbit < 88.0 && mbit > 30.0, "paced rate {mbit:.1} Mbit/s");
}

#[test]
fn config_errors_and_key_file_permissions_give_exit_codes() {
    let dir = scratch_dir();
    let key = write_key(&dir, "k", KEY_A, 0o600);
    let good = relay_config(
        "a0", "a", &key, "127.0.1.254:7400".parse().unwrap(), "127.0.1.0/24", None,
        "127.0.0.1:9400".parse().unwrap(),
        "[[peer]]\nname = \"b0\"\ncluster = \"b\"\naddresses = [\"127.0.0.12:7401\"]\nreachable = [\"127.0.2.0/24\"]\n",
    );
    let run = |text: &str, name: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wanrelay"))
            .args(["--check", "--config"])
            .arg(&p)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(run(&good, "good.toml").0, Some(0));
    let (code, err) = run(&good.replace("127.0.2.0/24", "127.0.2.0/33"), "bad.toml");
    assert_eq!(code, Some(3));
    assert!(err.contains("peer[0].reachable[0]"), "{err}");
    let (code, err) = run(
        &good.replace("[inside]", "[inside]\nlisten_typo = 1"),
        "bad2.toml",
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("inside.listen_typo: unknown key"), "{err}");
    // JSON works too.
    let json = r#"{"name": "a0", "cluster": "a", "key_file": "k",
        "inside": {"listen": ["127.0.1.254:7400"], "members": ["127.0.1.0/24"]},
        "peer": [{"name": "b0", "cluster": "b", "addresses": ["127.0.0.12:7401"], "reachable": ["127.0.2.0/24"]}]}"#;
    assert_eq!(run(json, "c.json").0, Some(0));
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (code, err) = run(&good, "good.toml");
    assert_eq!(code, Some(4));
    assert!(err.contains("chmod 600"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wanrelay"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_far_relay_is_detected_by_the_idle_timeout() {
    // Without session resumption (resume_timeout 0) silence ends the trunk.
    let mut w = world(WorldOptions {
        tables:
            "[trunk]\nkeepalive = \"300ms\"\nidle_timeout = \"1500ms\"\nresume_timeout = \"0s\"\n",
        ..Default::default()
    });
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (_s, _) = dest.accept().await;
    // SIGSTOP: no FIN, no RST, just silence (a relay host that died).
    w.b().signal("STOP");
    let t0 = Instant::now();
    let mut buf = [0u8; 8];
    let r = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
        .await
        .expect("no hang");
    let waited = t0.elapsed();
    w.b().signal("CONT");
    assert!(matches!(&r, Err(e) if is_reset(e)), "{r:?}");
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    println!(
        "silent far relay detected after {:.1} s (idle_timeout 1.5 s)",
        waited.as_secs_f64()
    );
    assert!(w.a.log_text().contains("peer silent"), "{}", w.a.log_text());
    // It comes back on its own once the far relay runs again.
    w.wait_trunks(1).await;
    let _ = w.b.as_mut();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_far_relay_suspends_the_trunk_and_streams_resume_when_it_returns() {
    let w = world(WorldOptions {
        tables: "[trunk]\nkeepalive = \"300ms\"\nidle_timeout = \"1500ms\"\n",
        ..Default::default()
    });
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let mut c = open_ok(w.a.inside, "127.0.1.1", dest.addr).await;
    let (mut s, _) = dest.accept().await;
    // Bytes both ways before, during and after 3 s of silence (a cut).
    let mut rng = 0x5eed_u64;
    let mut chunk = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (rng >> 33) as u8
            })
            .collect()
    };
    let (before, during, after) = (chunk(300_000), chunk(200_000), chunk(100_000));
    c.write_all(&before).await.unwrap();
    w.b().signal("STOP");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        w.a.log_text().contains("session suspended"),
        "{}",
        w.a.log_text()
    );
    c.write_all(&during).await.unwrap();
    let t0 = Instant::now();
    w.b().signal("CONT");
    c.write_all(&after).await.unwrap();
    let want = [before, during, after].concat();
    let mut got = vec![0u8; want.len()];
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut got))
        .await
        .expect("the stream resumed");
    if let Err(e) = read {
        panic!(
            "destination read: {e}\n--- a0 log:\n{}\n--- b0 log:\n{}",
            w.a.log_text(),
            w.b().log_text()
        );
    }
    assert!(
        got == want,
        "bytes lost, duplicated or reordered across the resumption"
    );
    println!(
        "stream moving again {:.0} ms after the far relay woke",
        t0.elapsed().as_secs_f64() * 1e3
    );
    s.write_all(b"back").await.unwrap();
    let mut buf = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut buf))
        .await
        .expect("reply")
        .unwrap();
    assert_eq!(&buf, b"back");
    assert!(
        w.a.log_text().contains("session resumed"),
        "{}",
        w.a.log_text()
    );
    let page = w.a.scrape().await;
    assert_eq!(
        metric(
            &page,
            "wanrelay_trunk_resumes_total{peer=\"b0\",trunk=\"0\"}"
        ),
        Some(1.0),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_destination_does_not_stall_another_stream_on_the_same_trunk() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    // Two destinations on one host: one trunk carries both streams.
    let stalled = Dest::new("127.0.2.1").await;
    let busy = Dest::new("127.0.2.1").await;
    let busy_addr = busy.addr;
    let echo = busy.echo();
    let c1 = open_ok(w.a.inside, "127.0.1.1", stalled.addr).await;
    let (_never_read, _) = stalled.accept().await;
    // Fill everything between the client and the stalled destination.
    let filler = tokio::spawn(async move {
        let mut c1 = c1;
        let chunk = vec![1u8; 1 << 20];
        loop {
            if c1.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    let c2 = open_ok(w.a.inside, "127.0.1.2", busy_addr).await;
    let data = pattern(9, 20_000_000);
    let (mut r, mut wr) = c2.into_split();
    let d2 = data.clone();
    let writer = tokio::spawn(async move {
        wr.write_all(&d2).await.unwrap();
        wr.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), r.read_to_end(&mut back))
        .await
        .expect("the second stream is not stalled")
        .unwrap();
    writer.await.unwrap();
    assert!(back == data);
    println!(
        "20 MB echoed beside a stalled stream in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    // The stalled stream holds bounded memory at a0: its send buffer
    // (256 KiB), not everything the client wrote.
    let page = w.a.scrape().await;
    let buffered = metric(
        &page,
        "wanrelay_trunk_send_buffered_bytes{peer=\"b0\",trunk=\"0\"}",
    );
    assert!(buffered.unwrap() <= 256.0 * 1024.0, "{page}");
    filler.abort();
    echo.abort();
}

/// A fake peer relay speaking wanproto by hand: handshake, then whatever
/// the test sends.
async fn fake_peer(
    addr: std::net::SocketAddr,
    key: &str,
    name: &str,
    cluster: &str,
) -> (tokio::net::TcpStream, Option<wanproto::PeerInfo>) {
    use wanproto::{Config, Event, PresharedKey, Role, TrunkConnection};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let t0 = Instant::now();
    let now = || t0.elapsed().as_nanos() as u64;
    let mut conn = TrunkConnection::new(
        Config::new(name, cluster),
        Role::Initiator,
        PresharedKey::new(key.as_bytes()).unwrap(),
        [t0.elapsed().subsec_nanos() as u8 | 1; 32],
        now(),
    )
    .unwrap();
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(b) = conn.poll_transmit(now(), 1 << 16) {
            s.write_all(&b).await.unwrap();
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Authenticated(p) => return (s, Some(p)),
                Event::Closed { .. } => return (s, None),
                _ => {}
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        if n == 0 {
            conn.handle_transport_closed();
        } else {
            conn.handle_input(now(), &buf[..n]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_peers_are_cut_off_without_harm() {
    let w = world(WorldOptions::default());
    w.wait_trunks(1).await;
    let outside = w.b().outside;

    // Right key, but a relay name b0 does not know: refused after authentication.
    // b0 may close before its own AUTH reaches us (it decides on ours), so
    // whether we saw it authenticate is a race; b0's verdict is in its log.
    let (mut s, _) = fake_peer(outside, KEY_A, "x9", "a").await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("closed")
        .ok();
    assert!(
        w.b()
            .wait_log("not a configured peer", Duration::from_secs(2))
            .await
    );

    // Right key and name, wrong cluster.
    let (mut s, _) = fake_peer(outside, KEY_A, "a0", "z").await;
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("closed")
        .ok();
    assert!(
        w.b()
            .wait_log("wrong cluster", Duration::from_secs(2))
            .await
    );

    // An authenticated peer that sends garbage: a frame header announcing
    // 4 GB, then an unknown frame type. The trunk is closed, nothing else.
    let (mut s, peer) = fake_peer(outside, KEY_A, "a0", "a").await;
    assert_eq!(peer.unwrap().name, "b0");
    let mut bad = vec![0x12, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
    bad.extend_from_slice(&[0x7f; 64]);
    s.write_all(&bad).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("closed")
        .ok();
    let page = w.b().scrape().await;
    assert!(
        page.contains("wanrelay_trunk_closes_total{peer=\"a0\",trunk=\"0\",reason=\"protocol\"} 1"),
        "{page}"
    );
    let page = w.b().scrape().await;
    assert!(
        metric(
            &page,
            "wanrelay_trunk_refused_total{reason=\"unknown_peer\"}"
        )
        .unwrap()
            >= 1.0
    );

    // The real a0 (whose trunk the fake one displaced) reconnects; streams flow.
    w.wait_trunks(1).await;
    let dest = Dest::new("127.0.2.1").await;
    let t0 = Instant::now();
    loop {
        let mut c = connect_via(w.a.inside, "127.0.1.1", dest.addr, b"").await;
        match read_reply(&mut c).await {
            Reply::Ok => break,
            r => assert!(t0.elapsed() < Duration::from_secs(10), "{r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(w.b.as_ref().unwrap().log_text().contains("trunk up"));
}

#[test]
fn the_example_configuration_in_the_docs_is_valid() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/wanrelay.md"
    ))
    .unwrap();
    let toml = doc
        .split("```toml\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let dir = scratch_dir();
    write_key(&dir, "psk", KEY_A, 0o600);
    let p = dir.join("a0.toml");
    std::fs::write(&p, toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wanrelay"))
        .args(["--check", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
