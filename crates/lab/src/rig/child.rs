//! A server as a child process: `iosets serve` (this very program) on loopback, started,
//! killed with SIGKILL, stopped with SIGTERM, and measured from `/proc` — the soak suite's
//! server under test, and seed 003's server, whose own CPU time is measured.
//!
//! The child runs in its own process group, so a Ctrl-C at the terminal reaches the lab only,
//! which then stops its children itself; dropping a [`ServerProc`] SIGKILLs a server still
//! running, so no exit path leaves one behind.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::rig::quote;

/// How long a server may take to print its address.
const START: Duration = Duration::from_secs(30);
/// How long a restart on the same port may retry while the port is still taken.
const REBIND: Duration = Duration::from_secs(10);
/// How often the child is polled.
const POLL: Duration = Duration::from_millis(20);

/// How to start a server.
#[derive(Clone, Debug)]
pub(crate) struct ServerSpec {
    /// The directory it serves.
    pub(crate) root: PathBuf,
    /// Where its output goes: `NAME-N.stdout` and `NAME-N.stderr`, N counting starts (or
    /// `STEM.stdout` and `STEM.stderr`, [`ServerSpec::start_as`]).
    pub(crate) logs: PathBuf,
    /// The log files' prefix.
    pub(crate) name: String,
    /// Its flags after `--root` and `--listen` (policy, workers, token, secret, …).
    pub(crate) flags: Vec<String>,
    /// Run it under this limit of open files (soft and hard), through `prlimit`.
    pub(crate) nofile: Option<u64>,
    /// The metrics address, when not the one the server prints.
    pub(crate) metrics: Option<String>,
}

/// A running (or exited) server child.
#[derive(Debug)]
pub(crate) struct ServerProc {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Where `GET /metrics` is answered (`host:port`).
    pub(crate) metrics: String,
    /// Its standard error, to name in failures.
    pub(crate) stderr: PathBuf,
    /// The status it exited with, once reaped.
    status: Option<ExitStatus>,
}

/// Memory and descriptors of a process, from `/proc`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Usage {
    /// Resident set, KiB (`VmRSS`).
    pub(crate) rss_kib: u64,
    /// Open file descriptors.
    pub(crate) fds: u64,
}

impl Usage {
    /// Resident set, MiB.
    pub(crate) fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }
}

impl ServerSpec {
    /// Starts a server on `listen` (`127.0.0.1:0` for any port); `attempt` numbers its logs.
    /// A fixed port still held (a killed server's sockets) is retried for a while.
    pub(crate) fn start(&self, listen: &str, attempt: usize) -> Result<ServerProc> {
        self.start_as(listen, &format!("{}-{attempt}", self.name))
    }

    /// Starts a server on `listen`, its output in `STEM.stdout` and `STEM.stderr`.
    pub(crate) fn start_as(&self, listen: &str, stem: &str) -> Result<ServerProc> {
        let deadline = Instant::now() + REBIND;
        loop {
            match self.start_once(listen, stem) {
                Err(e) if Instant::now() < deadline && format!("{e:#}").contains("in use") => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                r => return r,
            }
        }
    }

    fn start_once(&self, listen: &str, stem: &str) -> Result<ServerProc> {
        std::fs::create_dir_all(&self.logs)
            .with_context(|| format!("creating {}", self.logs.display()))?;
        let stdout_path = self.logs.join(format!("{stem}.stdout"));
        let stderr = self.logs.join(format!("{stem}.stderr"));
        let err =
            File::create(&stderr).with_context(|| format!("creating {}", stderr.display()))?;
        // The real path (`/proc/self/exe` would name `prlimit` once it runs).
        let exe = std::env::current_exe().context("locating this program")?;
        let mut cmd = match self.nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.arg("serve")
            .arg("--root")
            .arg(&self.root)
            .args(["--listen", listen])
            .args(&self.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0);
        let mut child = cmd.spawn().with_context(|| {
            if self.nofile.is_some() {
                "starting `prlimit ... iosets serve` (is util-linux's prlimit installed?)"
            } else {
                "starting `iosets serve`"
            }
        })?;
        let out = child.stdout.take().expect("piped");
        let mut copy = File::create(&stdout_path)
            .with_context(|| format!("creating {}", stdout_path.display()))?;
        let (tx, rx) = channel::<String>();
        std::thread::Builder::new()
            .name("server-stdout".into())
            .spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = writeln!(copy, "{line}");
                    let _ = tx.send(line);
                }
            })
            .context("starting the server's output reader")?;
        let mut server = ServerProc {
            child,
            addr: "127.0.0.1:0".parse().expect("an address"),
            metrics: String::new(),
            stderr,
            status: None,
        };
        let deadline = Instant::now() + START;
        loop {
            match rx.recv_timeout(POLL) {
                Ok(line) => {
                    if let Some((addr, metrics)) = banner(&line) {
                        server.addr = addr
                            .parse()
                            .with_context(|| format!("the server printed {line:?}"))?;
                        server.metrics = self.metrics.clone().unwrap_or(metrics);
                        return Ok(server);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    let status = server.wait()?;
                    bail!(
                        "the server exited at start ({status}); see {}{}",
                        server.stderr.display(),
                        quote(&server.stderr)
                    );
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "the server printed no address within {} s; see {}",
                    START.as_secs(),
                    server.stderr.display()
                );
            }
        }
    }
}

/// The listening address and the metrics address of the server's first line (`... listening on
/// ADDR ... metrics at http://ADDR/metrics`); the metrics address defaults to the listening one.
fn banner(line: &str) -> Option<(String, String)> {
    let addr = line
        .split_once("listening on ")?
        .1
        .split_whitespace()
        .next()?
        .trim_end_matches([',', ';'])
        .to_string();
    let metrics = line
        .split_once("http://")
        .and_then(|(_, rest)| rest.split('/').next())
        .filter(|m| !m.is_empty())
        .map_or_else(|| addr.clone(), str::to_owned);
    Some((addr, metrics))
}

impl ServerProc {
    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub(crate) fn running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(st)) => {
                self.status = Some(st);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// Its exit status if it has exited (reaped then), `None` while it runs.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.running() {
            None
        } else {
            self.wait().ok()
        }
    }

    /// SIGKILL, and reap it.
    pub(crate) fn kill9(&mut self) -> Result<()> {
        if self.running() {
            self.child.kill().context("SIGKILL to the server")?;
        }
        self.wait()?;
        Ok(())
    }

    /// Sends SIGTERM (if it still runs).
    pub(crate) fn sigterm(&mut self) {
        if self.running() {
            let pid = rustix::process::Pid::from_child(&self.child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }

    /// Waits up to `within` for it to exit: its status, or `None` if it still ran (then it is
    /// SIGKILLed).
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + within;
        while self.running() {
            if Instant::now() > deadline {
                self.kill9()?;
                return Ok(None);
            }
            std::thread::sleep(POLL);
        }
        self.wait().map(Some)
    }

    /// SIGTERM, then the exit within `within`: its status, or an error (killed past it).
    pub(crate) fn stop(&mut self, within: Duration) -> Result<ExitStatus> {
        self.sigterm();
        self.wait_exit(within)?.ok_or_else(|| {
            anyhow!(
                "the server did not exit within {} s of SIGTERM (killed); see {}",
                within.as_secs(),
                self.stderr.display()
            )
        })
    }

    fn wait(&mut self) -> Result<ExitStatus> {
        if let Some(st) = self.status {
            return Ok(st);
        }
        let st = self.child.wait().context("waiting for the server")?;
        self.status = Some(st);
        Ok(st)
    }

    /// Its memory and descriptors now.
    pub(crate) fn usage(&self) -> Result<Usage> {
        usage_of(self.pid())
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

/// `VmRSS` and the open descriptors of process `pid`.
pub(crate) fn usage_of(pid: u32) -> Result<Usage> {
    let status_path = format!("/proc/{pid}/status");
    let status =
        std::fs::read_to_string(&status_path).with_context(|| format!("reading {status_path}"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{status_path}: no VmRSS line"))?;
    let fd_dir = format!("/proc/{pid}/fd");
    let fds = std::fs::read_dir(&fd_dir)
        .with_context(|| format!("listing {fd_dir}"))?
        .count() as u64;
    Ok(Usage { rss_kib, fds })
}

/// `exit 0`, `exit 1`, `signal 9`.
pub(crate) fn describe_status(st: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => st.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_gives_both_addresses() {
        let line = "iosets serve: listening on 127.0.0.1:4242 (policy timeorder, 4 workers, root \
                    /tmp/x; control disabled (no token)); metrics at http://127.0.0.1:4242/metrics";
        assert_eq!(
            banner(line),
            Some(("127.0.0.1:4242".into(), "127.0.0.1:4242".into()))
        );
        let admin =
            "iosets serve: listening on 127.0.0.1:1 (x); metrics at http://127.0.0.1:2/metrics";
        assert_eq!(
            banner(admin),
            Some(("127.0.0.1:1".into(), "127.0.0.1:2".into()))
        );
        assert_eq!(
            banner("iosets serve: listening on 127.0.0.1:5"),
            Some(("127.0.0.1:5".into(), "127.0.0.1:5".into()))
        );
        assert_eq!(banner("starting"), None);
    }

    #[test]
    fn this_process_has_usage() {
        let u = usage_of(std::process::id()).unwrap();
        assert!(u.rss_kib > 0);
        assert!(u.fds >= 3);
    }
}
