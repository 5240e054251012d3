//! `wanem --config FILE.json --control SOCKET [--monitor FILE.csv]`

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use wanem::runtime::{self, Options};

const USAGE: &str = "usage: wanem --config FILE.json --control /path/to/control.sock [--monitor /path/to/out.csv]";

/// Parses the command line; `Ok(None)` means help was asked for.
fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Option<Options>, String> {
    let mut config = None;
    let mut control = None;
    let mut monitor = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("argument {a:?} is not UTF-8"))?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let slot = match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--config" => &mut config,
            "--control" => &mut control,
            "--monitor" => &mut monitor,
            _ => return Err(format!("unknown argument {arg:?}")),
        };
        let value = match inline {
            Some(v) => v,
            None => args
                .next()
                .and_then(|v| v.into_string().ok())
                .ok_or_else(|| format!("{flag} needs a value"))?,
        };
        if value.is_empty() {
            return Err(format!("{flag} needs a non-empty value"));
        }
        if slot.replace(PathBuf::from(value)).is_some() {
            return Err(format!("{flag} given twice"));
        }
    }
    Ok(Some(Options {
        config: config.ok_or("--config is required")?,
        control: control.ok_or("--control is required")?,
        monitor,
    }))
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args_os().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("wanem: error: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match runtime::run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wanem: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn accepts_separate_and_inline_values() {
        let o = parse(&["--config", "c.json", "--control=/s.sock", "--monitor", "m.csv"])
            .unwrap()
            .unwrap();
        assert_eq!(o.config, PathBuf::from("c.json"));
        assert_eq!(o.control, PathBuf::from("/s.sock"));
        assert_eq!(o.monitor, Some(PathBuf::from("m.csv")));
    }

    #[test]
    fn rejects_missing_unknown_and_repeated_arguments() {
        assert!(parse(&["--config", "c.json"]).is_err());
        assert!(parse(&["--control", "s"]).is_err());
        assert!(parse(&["--config", "c", "--control", "s", "--bogus"]).is_err());
        assert!(parse(&["--config", "c", "--config", "d", "--control", "s"]).is_err());
        assert!(parse(&["--config"]).is_err());
        assert_eq!(parse(&["--help"]), Ok(None));
    }
}
