//! `wanrelay --config FILE [--check]`: the relay daemon. See docs/wanrelay.md.
//!
//! Exit codes: 0 clean shutdown (SIGTERM/SIGINT) or `--check` passed;
//! 1 runtime failure (a listener cannot be bound, ...); 2 usage error;
//! 3 invalid configuration; 4 unusable key file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Mutex;
use tracing::{error, info, warn};
use wanproto::PresharedKey;
use wanrelay::config::Config;
use wanrelay::daemon::listeners;
use wanrelay::daemon::relay::Relay;
use wanrelay::daemon::run::run;

const USAGE: &str = "usage: wanrelay --config FILE [--check]
       wanrelay --version

  --config FILE  relay configuration (TOML, or JSON if FILE ends in .json);
                 see docs/wanrelay.md
  --check        validate the configuration and the key file, then exit
exit codes: 0 ok, 1 runtime failure, 2 usage, 3 bad configuration, 4 bad key file";

fn main() -> ExitCode {
    let (path, check) = match parse_args(std::env::args().skip(1)) {
        Ok(x) => x,
        Err(code) => return code,
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
        return checked(&path, &config, key_warning);
    }
    init_logging(&config.log_level);
    if let Some(w) = key_warning {
        warn!("{w}");
    }
    let runtime = match runtime(config.threads) {
        Ok(r) => r,
        Err(e) => {
            error!(error = %e, "cannot start the runtime");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(serve(config, key))
}

/// The configuration file and whether to `--check` it; the exit code when
/// there is nothing to run (`--version`, `--help`, a usage error).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(PathBuf, bool), ExitCode> {
    let mut config: Option<PathBuf> = None;
    let mut check = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" | "-c" => match args.next() {
                Some(p) => config = Some(p.into()),
                None => return Err(usage("--config needs a file")),
            },
            s if s.starts_with("--config=") => config = Some(s["--config=".len()..].into()),
            "--check" => check = true,
            "--version" | "-V" => {
                println!("wanrelay {}", env!("CARGO_PKG_VERSION"));
                return Err(ExitCode::SUCCESS);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Err(ExitCode::SUCCESS);
            }
            other => return Err(usage(&format!("unknown argument {other:?}"))),
        }
    }
    match config {
        Some(path) => Ok((path, check)),
        None => Err(usage("--config FILE is required")),
    }
}

/// `--check` passed: says so (with the key file's warning, if any).
fn checked(path: &Path, config: &Config, key_warning: Option<String>) -> ExitCode {
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
    ExitCode::SUCCESS
}

/// Logs to stderr at `log_level` (a level or a tracing filter).
fn init_logging(log_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The tokio runtime of `threads` threads.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    // `threads = 1` (the default): one thread runs every task, so a byte
    // crossing the relay never waits for a wake-up on another thread.
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build()
}

/// Binds the listeners and runs the relay until SIGTERM or SIGINT (a
/// second signal skips the shutdown grace).
async fn serve(config: Config, key: PresharedKey) -> ExitCode {
    let listeners = match listeners::bind(&config).await {
        Ok(l) => l,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    let Some(signals) = forward_signals() else {
        error!("cannot install signal handlers");
        return ExitCode::from(1);
    };
    let relay = Relay::new(config, key);
    let signals = Arc::new(Mutex::new(signals));
    let first = {
        let signals = signals.clone();
        async move {
            if let Some(s) = signals.lock().await.recv().await {
                info!(signal = s, "signal received");
            }
        }
    };
    let second = async move {
        signals.lock().await.recv().await;
    };
    run(relay, listeners, first, second).await;
    ExitCode::SUCCESS
}

/// A channel that receives the name of every SIGTERM and SIGINT; `None`
/// when the handlers cannot be installed.
fn forward_signals() -> Option<UnboundedReceiver<&'static str>> {
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => return None,
    };
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
    Some(rx)
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("wanrelay: {msg}\n{USAGE}");
    ExitCode::from(2)
}
