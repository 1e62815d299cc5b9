//! The lab's rig: what every experiment and the soak suite start and stop with.
//!
//! - [`cluster`]: K servers and one FUSE mount in this process, with the applications as child
//!   processes (seed 004's experiment and the random workloads);
//! - [`child`]: `iosets serve` as a child process, started, killed, stopped and measured (the
//!   soak suite and seed 003's experiment, which measures the server's own CPU);
//! - [`wire`]: a raw-frame client, for what a well-behaved client never sends;
//! - [`plots`]: one palette and the helpers every plot shares;
//! - here: the Ctrl-C / SIGTERM flag every run polls, the clock, scratch space, this program's
//!   path and the last lines of a log.

pub(crate) mod child;
pub(crate) mod cluster;
pub(crate) mod plots;
pub(crate) mod wire;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use anyhow::{Context, Result};

/// Set by the first Ctrl-C or SIGTERM once [`catch_interrupts`] ran.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Whether the signal handler is installed (once per process).
static SIGNALS: OnceLock<Result<(), String>> = OnceLock::new();

/// Whether the run was interrupted (Ctrl-C or SIGTERM).
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs the Ctrl-C / SIGTERM handler of this process, once: the first signal sets
/// [`INTERRUPTED`] (the run in progress stops and cleans up), a second one exits at once.
pub(crate) fn catch_interrupts() -> Result<()> {
    SIGNALS
        .get_or_init(|| install_interrupt().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// [`catch_interrupts`]'s handler: a thread of its own waiting for the signals.
fn install_interrupt() -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal handler")?;
    // Registered here, before the thread runs, so that no signal is missed or kills us.
    let (mut int, mut term) = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("iosets-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                loop {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                    if INTERRUPTED.swap(true, Ordering::SeqCst) {
                        eprintln!("interrupted twice: exiting without cleaning up");
                        std::process::exit(130);
                    }
                    eprintln!("interrupted: stopping the run and cleaning up");
                }
            })
        })
        .context("starting the signal thread")?;
    Ok(())
}

/// Seconds since the UNIX epoch.
pub(crate) fn unix_now() -> f64 {
    iosets_types::UnixNanos::now().0 as f64 / 1e9
}

/// A directory for scratch data: tmpfs when there is one (the emulated device is the servers'
/// throttle; a real disk under it would add its own fsync delays), else the temporary directory.
pub(crate) fn scratch_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir()
        && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
        && tempfile_probe(shm);
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn tempfile_probe(dir: &Path) -> bool {
    let p = dir.join(format!(".iosets-probe-{}", std::process::id()));
    let ok = std::fs::write(&p, b"").is_ok();
    let _ = std::fs::remove_file(&p);
    ok
}

/// This program, to run the applications with: `/proc/self/exe` (the running binary even if a
/// rebuild has replaced its file since), else its path.
pub(crate) fn this_program() -> Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe().context("locating this program")
}

/// The last lines of a file.
pub(crate) fn tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// `: "last lines"` of a log, or nothing.
pub(crate) fn quote(path: &Path) -> String {
    let t = tail(path, 3);
    if t.is_empty() {
        String::new()
    } else {
        format!(": {}", t.join(" | "))
    }
}

/// A UTC timestamp for directory names: `YYYYMMDD-HHMMSS`.
pub(crate) fn timestamp() -> String {
    let secs = unix_now() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_look_like_dates() {
        let t = timestamp();
        assert_eq!(t.len(), 15, "{t}");
        assert_eq!(&t[8..9], "-");
        assert!(t[..8].chars().all(|c| c.is_ascii_digit()), "{t}");
        assert!(t.starts_with("20"), "{t}");
    }
}
