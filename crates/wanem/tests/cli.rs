//! The binary's startup behaviour without privileges: bad command lines and
//! bad configs print `wanem: error: ...` and exit with code 2, never panic.

use std::path::PathBuf;
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wemt-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn wanem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wanem"))
        .args(args)
        .output()
        .expect("run wanem")
}

fn run_with_config(name: &str, config: &str) -> (Option<i32>, String) {
    let dir = scratch(name);
    let path = dir.join("wanem.json");
    std::fs::write(&path, config).expect("write config");
    let sock = dir.join("control.sock");
    let out = wanem(&[
        "--config",
        path.to_str().expect("utf-8"),
        "--control",
        sock.to_str().expect("utf-8"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let left = sock.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!left, "control socket created despite the error");
    (out.status.code(), stderr)
}

fn config(queue_bytes: i64, delay_us: i64, netns: &str) -> String {
    format!(
        r#"{{"links": [{{"name": "a-b",
          "a": {{"netns": "{netns}", "dev": "wan-b"}},
          "b": {{"netns": "{netns}-other", "dev": "wan-a"}},
          "mtu": 1500,
          "a_to_b": {{"rate_bps": 200000000, "delay_us": {delay_us}, "queue_bytes": {queue_bytes}, "loss": 0.0, "seed": 1, "up": true}},
          "b_to_a": {{"rate_bps": 200000000, "delay_us": 10000, "queue_bytes": 100000, "loss": 0.0, "seed": 2, "up": true}}}}]}}"#
    )
}

#[test]
fn queue_smaller_than_mtu_exits_2_with_message() {
    let (code, stderr) = run_with_config("queue", &config(1000, 10_000, "/nonexistent/ns"));
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "wanem: error: link a-b a_to_b: queue_bytes 1000 is smaller than one MTU (1500)"
    );
}

#[test]
fn negative_delay_exits_2_with_message() {
    let (code, stderr) = run_with_config("delay", &config(100_000, -1, "/nonexistent/ns"));
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "wanem: error: link a-b a_to_b: delay_us must be >= 0 (got -1)"
    );
}

#[test]
fn unreadable_or_malformed_config_exits_2() {
    let (code, stderr) = run_with_config("syntax", "{\"links\": [");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with("wanem: error: config "), "{stderr}");
    let out = wanem(&["--config", "/nonexistent/wanem.json", "--control", "/tmp/x.sock"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("wanem: error: cannot read config"));
}

#[test]
fn missing_namespace_exits_2_naming_the_end() {
    let (code, stderr) = run_with_config("netns", &config(100_000, 0, "/nonexistent/ns"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("wanem: error: link a-b end a: open netns /nonexistent/ns:"),
        "{stderr}"
    );
}

#[test]
fn bad_command_lines_exit_2() {
    for args in [&[][..], &["--config"][..], &["--bogus"][..], &["--config", "x"][..]] {
        let out = wanem(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("wanem: error: "));
    }
    let out = wanem(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: wanem"));
}
