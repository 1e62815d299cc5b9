//! `iosets soak`: the reliability suite, runnable by anyone on one machine.
//!
//! # What it is
//! Scenarios against the real server: `iosets serve` (this program) started as a child process
//! on a temporary root on loopback ([`crate::rig::child`]), driven with raw protocol frames
//! ([`crate::rig::wire`]) so that every answer, lost connection and error is seen as it is:
//!
//! - `kill9`: writers write checkable records and remember every acknowledged one while the
//!   server is SIGKILLed at random times and restarted on the same root and port; at the end
//!   every acknowledged record is read back ([`restarts`]);
//! - `sigterm`: the server is sent SIGTERM while writers are busy: it must exit 0 after a clean
//!   drain, with every acknowledged write (also those answered after the signal) on disk;
//! - `clients`: many clients × many mixed requests checked against a model of what each
//!   acknowledged write put where ([`clients`]);
//! - resource probes, each measuring the server's RSS and descriptors from `/proc` and whether a
//!   well-behaved client is still served ([`probes`]): `idle`, `slow`, `noread`, `jobs`,
//!   `fdlimit`, `fulldisk`.
//!
//! Each scenario is bounded in time and prints a line of the summary table: its parameters, what
//! it measured, and PASS/FAIL against its goal ([`report`]). `--quick` scales every scenario
//! down (the whole suite in about a minute) for the test command.
//!
//! # What it is not
//! Not a benchmark: rates it prints are for scale only. Not a crash test of the machine: a
//! SIGKILL loses no page cache, so `kill9` checks the server's acknowledgements (a write is
//! acknowledged only after `pwrite`), not durability against power loss.
//!
//! # Cleanup
//! Children run in their own process group and are SIGKILLed when dropped; the tmpfs of
//! `fulldisk` is unmounted when dropped; the first Ctrl-C (or SIGTERM) stops the current
//! scenario, cleans up and prints what was measured so far.

mod clients;
mod probes;
mod report;
mod restarts;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::rig::child::ServerSpec;
use report::{Row, Verdict};

/// Every scenario, in the order run, with what it checks.
pub(crate) const SCENARIOS: [(&str, &str); 9] = [
    (
        "kill9",
        "SIGKILL restarts under load: no acknowledged write lost",
    ),
    (
        "sigterm",
        "SIGTERM under load: exit 0 after a clean drain, nothing lost",
    ),
    (
        "clients",
        "many clients x many mixed requests against a model",
    ),
    ("idle", "silent connections: a new client is still served"),
    (
        "slow",
        "frames trickled at 1 byte/s: a new client is still served",
    ),
    ("noread", "never-reading flood: server RSS within the bound"),
    ("jobs", "many job ids: RSS <= 200 MB, /metrics <= 1 MB"),
    ("fdlimit", "fd limit: a new client served, no EMFILE to it"),
    (
        "fulldisk",
        "ENOSPC, unlink, write again: the second write succeeds",
    ),
];

/// `iosets soak` flags.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Scenarios to run, comma-separated (default all): kill9, sigterm, clients, idle, slow,
    /// noread, jobs, fdlimit, fulldisk.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    only: Vec<String>,
    /// Every scenario scaled down (about a minute in all), for the test command.
    #[arg(long)]
    quick: bool,
    /// Write soak.csv (every scenario's parameters and figures) and summary.txt here, and keep
    /// the servers' logs in DIR/logs.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// An extra flag for every `iosets serve` started (repeat for several), e.g.
    /// `--server-arg=--workers=8`.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Where `GET /metrics` is answered (host:port); default: the address the server prints
    /// after "metrics at http://" (today its data address).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    /// Seed of the random choices (kill times, offsets, operations).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// kill9 and sigterm: concurrent writers (default 8).
    #[arg(long, value_name = "N")]
    writers: Option<usize>,
    /// kill9: SIGKILL restarts (default 20; quick 3).
    #[arg(long, value_name = "N")]
    restarts: Option<usize>,
    /// sigterm: start, load, SIGTERM cycles (default 5; quick 2).
    #[arg(long, value_name = "N")]
    sigterms: Option<usize>,
    /// clients: concurrent clients (default 64; quick 8).
    #[arg(long, value_name = "N")]
    clients: Option<usize>,
    /// clients: requests per client (default 10000; quick 500).
    #[arg(long, value_name = "N")]
    requests: Option<usize>,
    /// idle: silent connections (default 2000; quick 200).
    #[arg(long, value_name = "N")]
    idle_conns: Option<usize>,
    /// slow: connections trickling 1 byte/s (default 50; quick 10).
    #[arg(long, value_name = "N")]
    slow_conns: Option<usize>,
    /// noread: flooding connections (default 32; quick 4).
    #[arg(long, value_name = "N")]
    flooders: Option<usize>,
    /// noread: the bound on the server's RSS growth during the flood, MiB (default 192: the
    /// 128 MiB in-flight bound the probe gives its server, `--max-inflight-mib`, plus 64 MiB of
    /// working memory).
    #[arg(long, value_name = "MIB")]
    rss_bound_mib: Option<u64>,
    /// jobs: distinct job ids, one small write each (default 100000; quick 10000).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// fdlimit: connections opened against the server's 1024-descriptor limit (default 2000;
    /// quick 1100).
    #[arg(long, value_name = "N")]
    fd_conns: Option<usize>,
    /// fdlimit: files written (default 6000; quick 1500).
    #[arg(long, value_name = "N")]
    fd_files: Option<usize>,
    /// idle, slow, noread: how long each probe holds, seconds (default 20; quick 3).
    #[arg(long, value_name = "SECONDS")]
    probe_s: Option<u64>,
}

/// The sizes of a run: the flags, or the full or quick defaults.
#[derive(Clone, Debug)]
pub(crate) struct Sizes {
    pub(crate) writers: usize,
    pub(crate) restarts: usize,
    pub(crate) sigterms: usize,
    pub(crate) clients: usize,
    pub(crate) requests: usize,
    pub(crate) idle_conns: usize,
    pub(crate) slow_conns: usize,
    pub(crate) flooders: usize,
    pub(crate) rss_bound_mib: u64,
    pub(crate) jobs: usize,
    pub(crate) fd_limit: u64,
    pub(crate) fd_conns: usize,
    pub(crate) fd_files: usize,
    pub(crate) probe: Duration,
    pub(crate) tmpfs_mib: u64,
}

impl Sizes {
    fn of(a: &SoakArgs) -> Result<Sizes> {
        let q = a.quick;
        let pick =
            |v: Option<usize>, full: usize, quick: usize| v.unwrap_or(if q { quick } else { full });
        let s = Sizes {
            writers: pick(a.writers, 8, 8),
            restarts: pick(a.restarts, 20, 3),
            sigterms: pick(a.sigterms, 5, 2),
            clients: pick(a.clients, 64, 8),
            requests: pick(a.requests, 10_000, 500),
            idle_conns: pick(a.idle_conns, 2000, 200),
            slow_conns: pick(a.slow_conns, 50, 10),
            flooders: pick(a.flooders, 32, 4),
            rss_bound_mib: a.rss_bound_mib.unwrap_or(probes::NOREAD_INFLIGHT_MIB + 64),
            jobs: pick(a.jobs, 100_000, 10_000),
            fd_limit: 1024,
            fd_conns: pick(a.fd_conns, 2000, 1100),
            fd_files: pick(a.fd_files, 6000, 1500),
            probe: Duration::from_secs(a.probe_s.unwrap_or(if q { 3 } else { 20 })),
            tmpfs_mib: 20,
        };
        for (flag, v) in [
            ("--writers", s.writers),
            ("--sigterms", s.sigterms),
            ("--clients", s.clients),
            ("--requests", s.requests),
            ("--slow-conns", s.slow_conns),
            ("--flooders", s.flooders),
            ("--jobs", s.jobs),
            ("--fd-files", s.fd_files),
        ] {
            if v == 0 {
                bail!("{flag} 0: expected at least 1");
            }
        }
        for (flag, v, max) in [
            ("--writers", s.writers, 1024),
            ("--clients", s.clients, 1024),
            ("--flooders", s.flooders, 256),
            ("--restarts", s.restarts, 10_000),
            ("--sigterms", s.sigterms, 1000),
            ("--idle-conns", s.idle_conns, 100_000),
            ("--slow-conns", s.slow_conns, 10_000),
            ("--fd-conns", s.fd_conns, 100_000),
            ("--jobs", s.jobs, 100_000_000),
            ("--fd-files", s.fd_files, 1_000_000),
        ] {
            if v > max {
                bail!("{flag} {v}: at most {max}");
            }
        }
        if s.probe.is_zero() || s.probe > Duration::from_secs(3600) {
            bail!(
                "--probe-s {}: expected 1 to 3600 seconds",
                s.probe.as_secs()
            );
        }
        if s.rss_bound_mib == 0 {
            bail!("--rss-bound-mib 0: expected a bound of at least 1 MiB");
        }
        Ok(s)
    }

    /// Descriptors this process needs for its own side of the connections.
    fn own_fds(&self) -> u64 {
        (self.idle_conns.max(self.fd_conns).max(self.slow_conns) + 512) as u64
    }
}

/// What every scenario needs.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// Scaled down.
    pub(crate) quick: bool,
    /// The sizes.
    pub(crate) sizes: Sizes,
    /// The seed of random choices.
    pub(crate) seed: u64,
    /// Scratch space (removed at the end).
    scratch: PathBuf,
    /// Where servers' logs go.
    logs: PathBuf,
    /// `--server-arg`s.
    extra: Vec<String>,
    /// `--metrics-addr`.
    metrics: Option<String>,
}

impl Ctx {
    /// A fresh, empty data root for `name`.
    pub(crate) fn fresh_root(&self, name: &str) -> Result<PathBuf> {
        let p = self.scratch.join(name);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(p)
    }

    /// A directory in the scratch space for `name` (not created).
    pub(crate) fn scratch_path(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    /// How to start a server for scenario `name` on `root`.
    pub(crate) fn spec(&self, name: &str, root: &Path, nofile: Option<u64>) -> ServerSpec {
        ServerSpec {
            root: root.to_path_buf(),
            logs: self.logs.clone(),
            name: name.into(),
            // The probes speak raw frames without the cluster secret's handshake: the server
            // trusts its host (the secret's own checks are the server's `hostile` tests).
            flags: ["--policy", "timeorder", "--insecure-loopback"]
                .into_iter()
                .map(String::from)
                .chain(self.extra.iter().cloned())
                .collect(),
            nofile,
            metrics: self.metrics.clone(),
        }
    }

    /// How to start a server for scenario `name` on a fresh, empty data root of its own.
    pub(crate) fn fresh_spec(&self, name: &str) -> Result<ServerSpec> {
        let root = self.fresh_root(name)?;
        Ok(self.spec(name, &root, None))
    }

    /// Fails once interrupted.
    pub(crate) fn check(&self) -> Result<()> {
        if interrupted() {
            bail!("interrupted");
        }
        Ok(())
    }

    /// The time bound of one scenario.
    pub(crate) fn bound(&self) -> Duration {
        Duration::from_secs(if self.quick { 90 } else { 900 })
    }

    /// Sleeps `d`, in slices, failing if interrupted or past `deadline`.
    pub(crate) fn sleep(&self, d: Duration, deadline: Instant) -> Result<()> {
        let end = Instant::now() + d;
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            if now >= deadline {
                bail!("the scenario's time bound passed");
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
    }
}

pub(crate) use crate::rig::interrupted;

/// The selected scenarios, in the suite's order; an unknown name is an error listing them all.
fn selected(only: &[String]) -> Result<Vec<&'static str>> {
    let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
    for o in only {
        if !names.contains(&o.trim()) {
            bail!(
                "--only {o:?}: no such scenario; choose among {}",
                names.join(", ")
            );
        }
    }
    Ok(names
        .into_iter()
        .filter(|n| only.is_empty() || only.iter().any(|o| o.trim() == *n))
        .collect())
}

/// Raises this process's soft limit of open files to what the probes need (up to the hard
/// limit, which only root may raise).
fn raise_own_fd_limit(need: u64) -> Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let cur = getrlimit(Resource::Nofile);
    if cur.current.is_none_or(|c| c >= need) {
        return Ok(());
    }
    if cur.maximum.is_some_and(|m| m < need) {
        bail!(
            "the probes need {need} open files in this process, and its hard limit is {}: \
             raise it (ulimit -Hn) or give smaller --idle-conns/--fd-conns",
            cur.maximum.unwrap_or_default()
        );
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(need),
            maximum: cur.maximum,
        },
    )
    .context("raising this process's limit of open files")
}

/// Removes the scratch space when dropped.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `iosets soak`.
pub fn run(args: &SoakArgs) -> Result<()> {
    let sizes = Sizes::of(args)?;
    let names = selected(&args.only)?;
    crate::rig::catch_interrupts()?;
    raise_own_fd_limit(sizes.own_fds())?;
    let scratch = std::env::temp_dir().join(format!("iosets-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let _cleanup = Scratch(scratch.clone());
    let logs = match &args.out {
        Some(d) => d.join("logs"),
        None => scratch.join("logs"),
    };
    let ctx = Ctx {
        quick: args.quick,
        sizes,
        seed: args.seed,
        scratch,
        logs,
        extra: args.server_args.clone(),
        metrics: args.metrics_addr.clone(),
    };
    println!(
        "iosets soak{}: {} (logs in {})",
        if ctx.quick { " --quick" } else { "" },
        names.join(", "),
        ctx.logs.display()
    );
    let mut rows = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if interrupted() {
            break;
        }
        let mut row = Row::new(name);
        let t0 = Instant::now();
        let r = match *name {
            "kill9" => restarts::kill9(&ctx, &mut row),
            "sigterm" => restarts::sigterm(&ctx, &mut row),
            "clients" => clients::run(&ctx, &mut row),
            "idle" => probes::idle(&ctx, &mut row),
            "slow" => probes::slow(&ctx, &mut row),
            "noread" => probes::noread(&ctx, &mut row),
            "jobs" => probes::jobs(&ctx, &mut row),
            "fdlimit" => probes::fdlimit(&ctx, &mut row),
            "fulldisk" => probes::fulldisk(&ctx, &mut row),
            other => unreachable!("scenario {other} is listed but not run"),
        };
        if let Err(e) = r {
            row.verdict = Verdict::Fail(format!("{e:#}"));
        }
        row.seconds = t0.elapsed().as_secs_f64();
        println!(
            "[{}/{}] {name}: {} in {:.1} s{}",
            i + 1,
            names.len(),
            row.verdict.word(),
            row.seconds,
            if row.verdict.reason().is_empty() {
                String::new()
            } else {
                format!(" ({})", row.verdict.reason())
            }
        );
        rows.push(row);
    }
    println!();
    print!("{}", report::table(&rows));
    if let Some(dir) = &args.out {
        report::save(dir, &rows)?;
        println!(
            "wrote {} and {}",
            dir.join("soak.csv").display(),
            dir.join("summary.txt").display()
        );
    }
    if interrupted() {
        bail!(
            "interrupted after {} of {} scenarios",
            rows.len(),
            names.len()
        );
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Fail(_)))
        .map(|r| r.scenario.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("{} scenario(s) failed: {}", failed.len(), failed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        soak: SoakArgs,
    }

    fn sizes(args: &[&str]) -> Result<Sizes> {
        let mut all = vec!["soak"];
        all.extend_from_slice(args);
        Sizes::of(&Cli::try_parse_from(all).unwrap().soak)
    }

    #[test]
    fn quick_scales_down_and_flags_win() {
        let full = sizes(&[]).unwrap();
        assert_eq!(
            (full.restarts, full.clients, full.requests),
            (20, 64, 10_000)
        );
        assert_eq!(
            (full.idle_conns, full.jobs, full.fd_files),
            (2000, 100_000, 6000)
        );
        let quick = sizes(&["--quick"]).unwrap();
        assert_eq!((quick.restarts, quick.clients, quick.requests), (3, 8, 500));
        let mixed = sizes(&["--quick", "--restarts", "7"]).unwrap();
        assert_eq!(mixed.restarts, 7);
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(format!("{:#}", sizes(&["--clients", "0"]).unwrap_err()).contains("--clients 0"));
        assert!(format!("{:#}", sizes(&["--probe-s", "0"]).unwrap_err()).contains("--probe-s"));
    }

    #[test]
    fn only_selects_in_suite_order_and_refuses_unknown_names() {
        let pick = |v: &[&str]| selected(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            pick(&["clients", "kill9"]).unwrap(),
            vec!["kill9", "clients"]
        );
        assert_eq!(pick(&[]).unwrap().len(), SCENARIOS.len());
        let e = pick(&["kill"]).unwrap_err().to_string();
        assert!(
            e.contains("no such scenario") && e.contains("fulldisk"),
            "{e}"
        );
    }

    #[test]
    fn server_args_take_flags() {
        let c =
            Cli::try_parse_from(["soak", "--server-arg", "--workers", "--server-arg=8"]).unwrap();
        assert_eq!(c.soak.server_args, vec!["--workers", "8"]);
    }
}
