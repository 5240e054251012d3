//! `wanrelay --config FILE [--check]`: the relay daemon. See docs/wanrelay.md.
//!
//! Exit codes: 0 clean shutdown (SIGTERM/SIGINT) or `--check` passed;
//! 1 runtime failure (a listener cannot be bound, ...); 2 usage error;
//! 3 invalid configuration; 4 unusable key file.

use std::path::PathBuf;
use std::process::ExitCode;

use tokio::signal::unix::{signal, SignalKind};
use tracing::{error, info, warn};
use wanrelay::config::Config;
use wanrelay::relay::{self, Relay};

const USAGE: &str = "usage: wanrelay --config FILE [--check]
       wanrelay --version

  --config FILE  relay configuration (TOML, or JSON if FILE ends in .json);
                 see docs/wanrelay.md
  --check        validate the configuration and the key file, then exit
exit codes: 0 ok, 1 runtime failure, 2 usage, 3 bad configuration, 4 bad key file";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut config: Option<PathBuf> = None;
    let mut check = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" | "-c" => match args.next() {
                Some(p) => config = Some(p.into()),
                None => return usage("--config needs a file"),
            },
            s if s.starts_with("--config=") => config = Some(s["--config=".len()..].into()),
            "--check" => check = true,
            "--version" | "-V" => {
                println!("wanrelay {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let Some(path) = config else {
        return usage("--config FILE is required");
    };
    let config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("wanrelay: invalid configuration: {e}");
            return ExitCode::from(3);
        }
    };
    let (key, key_warning) = match config.load_key() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("wanrelay: {e}");
            return ExitCode::from(4);
        }
    };
    if check {
        if let Some(w) = key_warning {
            eprintln!("wanrelay: warning: {w}");
        }
        println!(
            "wanrelay: {} is valid (relay {} of cluster {}, peers: {})",
            path.display(),
            config.name,
            config.cluster,
            config.peers.len()
        );
        return ExitCode::SUCCESS;
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some(w) = key_warning {
        warn!("{w}");
    }
    // `threads = 1` (the default): one thread runs every task, so a byte
    // crossing the relay never waits for a wake-up on another thread.
    let mut builder = if config.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(config.threads);
        b
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            error!(error = %e, "cannot start the runtime");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let listeners = match relay::bind(&config).await {
            Ok(l) => l,
            Err(e) => {
                error!("{e}");
                return ExitCode::from(1);
            }
        };
        let (mut term, mut int) = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(t), Ok(i)) => (t, i),
            _ => {
                error!("cannot install signal handlers");
                return ExitCode::from(1);
            }
        };
        let relay = Relay::new(config, key);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = term.recv() => "SIGTERM",
                    _ = int.recv() => "SIGINT",
                };
                if tx.send(name).is_err() {
                    return;
                }
            }
        });
        let rx = std::sync::Arc::new(tokio::sync::Mutex::new(rx));
        let first = {
            let rx = rx.clone();
            async move {
                if let Some(s) = rx.lock().await.recv().await {
                    info!(signal = s, "signal received");
                }
            }
        };
        let second = async move {
            rx.lock().await.recv().await;
        };
        relay::run(relay, listeners, first, second).await;
        ExitCode::SUCCESS
    })
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("wanrelay: {msg}\n{USAGE}");
    ExitCode::from(2)
}
